import { mkdirSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { EventBus, Logger } from '@conch/core';
import type { TerminalConfig } from './config.js';
import { capTotal, cleanOutput, lastLine } from './output-cleaner.js';
import { looksLikePrompt } from './prompt-detector.js';
import { PtySession, type SessionState } from './pty-session.js';
import type { ShellKind } from './shell-scripts.js';
import './events.js';
import { onExit } from 'signal-exit';

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
}

export type CollectOutcome = 'done' | 'exited' | 'waiting' | 'background' | 'timeout' | 'aborted';

export interface CollectMode {
  /** Collect exactly `timeoutMs` then report 'background' (startup of a background command). */
  background: boolean;
  timeoutMs: number;
  idleMs: number;
  detectPrompt: boolean;
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

type ExitReason = 'exit' | 'killed' | 'reaped' | 'disposed' | 'startup-failed';

interface PoolDeps {
  config: TerminalConfig;
  logger: Logger;
  events: EventBus;
  /** The registry's temp dir (created lazily). */
  tempDir: () => string;
  /** Where the first shell starts. */
  cwd: string;
}

/**
 * The pool of persistent shells: hands an idle shell (the most recently used, so `cd`/`export`
 * carry over between calls) to each new command, never a busy one; spawns up to `maxSessions`;
 * reaps idle shells; kills every shell and its process tree on dispose.
 */
export class SessionPool implements TerminalService {
  private readonly deps: PoolDeps;
  private readonly sessions = new Map<number, PtySession>();
  private readonly listeners = new Map<number, Set<(kind: 'data' | 'end') => void>>();
  private readonly exitReasons = new Map<number, ExitReason>();
  private starting = 0;
  private nextId = 1;
  private spillCount = 0;
  private lastCwd: string;
  private reaper: NodeJS.Timeout | undefined;
  private disposing: Promise<void> | undefined;
  private readonly removeExitHook: () => void;
  private readonly onProcessExit = () => {
    for (const session of this.sessions.values()) session.killSync();
  };

  constructor(deps: PoolDeps) {
    this.deps = deps;
    this.lastCwd = deps.cwd;
    // signal-exit also covers a host killed by SIGTERM / SIGINT / SIGHUP that nothing handles.
    this.removeExitHook = onExit(this.onProcessExit, { alwaysLast: true });
  }

  get config(): TerminalConfig {
    return this.deps.config;
  }

  get(id: number): PtySession | undefined {
    return this.sessions.get(id);
  }

  liveIds(): number[] {
    return [...this.sessions.keys()];
  }

  /** The cwd a new command would start in (for the permission request). */
  expectedCwd(sessionId?: number): string {
    if (sessionId !== undefined) return this.sessions.get(sessionId)?.cwd ?? this.lastCwd;
    return this.pickIdle()?.cwd ?? this.lastCwd;
  }

  /**
   * Claims a shell for a new command: the named one if it is idle, else the most recently used
   * idle one, else a new one. Returns an error message when none can be had.
   */
  async claim(sessionId: number | undefined): Promise<PtySession | string> {
    if (this.disposing) return 'the terminal plugin is shutting down';
    if (sessionId !== undefined) {
      const session = this.sessions.get(sessionId);
      if (!session) return this.unknownSession(sessionId);
      if (session.state !== 'idle' || session.reading) {
        return (
          `session_id ${sessionId} is busy (${session.state}${session.command ? `: ${JSON.stringify(session.command)}` : ''}); ` +
          `answer its program with { session_id: ${sessionId}, input }, end it with { session_id: ${sessionId}, kill: true }, ` +
          'or omit session_id to run the command in another shell'
        );
      }
      this.setState(session, 'running');
      return session;
    }
    const idle = this.pickIdle();
    if (idle) {
      this.setState(idle, 'running');
      return idle;
    }
    if (this.sessions.size + this.starting >= this.deps.config.maxSessions) {
      const busy = [...this.sessions.values()].map((s) => `${s.id} (${s.state})`).join(', ');
      return (
        `all ${this.deps.config.maxSessions} terminal sessions are busy: ${busy}. ` +
        'End one with { session_id, kill: true } or wait for one to finish'
      );
    }
    return this.spawn();
  }

