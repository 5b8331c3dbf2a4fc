import { mkdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import {
  oneLine,
  type EventBus,
  type Logger,
  type PermissionGate,
  type TrashDialect,
  safeStatSync,
} from '@conch/core';
import { defaultOutputDir, onHostExit, outputFileName, prepareOutputDir } from '@conch/process';
import { AbortedError, PermissionGateMissingError, readRegularFileSync } from '@conch/core';
import { analyzeCommand } from './command-analysis.js';
import { TerminalCommandError } from './errors/terminal-command-error.js';
import type { TerminalConfig } from './config.js';
import { TerminalSessionError } from './errors/terminal-session-error.js';
import { TerminalProtocolError } from './errors/terminal-protocol-error.js';
import { capTotal, cleanOutput, lastLine } from './output-cleaner.js';
import { killSessionTrees, sweepCookie } from './process-tree.js';
import { lookAt, ProcSnapshot, StallClock } from './shell-progress.js';
import { looksLikePrompt } from './prompt-detector.js';
import { PtySession } from './pty-session.js';
import {
  publicState,
  type SessionExitReason,
  type SessionLifecycleState,
  type SessionState,
} from './session-state.js';
import { spawnLocalPty, type SessionPtySpawner } from './session-pty.js';
import { ENV_NAME, type ShellKind } from './shell-scripts.js';
import './events.js';

/** A session as a UI shows it. */
export interface TerminalSessionInfo {
  id: number;
  state: SessionState;
  /** The command running (or last run); undefined for a fresh shell. */
  command: string | undefined;
  pid: number;
  cwd: string;
  /** The last non-empty line of the current command's output, cleaned. */
  lastLine: string;
  startedAt: number;
  ageMs: number;
  /** Time since the session last printed or was written to. */
  quietMs: number;
  logPath: string;
}

/** The host API for UIs, registered under `TERMINAL_SERVICE`. */
export interface TerminalService {
  list(): TerminalSessionInfo[];
  /** The session's full log (every command with its raw output); `clean` strips ANSI etc. */
  readLog(id: number, options?: { clean?: boolean }): Promise<string>;
  /** Kills a session and its whole process tree. Resolves false for an unknown id. */
  kill(id: number): Promise<boolean>;
  /**
   * Runs a command to its end through the same sessions, login shell and permission gate as the
   * tool (no gate: refused, as the tool is) and returns its whole cleaned output and exit code.
   * `timeout` (seconds, default 120) plus `graceSeconds` (60) is a hard deadline: a command still running then is
   * killed with its session, and `exit_code` is null — the only case it is. Throws a
   * `CommandRefusedError` (`PERMISSION_DENIED`, `EXEC_REPLACES_SHELL`), `PermissionGateMissingError`
   * or `TerminalSessionError` when it cannot run.
   */
  runSync(command: string, options?: RunSyncOptions): Promise<RunSyncResult>;
}

export interface RunSyncOptions {
  /** Seconds; the deadline is this plus 60 s. Default 120. */
  timeout?: number;
  /** Directory to cd into first (relative to the session's cwd; persists, like a typed cd). */
  cwd?: string;
  /** Variables for this command only. */
  env?: Readonly<Record<string, string>>;
  /** Seconds past `timeout` before the session is killed (default 60). */
  graceSeconds?: number;
  signal?: AbortSignal;
}

export interface RunSyncResult {
  output: string;
  /** null only when the deadline passed and the session was killed. */
  exit_code: number | null;
}

export type CollectOutcome =
  'done' | 'exited' | 'waiting' | 'background' | 'timeout' | 'aborted' | 'broken' | 'matched';

export interface CollectMode {
  /** Collect exactly `timeoutMs` then report 'background' (startup of a background command). */
  background: boolean;
  timeoutMs: number;
  /** Silence that reports 'waiting' (Infinity: never). */
  idleMs: number;
  detectPrompt: boolean;
  /** Return ('matched') as soon as output not yet returned matches this (`wait_for`). */
  waitFor?: RegExp;
}

/** What a call returns when its command finished. */
export interface FinishedResult extends Record<string, unknown> {
  exit_code: number;
  output: string;
  cwd: string;
  output_file?: string;
}

/** What a call returns when its command still runs. */
export interface RunningResult extends Record<string, unknown> {
  session_id: number;
  state: 'waiting' | 'background';
  output: string;
  output_file?: string;
}

interface PoolDeps {
  config: TerminalConfig;
  logger: Logger;
  events: EventBus;
  /** The registry's temp dir (created lazily). */
  tempDir: () => string;
  /** Where the first shell starts. */
  cwd: string;
  /** How shells get their PTY (default: node-pty in this process). */
  spawnPty?: SessionPtySpawner;
  /** The trash whose rm function sessions define (config `safeRm`), read when a session starts. */
  trash?: () => { readonly dir: string; shellFunction(dialect: TrashDialect): string } | undefined;
  /** The permission gate runSync asks (the registry's, read per call). */
  gate?: () => PermissionGate | undefined;
  /** Where output files handed to the model go (default: the per-user XDG cache directory). */
  outputDir?: string;
  /**
   * What the sandbox's guard saw a session's processes do since it was last asked (by the
   * session's cookie): the process manager's `takeSandboxActivity`.
   */
  sandboxActivity?: (
    cookie: string,
  ) => Promise<{ plants: readonly { kind: string; path: string; detail: string }[] } | undefined>;
}

/** A shell the pool's watchdog judges: while it starts, or from a typed line to its begin marker. */
interface Watched {
  session: PtySession;
  phase: 'start' | 'begin';
  since: number;
  clock: StallClock;
}

/**
 * A tool call's hold on a session: while it is held, no other call reads the session, runs a
 * command in it or reaps it. Released exactly once (further calls are no-ops).
 */
export class SessionLease {
  readonly session: PtySession;
  private readonly onRelease: (lease: SessionLease) => void;
  private held = true;

  constructor(session: PtySession, onRelease: (lease: SessionLease) => void) {
    this.session = session;
    this.onRelease = onRelease;
  }

  get active(): boolean {
    return this.held;
  }

  release(): void {
    if (!this.held) return;
    this.held = false;
    this.onRelease(this);
  }
}

/**
 * The pool of persistent shells: hands an idle shell (the most recently used, so `cd`/`export`
 * carry over between calls) to each new command, never a busy one; spawns up to `maxSessions`;
 * reaps idle shells; kills every shell and its process tree on dispose and on host exit. A
 * session's state is its lifecycle (session-state.ts); who holds it is its lease.
 */
export class SessionPool implements TerminalService {
  private readonly deps: PoolDeps;
  private readonly spawnPty: SessionPtySpawner;
  private shellChoice: { shell: string; kind: ShellKind } | undefined;
  private readonly sessions = new Map<number, PtySession>();
  /** Why sessions that ended while no call held them ended (see forget), by id. */
  private readonly endedOnTheirOwn = new Map<number, string>();
  private readonly leases = new Map<number, SessionLease>();
  private readonly listeners = new Map<number, Set<() => void>>();
  /** Sweeps of sessions whose shell exited, still running (dispose waits for them). */
  private readonly sweeps = new Set<Promise<void>>();
  /** Cookies of exited sessions whose sweep has not finished (a host exit SIGKILLs them). */
  private readonly sweepingCookies = new Set<string>();
  private starting = 0;
  private nextId = 1;
  private spillCount = 0;
  private syncCalls = 0;
  private lastCwd: string;
  private reaper: NodeJS.Timeout | undefined;
  /** Shells the watchdog judges by their progress, and its timer (running only while there are some). */
  private readonly watched = new Map<number, Watched>();
  private watchTimer: NodeJS.Timeout | undefined;
  private disposing: Promise<void> | undefined;
  private readonly removeExitHook: () => void;
  private readonly onProcessExit = () => {
    for (const session of this.sessions.values()) session.killSync();
    for (const cookie of this.sweepingCookies) sweepCookie(cookie);
  };

  constructor(deps: PoolDeps) {
    this.deps = deps;
    this.spawnPty = deps.spawnPty ?? spawnLocalPty;
    this.lastCwd = deps.cwd;
    // The process package's one host-exit hook (signal-exit): also covers a host killed by
    // SIGTERM / SIGINT / SIGHUP that nothing handles.
    this.removeExitHook = onHostExit(this.onProcessExit);
  }

  get config(): TerminalConfig {
    return this.deps.config;
  }

  /** Where output files handed to the model go. */
  get outputDir(): string {
    return this.deps.outputDir ?? defaultOutputDir(process.env, this.deps.cwd);
  }

  async runSync(command: string, options: RunSyncOptions = {}): Promise<RunSyncResult> {
    const timeout = options.timeout ?? 120;
    if (typeof command !== 'string' || command.trim() === '') {
      throw new TerminalCommandError(
        'INVALID_ARGUMENTS',
        `runSync command: expected a shell command; given ${JSON.stringify(command)}`,
      );
    }
    if (typeof timeout !== 'number' || !(timeout > 0) || !Number.isFinite(timeout)) {
      throw new TerminalCommandError(
        'INVALID_ARGUMENTS',
        `runSync timeout: expected a positive number of seconds; given ${JSON.stringify(timeout)}`,
      );
    }
    const grace = options.graceSeconds ?? 60;
    if (typeof grace !== 'number' || !(grace >= 0) || !Number.isFinite(grace)) {
      throw new TerminalCommandError(
        'INVALID_ARGUMENTS',
        `runSync graceSeconds: expected a number of seconds >= 0; given ${JSON.stringify(grace)}`,
      );
    }
    const badEnv = Object.keys(options.env ?? {}).find(
      (name) => !ENV_NAME.test(name) || name.startsWith('__conch_'),
    );
    if (badEnv !== undefined) {
      throw new TerminalCommandError(
        'INVALID_ARGUMENTS',
        `runSync env: expected variable names matching [A-Za-z_][A-Za-z0-9_]* not starting with __conch_; given ${JSON.stringify(badEnv)}`,
      );
    }
    const signal = options.signal ?? new AbortController().signal;
    const analysis = await analyzeCommand(command, { dialect: this.shellKind });
    if (analysis.replacesShell !== undefined) {
      throw new TerminalCommandError('EXEC_REPLACES_SHELL', execRefusal(analysis.replacesShell));
    }
    // The same gate as the tool; without one, refused as the tool is.
    const gate = this.deps.gate?.();
    if (!gate) throw new PermissionGateMissingError('terminal');
    const decision = await gate.check(
      {
        kind: 'command',
        tool: 'terminal',
        command,
        ...(options.env && Object.keys(options.env).length > 0 ? { env: options.env } : {}),
        cwd: resolve(this.expectedCwd(), options.cwd ?? '.'),
        dialect: this.shellKind,
      },
      { callId: `terminal-runSync-${++this.syncCalls}`, signal },
    );
    if (decision.outcome !== 'allow') {
      throw new TerminalCommandError('PERMISSION_DENIED', `Permission denied: ${decision.reason}`, {
        ...(decision.rule ? { rule: decision.rule } : {}),
      });
    }
    const lease = await this.claim(undefined);
    const { session } = lease;
    try {
      if (signal.aborted) {
        this.abandon(lease);
        throw new AbortedError('terminal runSync');
      }
      const startedAt = performance.now();
      const seq = session.run(command, {
        ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
        ...(options.env === undefined ? {} : { env: options.env }),
      });
      this.deps.events.emit('terminal.command.started', {
        sessionId: session.id,
        seq,
        command,
        cwd: session.cwd,
      });
      // Polled to the end: no idle or prompt return, a hard deadline of timeout + 60 s.
      const outcome = await this.collect(
        session,
        { background: false, timeoutMs: (timeout + grace) * 1000, idleMs: Infinity, detectPrompt: false },
        signal,
      );
      const dropped = session.droppedChars;
      session.droppedChars = 0;
      const raw = session.takeUnread();
      const output =
        (dropped > 0
          ? `[${dropped} earlier chars were over the in-memory cap; the session log has them: ${session.logPath}]\n`
          : '') + cleanOutput(raw, { maxLineChars: Number.MAX_SAFE_INTEGER }).full;
      const loss = outcome === 'exited' && !session.done ? supervisorLoss(session) : undefined;
      if (loss) {
        throw new TerminalCommandError(
          loss.code,
          `runSync: ${loss.error} Output so far:\n${output.slice(-2000)}`,
        );
      }
      if (outcome === 'done' || outcome === 'exited') {
        const exitCode = session.done?.exitCode ?? session.exit?.exitCode ?? -1;
        const cwd = session.done?.cwd ?? session.cwd;
        session.done = undefined;
        if (session.lifecycle.state === 'finished') {
          this.lastCwd = cwd;
          session.lifecycle.takeResult();
        }
        this.deps.events.emit('terminal.command.finished', {
          sessionId: session.id,
          exitCode,
          cwd,
          durationMs: Math.round(performance.now() - startedAt),
        });
        return { output, exit_code: exitCode };
      }
      // The deadline passed (or the caller aborted, or the shell broke): nothing of it keeps running.
      await this.kill(session.id, outcome === 'broken' ? 'broken' : 'killed');
      if (outcome === 'aborted') throw new AbortedError('terminal runSync', signal.reason);
      if (outcome === 'broken') {
        throw new TerminalCommandError(
          'SHELL_PROTOCOL_BROKEN',
          `runSync: the session's shell stopped following the terminal protocol; it was killed. Output so far:\n${output.slice(-2000)}`,
        );
      }
      return { output, exit_code: null };
    } finally {
      lease.release();
    }
  }

  /** The shell sessions run, and the dialect the gate must read their commands in. */
  get shellKind(): ShellKind {
    this.shellChoice ??= resolveShell(this.deps.config.shell, this.deps.logger);
    return this.shellChoice.kind;
  }

  get(id: number): PtySession | undefined {
    return this.sessions.get(id);
  }

  /** Whether a tool call holds the session right now. */
  isLeased(id: number): boolean {
    return this.leases.has(id);
  }

  liveIds(): number[] {
    return [...this.sessions.keys()];
  }

  /** The cwd a new command would start in (for the permission request). */
  expectedCwd(sessionId?: number, outside = false): string {
    if (sessionId !== undefined) return this.sessions.get(sessionId)?.cwd ?? this.lastCwd;
    return this.pickIdle(outside)?.cwd ?? this.lastCwd;
  }

  /**
   * Claims a shell for a new command: the named one if it is idle, else the most recently used
   * idle one, else a new one. The session is `running` and leased to the caller, who types the
   * command (`session.run`) or gives it back (`abandon`). Throws a TerminalSessionError
   * (UNKNOWN_SESSION, SESSION_BUSY, POOL_FULL, POOL_DISPOSED, SHELL_START_FAILED).
   */
  async claim(sessionId: number | undefined, outside = false): Promise<SessionLease> {
    if (this.disposing) throw this.shuttingDown();
    if (sessionId !== undefined) {
      const session = this.live(sessionId);
      if (!session)
        throw new TerminalSessionError('UNKNOWN_SESSION', this.unknownSession(sessionId), sessionId);
      if (session.lifecycle.state !== 'idle' || this.leases.has(sessionId)) {
        const state = publicState(session.lifecycle.state);
        throw new TerminalSessionError(
          'SESSION_BUSY',
          `session_id ${sessionId} is busy (${state}${session.command ? `: ${JSON.stringify(session.command)}` : ''}); ` +
            `answer its program with { session_id: ${sessionId}, input }, end it with { session_id: ${sessionId}, kill: true }, ` +
            'or omit session_id to run the command in another shell',
          sessionId,
        );
      }
      return this.startCommand(session);
    }
    const idle = this.pickIdle(outside);
    if (idle) return this.startCommand(idle);
    if (this.sessions.size + this.starting >= this.deps.config.maxSessions) {
      const busy = [...this.sessions.values()]
        .map((s) => `${s.id} (${publicState(s.lifecycle.state)})`)
        .join(', ');
      throw new TerminalSessionError(
        'POOL_FULL',
        `all ${this.deps.config.maxSessions} terminal sessions are busy: ${busy}. ` +
          'End one with { session_id, kill: true } or wait for one to finish',
      );
    }
    return this.spawn(outside);
  }

  /**
   * Holds a session with a command (running, or finished and unread) for an input or a poll.
   * Throws a TerminalSessionError: UNKNOWN_SESSION, SESSION_BUSY (another call reads it),
   * NO_RUNNING_COMMAND (its last result was returned).
   */
  acquire(sessionId: number): SessionLease {
    const session = this.live(sessionId);
    if (!session)
      throw new TerminalSessionError('UNKNOWN_SESSION', this.unknownSession(sessionId), sessionId);
    if (this.leases.has(sessionId)) {
      throw new TerminalSessionError(
        'SESSION_BUSY',
        `session_id ${sessionId} is being read by another call right now; wait for that result, then try again`,
        sessionId,
      );
    }
    if (!session.lifecycle.hasCommand) {
      throw new TerminalSessionError(
        'NO_RUNNING_COMMAND',
        `session_id ${sessionId} has no running command (its last command finished and its result was returned); start a new one with { command }`,
        sessionId,
      );
    }
    return this.lease(session);
  }

  /** Gives back a claimed session whose command was never typed. */
  abandon(lease: SessionLease): void {
    if (lease.session.lifecycle.state === 'running' && !lease.session.begun)
      lease.session.lifecycle.abandon();
    lease.release();
  }

  /** Waits for the current command of a session to finish, prompt, go quiet or time out. */
  collect(session: PtySession, mode: CollectMode, signal: AbortSignal): Promise<CollectOutcome> {
    const { promptQuietMs } = this.deps.config;
    const start = performance.now();
    // Until the begin marker, the watchdog judges the shell by its progress (and wakes this collect
    // when it finds it stuck): a slow machine or slow re-sourced rc files are not a broken shell.
    if (!session.begun && session.lifecycle.commandRunning) this.watchProgress(session, 'begin');
    if (mode.waitFor) session.watch(mode.waitFor);
    return new Promise<CollectOutcome>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      let promptCheckedAt = -1;
      const listeners = this.listenersOf(session.id);
      const finish = (outcome: CollectOutcome) => {
        if (timer) clearTimeout(timer);
        listeners.delete(wake);
        signal.removeEventListener('abort', check);
        if (mode.waitFor) session.unwatch();
        resolve(outcome);
      };
      const check = () => {
        timer = undefined;
        const state = session.lifecycle.state;
        if (state === 'finished') return finish('done');
        if (state === 'exited') return finish('exited');
        if (signal.aborted) return finish('aborted');
        // A session being killed ends within its kill grace: its reader reports the exit.
        if (state === 'closing') return;
        if (mode.waitFor && session.matchedLine !== undefined) return finish('matched');
        const now = performance.now();
        // The begin marker follows the typed line at once unless the shell no longer follows the
        // protocol (its gate or hook was broken): then it is killed, not talked to.
        if (!session.begun && session.beginStalled) return finish('broken');
        if (now - start >= mode.timeoutMs) return finish(mode.background ? 'background' : 'timeout');
        let next = start + mode.timeoutMs - now;
        if (!mode.background && session.begun) {
          const quietSince = Math.max(start, session.lastActivity);
          const quiet = now - quietSince;
          if (mode.detectPrompt && quiet >= promptQuietMs) {
            // The text check once per quiet period (and only on output that came after the last
            // input: until the program answers, the prompt it was given is still the tail); the
            // kernel's view every promptQuietMs, since a silent program may read the terminal later.
            if (promptCheckedAt !== quietSince && session.lastOutputAt >= session.lastInputAt) {
              promptCheckedAt = quietSince;
              const tail = cleanOutput(session.tail(4000), { maxLineChars: 100_000 }).full;
              if (looksLikePrompt(tail)) return finish('waiting');
            }
            if (session.readsTerminal()) return finish('waiting');
          }
          if (quiet >= mode.idleMs) return finish('waiting');
          if (Number.isFinite(mode.idleMs)) next = Math.min(next, mode.idleMs - quiet);
          if (mode.detectPrompt && quiet < promptQuietMs) next = Math.min(next, promptQuietMs - quiet);
          else if (mode.detectPrompt) next = Math.min(next, promptQuietMs);
        }
        // setTimeout fires at once beyond 2^31-1 ms; long waits re-check in steps.
        timer = setTimeout(check, Math.min(Math.max(1, next), 2_147_483_647));
      };
      const wake = () => {
        if (timer) clearTimeout(timer);
        check();
      };
      listeners.add(wake);
      signal.addEventListener('abort', check, { once: true });
      check();
    });
  }

  /** Turns an outcome into the tool result and the session's next state. */
  /**
   * A result with what the sandbox's guard found the session's processes left since the last
   * call (plants: files the user's own tools would run later), as cli_based_tool reports them.
   */
  async withSandboxActivity<T extends FinishedResult | RunningResult>(
    session: PtySession,
    result: T,
  ): Promise<T> {
    const activity = await this.deps.sandboxActivity?.(session.cookie).catch(() => undefined);
    if (!activity?.plants.length) return result;
    const plants = activity.plants.map((p) => ({ kind: p.kind, path: p.path, detail: p.detail }));
    const message = `A command in this session left ${plants.length === 1 ? 'a file' : `${plants.length} files`} that the user's own tools would run later outside the sandbox (${plants
      .slice(0, 3)
      .map((p) => `${p.path}: ${p.detail}`)
      .join(
        '; ',
      )}${plants.length > 3 ? '; …' : ''}). conch ran none of it and reports it to the user; if it was not what the task needed, undo it.`;
    const out = result as T & { error?: string; error_code?: string; plants?: typeof plants };
    return {
      ...out,
      plants,
      error: out.error ? `${out.error} ${message}` : message,
      error_code: out.error_code ?? 'PLANT_REPORTED',
    };
  }

  result(
    session: PtySession,
    outcome: Exclude<CollectOutcome, 'aborted' | 'broken'>,
    startedAt: number,
    options: { waitFor?: boolean } = {},
  ): FinishedResult | RunningResult {
    const { output, output_file, lost } = this.takeFinalOutput(session);
    const file = {
      ...(output_file === undefined ? {} : { output_file }),
      ...lostFields(lost, output_file),
      ...(options.waitFor
        ? {
            wait_for_matched: session.matchedLine !== undefined,
            ...(session.matchedLine === undefined ? {} : { matched_line: session.matchedLine }),
          }
        : {}),
    };
    const summary = (status: string) => {
      const last = lastLine(output);
      const saved = lost
        ? ` ${lost.error_code}${output_file ? ` [partial: ${output_file}]` : ''}`
        : output_file
          ? ` [full: ${output_file}]`
          : '';
      return oneLine(`${status}${last ? ` · ${last}` : ''}${saved}`);
    };
    const { lifecycle } = session;
    // A finished command reports its end whatever the collect saw last.
    if (lifecycle.state === 'finished' && session.done) {
      const { exitCode, cwd } = session.done;
      session.done = undefined;
      this.lastCwd = cwd;
      this.deps.events.emit('terminal.command.finished', {
        sessionId: session.id,
        exitCode,
        cwd,
        durationMs: Math.round(performance.now() - startedAt),
      });
      lifecycle.takeResult();
      return {
        exit_code: exitCode,
        output,
        cwd,
        ...file,
        display: summary(exitCode === 0 ? '✓ exit=0' : `✗ exit=${exitCode}`),
      };
    }
    if (outcome === 'exited' || !lifecycle.commandRunning) {
      const loss = supervisorLoss(session);
      const exitCode = loss ? -1 : (session.exit?.exitCode ?? -1);
      this.deps.events.emit('terminal.command.finished', {
        sessionId: session.id,
        exitCode,
        cwd: session.cwd,
        durationMs: Math.round(performance.now() - startedAt),
      });
      if (!lifecycle.alive) this.forget(session);
      return {
        exit_code: exitCode,
        output,
        cwd: session.cwd,
        ...file,
        ...(loss ? { error: loss.error, error_code: loss.code } : {}),
        display: summary(loss ? `✗ ${loss.code}` : `✗ shell exited, exit=${exitCode}`),
      };
    }
    const state: 'waiting' | 'background' =
      outcome === 'waiting' && lifecycle.state !== 'background' ? 'waiting' : 'background';
    lifecycle.report(state);
    return {
      session_id: session.id,
      state,
      output,
      ...file,
      display: summary(
        options.waitFor && session.matchedLine !== undefined
          ? `… session ${session.id} ${state}, matched wait_for`
          : `… session ${session.id} ${state}`,
      ),
    };
  }

  /**
   * Cancels a session (an aborted call's command, `kill: true`): SIGKILLs its shell and whole tree
   * at once, with no SIGTERM grace, and resolves once the shell's exit is reported and the cookie
   * swept; the pool forgets it. Callable inside an abort event: the SIGKILLs are sent (and their
   * effect confirmed) before it returns.
   */
  cancel(id: number, reason: SessionExitReason = 'killed'): Promise<boolean> {
    const session = this.sessions.get(id);
    if (!session) return Promise.resolve(false);
    this.unwatch(id);
    session.lifecycle.close(reason);
    session.cancelNow();
    return this.kill(id, reason, undefined, 0);
  }

  /** Kills a session and its tree; the pool forgets it. */
  async kill(
    id: number,
    reason: SessionExitReason = 'killed',
    treeKill?: Promise<void>,
    graceMs = this.deps.config.killGraceMs,
  ): Promise<boolean> {
    const session = this.sessions.get(id);
    if (!session) return false;
    this.unwatch(id);
    session.lifecycle.close(reason);
    await session.kill(graceMs, treeKill);
    this.forget(session);
    return true;
  }

  list(): TerminalSessionInfo[] {
    const now = performance.now();
    return [...this.sessions.values()].map((s) => ({
      id: s.id,
      state: publicState(s.lifecycle.state),
      command: s.command,
      pid: s.pid,
      cwd: s.cwd,
      lastLine: lastLine(cleanOutput(s.tail(2000), { maxLineChars: 200 }).text),
      startedAt: s.startedAt,
      ageMs: Math.round(now - s.startedMono),
      quietMs: Math.round(now - s.lastActivity),
      logPath: s.logPath,
    }));
  }

  async readLog(id: number, options: { clean?: boolean } = {}): Promise<string> {
    const session = this.sessions.get(id);
    session?.flushLog();
    const path = session?.logPath ?? join(this.sessionsDir(), `session-${id}`, 'session.log');
    let text: string;
    try {
      text = readRegularFileSync(path, { maxBytes: 512 * 1024 * 1024, encoding: 'utf8' });
    } catch {
      throw new TerminalSessionError(
        'UNKNOWN_SESSION',
        `no log for terminal session ${id} (live sessions: ${this.describeIds()})`,
        id,
      );
    }
    return options.clean ? cleanOutput(text, { maxLineChars: Number.MAX_SAFE_INTEGER }).full : text;
  }

  /** Closes idle (or finished, unread) shells unused for `idleSessionTtlMs`. */
  reapIdle(now = performance.now()): number[] {
    const reaped: number[] = [];
    for (const s of this.sessions.values()) {
      // Idle shells, and shells whose command finished while nobody read its result (the log
      // keeps that output), unused for the TTL.
      const state = s.lifecycle.state;
      const unused = state === 'idle' ? now - s.lastUsed : state === 'finished' ? now - s.lastActivity : -1;
      if (!this.leases.has(s.id) && unused >= this.deps.config.idleSessionTtlMs) {
        reaped.push(s.id);
        void this.kill(s.id, 'reaped').catch((error: unknown) => {
          this.deps.logger.warn({ err: error, sessionId: s.id }, 'reaping a terminal session failed');
        });
      }
    }
    return reaped;
  }

  /** Kills every session and its tree; the pool takes no more work. Idempotent. */
  dispose(): Promise<void> {
    this.disposing ??= (async () => {
      if (this.reaper) clearInterval(this.reaper);
      this.reaper = undefined;
      // All at once: one look at /proc, one grace for every tree (50 sessions went away in 24-35 s
      // when each was killed with its own grace and its own scans).
      const live = [...this.sessions.values()].filter((s) => s.lifecycle.alive);
      const trees = killSessionTrees(
        live.map((s) => ({ pid: s.pid, cookie: s.cookie })),
        this.deps.config.killGraceMs,
      ).catch((error: unknown) => {
        this.deps.logger.warn({ err: error }, 'killing the terminal sessions failed; sweeping each');
      });
      await Promise.all([...this.sessions.keys()].map((id) => this.kill(id, 'disposed', trees)));
      this.stopWatching();
      // What shells that exited on their own left behind gets no more grace.
      for (const cookie of this.sweepingCookies) sweepCookie(cookie);
      await Promise.all([...this.sweeps]);
      this.removeExitHook();
    })();
    return this.disposing;
  }

  unknownSession(id: number): string {
    const ended = this.endedOnTheirOwn.get(id);
    if (ended !== undefined) {
      return (
        `session_id ${id} has ended: ${ended}. Its output is in its log (readLog(${id})). ` +
        `Live sessions: ${this.describeIds()}; start a new command with { command }`
      );
    }
    return (
      `session_id ${id} is not a live terminal session (live: ${this.describeIds()}). ` +
      'Session ids come from results with state "waiting" or "background"; a session whose command finished, ' +
      'or that was killed, is gone — start a new command with { command }'
    );
  }

  describeIds(): string {
    const live = [...this.sessions.values()]
      .filter((s) => s.lifecycle.state !== 'closing')
      .map((s) => `${s.id} (${publicState(s.lifecycle.state)})`);
    return live.length > 0 ? live.join(', ') : 'none';
  }

  /** A session calls can still use (not being killed, not gone). */
  private live(id: number): PtySession | undefined {
    const session = this.sessions.get(id);
    const state = session?.lifecycle.state;
    return state === undefined || state === 'closing' || state === 'exited' ? undefined : session;
  }

  private shuttingDown(): TerminalSessionError {
    return new TerminalSessionError('POOL_DISPOSED', 'the terminal plugin is shutting down');
  }

  private lease(session: PtySession): SessionLease {
    const lease = new SessionLease(session, (l) => {
      if (this.leases.get(session.id) === l) this.leases.delete(session.id);
      // The shell exited while this call held it: the call reported it; the pool forgets it.
      if (!session.lifecycle.alive) this.forget(session);
    });
    this.leases.set(session.id, lease);
    return lease;
  }

  private startCommand(session: PtySession): SessionLease {
    const lease = this.lease(session);
    session.lifecycle.start();
    return lease;
  }

  private pickIdle(outside: boolean): PtySession | undefined {
    let best: PtySession | undefined;
    for (const s of this.sessions.values()) {
      if (s.lifecycle.state !== 'idle' || this.leases.has(s.id) || s.outside !== outside) continue;
      if (!best || s.lastUsed > best.lastUsed) best = s;
    }
    return best;
  }

  private async spawn(outside = false): Promise<SessionLease> {
    const { config, logger, events } = this.deps;
    const id = this.nextId++;
    this.shellChoice ??= resolveShell(config.shell, logger);
    const { shell, kind } = this.shellChoice;
    this.starting += 1;
    let session: PtySession;
    try {
      const rmFunction = config.safeRm ? this.deps.trash?.()?.shellFunction(kind) : undefined;
      session = new PtySession({
        id,
        shell,
        shellKind: kind,
        shellArgs: config.shellArgs,
        cwd: this.lastCwd,
        env: process.env,
        sessionEnv: config.sessionEnv,
        cols: config.cols,
        rows: config.rows,
        dir: join(this.sessionsDir(), `session-${id}`),
        rcLogDir: this.rcLogDir(),
        ...(outside ? { outside: true } : {}),
        maxBufferChars: config.maxBufferChars,
        maxLogBytes: config.maxLogBytes,
        killGraceMs: config.killGraceMs,
        logger,
        spawnPty: this.spawnPty,
        ...(rmFunction === undefined ? {} : { rmFunction }),
        reloadRcFiles: config.reloadRcFiles,
        onState: (state, previous) => this.onState(id, state, previous),
        onBegin: () => {
          this.unwatch(id);
          this.wake(id);
        },
        onOutput: (text) => {
          events.emit('terminal.session.output', { sessionId: id, text });
          // A collect waiting for a pattern returns as soon as it matched.
          if (this.sessions.get(id)?.matchedLine !== undefined) this.wake(id);
        },
      });
    } catch (error) {
      this.starting -= 1;
      throw new TerminalSessionError(
        'SHELL_START_FAILED',
        `could not start the shell ${shell}: ${(error as Error).message}`,
        undefined,
        error,
      );
    }
    this.sessions.set(id, session);
    this.starting -= 1;
    // Held from the start: nothing else can take a shell that is still starting for this call.
    const lease = this.lease(session);
    this.ensureReaper();
    this.watchProgress(session, 'start');
    try {
      await session.whenReady();
      // A shell of a start-up queue got through (a lock in the rc files serialises them): the
      // others waiting on it were not stuck.
      this.unwatch(id);
      for (const w of this.watched.values()) if (w.phase === 'start') w.clock.reset();
    } catch (error) {
      this.unwatch(id);
      await this.kill(id, 'startup-failed');
      lease.release();
      const noise = cleanOutput(session.startupOutput, { maxLineChars: 300 })
        .text.split('\n')
        .filter((line) => !line.includes('init.sh'))
        .join('\n')
        .trim()
        .slice(-1500);
      throw new TerminalSessionError(
        'SHELL_START_FAILED',
        `could not start the shell ${shell}: ${(error as Error).message}${noise ? `\nits output:\n${noise}` : ''}`,
        undefined,
        error,
      );
    }
    logger.debug({ sessionId: id, pid: session.pid, shell }, 'terminal session started');
    events.emit('terminal.session.started', { sessionId: id, pid: session.pid, shell, cwd: session.cwd });
    if (this.disposing) {
      await this.kill(id, 'disposed');
      lease.release();
      throw this.shuttingDown();
    }
    session.lifecycle.start();
    return lease;
  }

  /** Starts judging a shell's progress (a start-up, or a typed command until its begin marker). */
  private watchProgress(session: PtySession, phase: Watched['phase']): void {
    const existing = this.watched.get(session.id);
    if (existing?.phase === phase) return;
    const tick = this.watchTickMs();
    this.watched.set(session.id, {
      session,
      phase,
      since: phase === 'begin' ? session.typedAt : performance.now(),
      clock: new StallClock(2 * tick),
    });
    this.watchTimer ??= setInterval(() => this.checkProgress(), tick);
    this.watchTimer.unref();
  }

  private unwatch(id: number): void {
    if (!this.watched.delete(id) || this.watched.size > 0) return;
    this.stopWatching();
  }

  private stopWatching(): void {
    this.watched.clear();
    if (this.watchTimer) clearInterval(this.watchTimer);
    this.watchTimer = undefined;
  }

  /** Looks often enough to judge the shortest limit within a fifth of it; at most every 250 ms. */
  private watchTickMs(): number {
    const { startupTimeoutMs, commandStartTimeoutMs } = this.deps.config;
    return Math.max(20, Math.min(250, Math.floor(Math.min(startupTimeoutMs, commandStartTimeoutMs) / 5)));
  }

  /**
   * One look at every watched shell. A starting shell fails when neither it nor any other shell
   * starting with it progressed for `startupTimeoutMs` (shells queued on one lock in the rc files
   * take turns: while one moves, the queue is not stuck), or when it still starts after
   * `startupMaxMs`; a typed command is reported broken when its shell made no progress for
   * `commandStartTimeoutMs` without printing the begin marker.
   */
  private checkProgress(): void {
    if (this.watched.size === 0) return this.stopWatching();
    const { startupTimeoutMs, startupMaxMs, commandStartTimeoutMs } = this.deps.config;
    const snapshot = ProcSnapshot.take();
    const now = performance.now();
    let startMoved = false;
    for (const w of this.watched.values()) {
      const moved = w.clock.observe(lookAt(snapshot, w.session.pid, w.session.receivedChars), now);
      if (moved && w.phase === 'start') startMoved = true;
    }
    if (startMoved) for (const w of this.watched.values()) if (w.phase === 'start') w.clock.reset();
    for (const [id, w] of [...this.watched]) {
      const { session } = w;
      if (w.phase === 'start') {
        let reason: string | undefined;
        if (w.clock.stalledMs >= startupTimeoutMs) {
          reason =
            `the shell did not become ready: it made no progress for ${startupTimeoutMs} ms while starting ` +
            '(no CPU time, no new process and no output from its start-up files), so it was taken for stuck (config startupTimeoutMs)';
        } else if (now - w.since >= startupMaxMs) {
          reason =
            `the shell did not become ready within ${startupMaxMs} ms (config startupMaxMs), though it kept busy: ` +
            'its start-up files may loop';
        }
        if (reason === undefined) continue;
        // Its input and output go through a supervisor that is not answering: the supervisor is
        // judged (and the shell then exits with its reason), not the shell's start-up files.
        if (now - w.since < startupMaxMs && session.supervisorOverdue()) continue;
        this.unwatch(id);
        session.failStart(new TerminalProtocolError('SHELL_NOT_READY', reason));
      } else if (session.begun || !session.lifecycle.commandRunning) {
        this.unwatch(id);
      } else if (w.clock.stalledMs >= commandStartTimeoutMs || now - w.since >= startupMaxMs) {
        // The typed command went through a supervisor that is not answering: it is judged now (the
        // shell then exits, killed, with the supervisor's reason) or at its next health checks;
        // the shell is not blamed for it. Bounded by startupMaxMs like any wait here.
        if (now - w.since < startupMaxMs && session.supervisorOverdue()) continue;
        this.unwatch(id);
        session.beginStalled = true;
        this.wake(id);
      }
    }
  }

  private onState(id: number, state: SessionLifecycleState, previous: SessionLifecycleState): void {
    const session = this.sessions.get(id);
    const shown = publicState(state);
    if (session && shown !== publicState(previous) && state !== 'closing' && state !== 'exited') {
      this.deps.events.emit('terminal.session.state', {
        sessionId: id,
        state: shown,
        ...(session.command === undefined ? {} : { command: session.command }),
      });
    }
    if (state === 'exited' || state === 'closing') this.unwatch(id);
    if (state === 'exited' && session) {
      const sweep = session.swept();
      this.sweepingCookies.add(session.cookie);
      const tracked = sweep.finally(() => {
        this.sweeps.delete(tracked);
        this.sweepingCookies.delete(session.cookie);
      });
      this.sweeps.add(tracked);
      // The shell exited on its own while no call held it (e.g. a background `exit`).
      if (!this.leases.has(id)) this.forget(session);
    }
    // Collectors compute quiet periods from timestamps; only state changes (and a command's
    // begin marker) wake them.
    if (state === 'finished' || state === 'exited' || state === 'closing') this.wake(id);
  }

  private wake(id: number): void {
    for (const listener of [...(this.listeners.get(id) ?? [])]) listener();
  }

  private forget(session: PtySession): void {
    if (this.sessions.get(session.id) !== session) return;
    this.sessions.delete(session.id);
    // Gone on its own, not killed by a call (its shell exited, or its supervisor took it down): a
    // later call that names it learns why instead of "not a live session". The last 64 are kept.
    if (session.lifecycle.exitReason === 'exit' && session.exit) {
      const e = session.exit;
      this.endedOnTheirOwn.set(
        session.id,
        e.supervisorLost !== undefined
          ? `its shell was killed because conch's process supervisor went away (${e.supervisorLost}); everything it ran was killed too. This is not the command's failure: run it again`
          : `its shell exited on its own (${e.signal ? `signal ${e.signal}` : `code ${e.exitCode}`})`,
      );
      if (this.endedOnTheirOwn.size > 64)
        this.endedOnTheirOwn.delete(this.endedOnTheirOwn.keys().next().value!);
    }
    this.listeners.delete(session.id);
    session.release();
    this.deps.events.emit('terminal.session.exited', {
      sessionId: session.id,
      exitCode: session.exit?.exitCode ?? -1,
      signal: session.exit?.signal ?? 0,
      reason: session.lifecycle.exitReason ?? 'exit',
    });
  }

  private listenersOf(id: number): Set<() => void> {
    let set = this.listeners.get(id);
    if (!set) {
      set = new Set();
      this.listeners.set(id, set);
    }
    return set;
  }

  private ensureReaper(): void {
    if (this.reaper) return;
    const every = Math.min(this.deps.config.idleSessionTtlMs, 30_000);
    this.reaper = setInterval(() => this.reapIdle(), every);
    this.reaper.unref();
  }

  private rcLogDir(): string {
    return rcLogDirOf(this.deps.tempDir());
  }

  private sessionsDir(): string {
    const dir = join(this.deps.tempDir(), 'terminal');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    return dir;
  }

  /** Cleans the unread output; spills the whole cleaned text to a file when anything was cut. */
  takeFinalOutput(session: PtySession): FinalOutput {
    const { maxOutputChars, maxLineChars } = this.deps.config;
    const dropped = session.droppedChars;
    session.droppedChars = 0;
    const raw = session.takeUnread();
    const { text, full, linesCut } = cleanOutput(raw, { maxLineChars });
    if (!linesCut && text.length <= maxOutputChars && dropped === 0) return { output: text };
    this.spillCount += 1;
    let path: string;
    try {
      // Handed to the model: kept where a later turn (or a restarted host) can still read it.
      path = join(
        prepareOutputDir(this.outputDir),
        outputFileName(`terminal-${session.id}-${this.spillCount}`),
      );
    } catch (error) {
      this.deps.logger.warn(
        { err: error, dir: this.outputDir },
        'terminal output directory unusable; using the temp dir',
      );
      path = join(this.sessionsDir(), `output-${session.id}-${this.spillCount}.txt`);
    }
    const note =
      dropped > 0
        ? `[${dropped} earlier chars were over the in-memory cap; the session log has them: ${session.logPath}]\n`
        : '';
    let outputFile: string | undefined = path;
    let lost: FinalOutput['lost'];
    const whole = note + full;
    try {
      writeFileSync(path, whole, { mode: 0o600 });
    } catch (error) {
      this.deps.logger.warn({ err: error, sessionId: session.id }, 'terminal output spill failed');
      // What reached the file before the write failed stays there and is said; nothing is claimed
      // that the disk does not hold (the session log failed too when the disk is full).
      const kept = safeStatSync(path, { throwIfNoEntry: false })?.size ?? 0;
      const code = (error as NodeJS.ErrnoException).code;
      const reason = code
        ? `${code}: ${(error as Error).message.split(',')[0]?.replace(/^\w+: /, '')}`
        : String(error);
      lost = {
        kept_bytes: kept,
        total_bytes: Buffer.byteLength(whole),
        reason,
        error_code:
          code === 'ENOSPC' || code === 'EDQUOT' ? 'OUTPUT_TRUNCATED_DISK_FULL' : 'OUTPUT_NOT_SAVED',
      };
      if (kept === 0) {
        outputFile = undefined;
        try {
          unlinkSync(path);
        } catch {
          // not there
        }
      }
    }
    const where = lost
      ? `${outputFile ? `only the first ${lost.kept_bytes} bytes saved in ${outputFile}` : 'not saved'}: ${lost.reason}`
      : (outputFile ?? session.logPath);
    const shown = capTotal(note + text, maxOutputChars, where, this.deps.config.overflowPreviewChars);
    return {
      output: shown,
      ...(outputFile === undefined ? {} : { output_file: outputFile }),
      ...(lost ? { lost } : {}),
    };
  }
}