  /** Waits for the current command of a session to finish, prompt, go quiet or time out. */
  collect(session: PtySession, mode: CollectMode, signal: AbortSignal): Promise<CollectOutcome> {
    const { promptQuietMs } = this.deps.config;
    const start = Date.now();
    return new Promise<CollectOutcome>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      let promptCheckedAt = -1;
      const listeners = this.listenersOf(session.id);
      const finish = (outcome: CollectOutcome) => {
        if (timer) clearTimeout(timer);
        listeners.delete(onEvent);
        signal.removeEventListener('abort', check);
        resolve(outcome);
      };
      const check = () => {
        timer = undefined;
        if (session.done) return finish('done');
        if (!session.alive) return finish('exited');
        if (signal.aborted) return finish('aborted');
        const now = Date.now();
        if (now - start >= mode.timeoutMs) return finish(mode.background ? 'background' : 'timeout');
        let next = start + mode.timeoutMs - now;
        if (!mode.background) {
          const quietSince = Math.max(start, session.lastActivity);
          const quiet = now - quietSince;
          if (mode.detectPrompt && quiet >= promptQuietMs) {
            // The text check once per quiet period; the kernel's view every promptQuietMs, since a
            // silent program may start reading the terminal later.
            if (promptCheckedAt !== quietSince) {
              promptCheckedAt = quietSince;
              const tail = cleanOutput(session.tail(4000), { maxLineChars: 100_000 }).full;
              if (looksLikePrompt(tail)) return finish('waiting');
            }
            if (session.readsTerminal()) return finish('waiting');
          }
          if (quiet >= mode.idleMs) return finish('waiting');
          next = Math.min(next, mode.idleMs - quiet);
          if (mode.detectPrompt && quiet < promptQuietMs) next = Math.min(next, promptQuietMs - quiet);
          else if (mode.detectPrompt) next = Math.min(next, promptQuietMs);
        }
        // setTimeout fires at once beyond 2^31-1 ms; long waits re-check in steps.
        timer = setTimeout(check, Math.min(Math.max(1, next), 2_147_483_647));
      };
      const onEvent = (kind: 'data' | 'end') => {
        if (kind === 'end') {
          if (timer) clearTimeout(timer);
          check();
        }
      };
      listeners.add(onEvent);
      signal.addEventListener('abort', check, { once: true });
      check();
    });
  }

  /** Turns an outcome into the tool result and the session's next state. */
  result(
    session: PtySession,
    outcome: Exclude<CollectOutcome, 'aborted'>,
    startedAt: number,
  ): FinishedResult | RunningResult {
    const { output, output_file } = this.takeFinalOutput(session);
    const file = output_file === undefined ? {} : { output_file };
    if (outcome === 'done' && session.done) {
      const { exitCode, cwd } = session.done;
      session.done = undefined;
      this.lastCwd = cwd;
      this.deps.events.emit('terminal.command.finished', {
        sessionId: session.id,
        exitCode,
        cwd,
        durationMs: Date.now() - startedAt,
      });
      this.setState(session, 'idle');
      return { exit_code: exitCode, output, cwd, ...file };
    }
    if (outcome === 'exited' || !session.alive) {
      const exitCode = session.exit?.exitCode ?? -1;
      this.deps.events.emit('terminal.command.finished', {
        sessionId: session.id,
        exitCode,
        cwd: session.cwd,
        durationMs: Date.now() - startedAt,
      });
      this.forget(session);
      return { exit_code: exitCode, output, cwd: session.cwd, ...file };
    }
    const state: 'waiting' | 'background' =
      outcome === 'waiting' && session.state !== 'background' ? 'waiting' : 'background';
    this.setState(session, state);
    return { session_id: session.id, state, output, ...file };
  }

  /** Kills a session and its tree; the pool forgets it. */
  async kill(id: number, reason: ExitReason = 'killed'): Promise<boolean> {
    const session = this.sessions.get(id);
    if (!session) return false;
    if (!this.exitReasons.has(id)) this.exitReasons.set(id, reason);
    await session.kill(this.deps.config.killGraceMs);
    this.forget(session);
    return true;
  }

  list(): TerminalSessionInfo[] {
    const now = Date.now();
    return [...this.sessions.values()].map((s) => ({
      id: s.id,
      state: s.state,
      command: s.command,
      pid: s.pid,
      cwd: s.cwd,
      lastLine: lastLine(cleanOutput(s.tail(2000), { maxLineChars: 200 }).text),
      startedAt: s.startedAt,
      ageMs: now - s.startedAt,
      quietMs: now - s.lastActivity,
      logPath: s.logPath,
    }));
  }

  async readLog(id: number, options: { clean?: boolean } = {}): Promise<string> {
    const session = this.sessions.get(id);
    session?.flushLog();
    const path = session?.logPath ?? join(this.sessionsDir(), `session-${id}`, 'session.log');
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch {
      throw new Error(`no log for terminal session ${id} (live sessions: ${this.describeIds()})`);
    }
    return options.clean ? cleanOutput(text, { maxLineChars: Number.MAX_SAFE_INTEGER }).full : text;
  }

  /** Closes idle (or finished, unread) shells unused for `idleSessionTtlMs`. */
  reapIdle(now = Date.now()): number[] {
    const reaped: number[] = [];
    for (const s of this.sessions.values()) {
      // Idle shells, and shells whose command finished while nobody read its result (the log
      // keeps that output), unused for the TTL.
      const unused = s.state === 'idle' ? now - s.lastUsed : s.done ? now - s.lastActivity : -1;
      if (!s.reading && unused >= this.deps.config.idleSessionTtlMs) {
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
      await Promise.all([...this.sessions.keys()].map((id) => this.kill(id, 'disposed')));
      this.removeExitHook();
    })();
    return this.disposing;
  }

  unknownSession(id: number): string {
    return (
      `session_id ${id} is not a live terminal session (live: ${this.describeIds()}). ` +
      'Session ids come from results with state "waiting" or "background"; a session whose command finished, ' +
      'or that was killed, is gone — start a new command with { command }'
    );
  }

  describeIds(): string {
    const live = [...this.sessions.values()].map((s) => `${s.id} (${s.state})`);
    return live.length > 0 ? live.join(', ') : 'none';
  }

  private pickIdle(): PtySession | undefined {
    let best: PtySession | undefined;
    for (const s of this.sessions.values()) {
      if (s.state !== 'idle' || s.reading || !s.alive) continue;
      if (!best || s.lastUsed > best.lastUsed) best = s;
    }
    return best;
  }

  private async spawn(): Promise<PtySession | string> {
    const { config, logger, events } = this.deps;
    const id = this.nextId++;
    const { shell, kind } = resolveShell(config.shell, logger);
    this.starting += 1;
    let session: PtySession;
    try {
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
        maxBufferChars: config.maxBufferChars,
        maxLogBytes: config.maxLogBytes,
        logger,
        onChange: (kind) => this.onChange(id, kind),
        onOutput: (text) => events.emit('terminal.session.output', { sessionId: id, text }),
      });
    } catch (error) {
      this.starting -= 1;
      return `could not start the shell ${shell}: ${(error as Error).message}`;
    }
    this.sessions.set(id, session);
    this.starting -= 1;
    this.ensureReaper();
    try {
      await session.ready(config.startupTimeoutMs);
    } catch (error) {
      await this.kill(id, 'startup-failed');
      const noise = cleanOutput(session.startupOutput, { maxLineChars: 300 })
        .text.split('\n')
        .filter((line) => !line.includes('init.sh'))
        .join('\n')
        .trim()
        .slice(-1500);
      return `could not start the shell ${shell}: ${(error as Error).message}${noise ? `\nits output:\n${noise}` : ''}`;
    }
    logger.debug({ sessionId: id, pid: session.pid, shell }, 'terminal session started');
    events.emit('terminal.session.started', { sessionId: id, pid: session.pid, shell, cwd: session.cwd });
    if (this.disposing) {
      await this.kill(id, 'disposed');
      return 'the terminal plugin is shutting down';
    }
    this.setState(session, 'running');
    return session;
  }

  private onChange(id: number, kind: 'data' | 'end'): void {
    // Collectors compute quiet periods from timestamps; only ends wake them.
    if (kind === 'data') return;
    for (const listener of [...(this.listeners.get(id) ?? [])]) listener(kind);
    const session = this.sessions.get(id);
    if (session && !session.alive && !session.reading) {
      // The shell exited on its own while nobody was reading (e.g. a background `exit`).
      this.forget(session);
    }
  }

  private forget(session: PtySession): void {
    if (this.sessions.get(session.id) !== session) return;
    this.sessions.delete(session.id);
    this.listeners.delete(session.id);
    session.release();
    const reason = this.exitReasons.get(session.id) ?? 'exit';
    this.exitReasons.delete(session.id);
    this.deps.events.emit('terminal.session.exited', {
      sessionId: session.id,
      exitCode: session.exit?.exitCode ?? -1,
      signal: session.exit?.signal ?? 0,
      reason,
    });
  }

  private listenersOf(id: number): Set<(kind: 'data' | 'end') => void> {
    let set = this.listeners.get(id);
    if (!set) {
      set = new Set();
      this.listeners.set(id, set);
    }
    return set;
  }

  setState(session: PtySession, state: SessionState): void {
    if (session.state === state || !session.alive) return;
    session.state = state;
    this.deps.events.emit('terminal.session.state', {
      sessionId: session.id,
      state,
      ...(session.command === undefined ? {} : { command: session.command }),
    });
  }

  private ensureReaper(): void {
    if (this.reaper) return;
    const every = Math.min(this.deps.config.idleSessionTtlMs, 30_000);
    this.reaper = setInterval(() => this.reapIdle(), every);
    this.reaper.unref();
  }

  private sessionsDir(): string {
    const dir = join(this.deps.tempDir(), 'terminal');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    return dir;
  }

  /** Cleans the unread output; spills the whole cleaned text to a file when anything was cut. */
  takeFinalOutput(session: PtySession): { output: string; output_file?: string } {
    const { maxOutputChars, maxLineChars } = this.deps.config;
    const dropped = session.droppedChars;
    session.droppedChars = 0;
    const raw = session.takeUnread();
    const { text, full, linesCut } = cleanOutput(raw, { maxLineChars });
    if (!linesCut && text.length <= maxOutputChars && dropped === 0) return { output: text };
    this.spillCount += 1;
    const path = join(this.sessionsDir(), `output-${session.id}-${this.spillCount}.txt`);
    const note =
      dropped > 0
        ? `[${dropped} earlier chars were over the in-memory cap; the session log has them: ${session.logPath}]\n`
        : '';
    let outputFile: string | undefined = path;
    try {
      writeFileSync(path, note + full, { mode: 0o600 });
    } catch (error) {
      this.deps.logger.warn({ err: error, sessionId: session.id }, 'terminal output spill failed');
      outputFile = undefined;
    }
    const shown = capTotal(note + text, maxOutputChars, outputFile ?? session.logPath);
    return outputFile === undefined ? { output: shown } : { output: shown, output_file: outputFile };
  }
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