/** Why an `exec` is refused (the tool's error and runSync's). */
export function execRefusal(text: string): string {
  return (
    `refused: ${JSON.stringify(oneLine(text, 120))} would replace the session's shell with exec, which ends the terminal session's protocol ` +
    '(no command after it could finish or be judged). Run the program without exec (e.g. `bash` or `zsh -f` to start another shell, ' +
    'then answer it with { session_id, input }). `exec` with only redirections (exec >log 2>&1) is fine'
  );
}

/**
 * The shell sessions run: the configured one, else the user's $SHELL when it is bash or zsh (the
 * shells the marker protocol speaks), else /bin/bash.
 */
export function resolveShell(
  configured: string | undefined,
  logger: Logger,
): { shell: string; kind: ShellKind } {
  const candidate = configured ?? process.env.SHELL;
  const name = candidate ? basename(candidate) : '';
  if (candidate && (name === 'bash' || name === 'zsh')) return { shell: candidate, kind: name };
  if (candidate) {
    logger.warn({ shell: candidate }, 'terminal sessions speak bash and zsh; running /bin/bash instead');
  }
  return { shell: '/bin/bash', kind: 'bash' };
}

/**
 * Where shells write their rc-error logs (in the registry's temp dir): with the trash, the one
 * directory a sandboxed shell writes besides the workspace. Made on first use.
 */
export function rcLogDirOf(tempDir: string): string {
  const dir = join(tempDir, 'terminal-rc-logs');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/** A command's final output as the result carries it, and what of it could not be saved. */
export interface FinalOutput {
  output: string;
  output_file?: string;
  /** The output did not fit the result and the file that should hold it could not be written whole. */
  lost?: {
    kept_bytes: number;
    total_bytes: number;
    reason: string;
    error_code: 'OUTPUT_TRUNCATED_DISK_FULL' | 'OUTPUT_NOT_SAVED';
  };
}

/** The result fields that say output was lost (the cli's names: output_file_incomplete, error, error_code). */
/**
 * Why a session's shell is gone when its supervisor took it down (crashed, killed, or stopped
 * answering and replaced): said as the command's error, never as the command's own exit.
 */
function supervisorLoss(
  session: PtySession,
): { code: 'SUPERVISOR_UNRESPONSIVE' | 'SUPERVISOR_LOST'; error: string } | undefined {
  const exit = session.exit;
  if (exit?.supervisorLost === undefined) return undefined;
  const started = session.begun;
  const effects = started
    ? 'It may have done part of its work before that (how it ended is unknown): check its effects (the output shown, the files it changes) before you run it again'
    : 'The command had not started: run it again';
  if (exit.supervisorUnresponsive) {
    return {
      code: 'SUPERVISOR_UNRESPONSIVE',
      error:
        `The session's shell was killed ${started ? 'while the command ran' : 'before the command started'}: conch's process supervisor, which runs it, stopped answering (${exit.supervisorLost}), so it was killed with everything it ran and replaced. ` +
        `This is not the command's failure. ${effects}; the next command starts in a new shell. If it happens again, tell the user the machine may be overloaded or something is stopping processes (SIGSTOP).`,
    };
  }
  return {
    code: 'SUPERVISOR_LOST',
    error:
      `The session's shell was killed ${started ? 'while the command ran' : 'before the command started'} because conch's process supervisor, which runs it, went away (${exit.supervisorLost}); everything it started was killed too. ` +
      `This is not the command's failure. ${effects}; the next command starts in a new shell. If the command itself killed the supervisor (kill $PPID, pkill node), avoid that.`,
  };
}

export function lostFields(lost: FinalOutput['lost'], file: string | undefined): Record<string, unknown> {
  if (!lost) return {};
  const { kept_bytes, total_bytes, reason, error_code } = lost;
  const what =
    error_code === 'OUTPUT_TRUNCATED_DISK_FULL'
      ? `The disk filled up while the output was saved: ${file ? `${file} holds only the first ${kept_bytes} of ${total_bytes} bytes` : `none of its ${total_bytes} bytes could be saved`}, and only the start and end shown are kept (${reason}). Tell the user the disk is full`
      : `Saving the output failed: ${file ? `${file} holds only the first ${kept_bytes} of ${total_bytes} bytes` : `none of its ${total_bytes} bytes could be saved`}, and only the start and end shown are kept (${reason})`;
  return {
    output_file_incomplete: { kept_bytes, total_bytes, reason },
    error: `${what}; if the missing part matters, rerun with the output filtered (| grep PATTERN, | tail -100) or redirected into a file in the workspace (> out.log).`,
    error_code,
  };
}
