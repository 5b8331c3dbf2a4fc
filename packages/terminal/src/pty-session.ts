import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  closeSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readlinkSync,
  realpathSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { readRegularFileSync, type Logger } from '@conch/core';
import { commandReaderOf, foregroundReadsTty, imageOf, ttyOf, type ProcessImage } from './foreground.js';
import { TerminalProtocolError } from './errors/terminal-protocol-error.js';
import { MarkerParser } from './marker-parser.js';
import {
  cancelSessionTree,
  killSessionTree,
  killSessionTreeSync,
  sweepSessionCookie,
} from './process-tree.js';
import { RcWatch } from './rc-files.js';
import {
  commandScript,
  initScript,
  rcReloadScript,
  releaseLine,
  shellQuote,
  sourceLine,
  type ShellKind,
} from './shell-scripts.js';
import { stripAnsi } from '@conch/process';
import { SessionLifecycle, type SessionLifecycleState } from './session-state.js';
import type { SessionPty, SessionPtySpawner } from './session-pty.js';

const TAIL_CHARS = 8192;
const LOG_FLUSH_MS = 100;

export interface PtySessionOptions {
  id: number;
  shell: string;
  /** Which init flavour the shell gets. */
  shellKind: ShellKind;
  shellArgs: readonly string[];
  cwd: string;
  /** Environment of the shell process (the spawner adds the cookie). */
  env: Readonly<Record<string, string | undefined>>;
  /** Exported after the rc files ran (e.g. PAGER=cat). */
  sessionEnv: Readonly<Record<string, string>>;
  cols: number;
  rows: number;
  /** The session's private directory (init file, command file, log). */
  dir: string;
  /** A directory the shell may write inside a sandbox (its rc-error log goes there); default `dir`. */
  rcLogDir?: string;
  /** The session runs outside the sandbox (an escalation a human approved). */
  outside?: boolean;
  /** Raw characters of one command kept in memory; older ones are dropped (the log has them). */
  maxBufferChars: number;
  /** Bytes the session log may grow to. */
  maxLogBytes: number;
  /** SIGTERM -> SIGKILL grace when the session's processes are ended. */
  killGraceMs: number;
  logger: Logger;
  spawnPty: SessionPtySpawner;
  /** Shell code defining the safe `rm` function (written to the session dir and sourced), if any. */
  rmFunction?: string;
  /** Re-source the user's rc files before a command when they changed. */
  reloadRcFiles?: boolean;
  /** The lifecycle moved (the pool emits events and wakes collectors). */
  onState: (state: SessionLifecycleState, previous: SessionLifecycleState) => void;
  /** The current command printed its begin marker. */
  onBegin?: () => void;
  /** Output arrived (raw command output is also passed to onOutput). */
  onData?: () => void;
  onOutput?: (text: string) => void;
}

export interface CommandDone {
  exitCode: number;
  cwd: string;
}

export interface ShellExit {
  exitCode: number;
  signal: number;
  /** The shell was killed because its supervisor went away: why (see SessionPty.onExit). */
  supervisorLost?: string;
  supervisorUnresponsive?: true;
}

/** A typed line the session's foreground shell has not run yet (text without a line end). */
export interface PendingShellLine {
  pid: number;
  text: string;
}

/**
 * One persistent login shell under a PTY, driven by the marker protocol of shell-scripts.ts.
 * Runs one command at a time; output between the begin and end markers is the command's. Its
 * state is its `lifecycle` (the pool drives the transitions a tool call causes; the session those
 * the shell causes: ready, finished, exited).
 */
export class PtySession {
  readonly id: number;
  readonly startedAt = Date.now();
  /** When it started on the monotonic clock (ages and idle times: a stepped wall clock does not move them). */
  readonly startedMono = performance.now();
  readonly dir: string;
  readonly logPath: string;
  readonly lifecycle: SessionLifecycle;
  /** The command being run (or last run). */
  command: string | undefined;
  cwd: string;
  lastActivity = performance.now();
  lastUsed = performance.now();
  /** When input was last typed into the running command, and when its output last grew. */
  lastInputAt = 0;
  lastOutputAt = 0;
  /** The finished command's result, until it is taken. */
  done: CommandDone | undefined;
  exit: ShellExit | undefined;
  /** Characters of the current command dropped from memory (the log keeps them). */
  droppedChars = 0;
  /** When the current command was typed (the begin marker must follow). */
  typedAt = 0;
  /** Input typed into a shell the foreground job runs, not yet ended by a newline. */
  shellLine: PendingShellLine | undefined;
  /** The rc files re-sourced before the current command (empty when none were). */
  reloadedRc: readonly string[] = [];
  /** Characters received from the PTY so far (start-up noise, echo, markers, output): progress. */
  receivedChars = 0;
  /** The pool's watchdog found the typed command's shell stuck before its begin marker. */
  beginStalled = false;
  /** Where the shell's history goes: the session's own file, never the user's `~/.bash_history`. */
  readonly historyFile: string;

  private readonly options: PtySessionOptions;
  private readonly pty: SessionPty;
  private readonly nonce = randomBytes(8).toString('hex');
  private readonly key = randomBytes(8).toString('hex');
  private readonly parser: MarkerParser;
  private readonly commandFile: string;
  private readonly rmFile: string | undefined;
  private readonly rcLog: string;
  private readonly rcWatch: RcWatch | undefined;
  /** A `wait_for` pattern the current collect watches output for, and what it matched. */
  private pattern: RegExp | undefined;
  private patternCarry = '';
  /** The line the watched pattern matched on (undefined: no match yet). */
  matchedLine: string | undefined;
  private readonly removeListeners: (() => void)[] = [];
  private startupText: string | undefined;
  private tty: string | undefined;
  /** The shell's process image once ready: an `exec` replacing it changes it. */
  private image: ProcessImage | undefined;
  private seq = 0;
  /** What the last command's per-call env left to restore (the next command file starts with it). */
  private pendingRestore: string | undefined;
  /** Output of the current command not yet returned, as received (joined only when read). */
  private unread: string[] = [];
  private unreadChars = 0;
  /** The last TAIL_CHARS characters of the current command's output (prompt detection, UIs). */
  private recent = '';
  private logPending: string[] = [];
  private logPendingChars = 0;
  private logTimer: NodeJS.Timeout | undefined;
  private logFailed = false;
  private cmdFd: number | undefined;
  private logBytes = 0;
  private killing: Promise<void> | undefined;
  /** A cancel SIGKILLed the whole tree and saw it gone. */
  private cancelled = false;
  private sweeping: Promise<void> | undefined;
  private exitWaiters: (() => void)[] = [];
  private readyWaiters: { resolve: () => void; reject: (error: Error) => void }[] = [];

  /** Whether it runs outside the sandbox (an escalation a human approved). */
  get outside(): boolean {
    return this.options.outside === true;
  }

  constructor(options: PtySessionOptions) {
    this.options = options;
    this.id = options.id;
    this.cwd = options.cwd;
    this.dir = options.dir;
    this.lifecycle = new SessionLifecycle(options.id, options.onState);
    this.parser = new MarkerParser(this.nonce, {
      ready: (cwd, before) => this.onReady(cwd, before),
      begin: () => {
        this.reportRcErrors();
        options.onBegin?.();
      },
      output: (text) => this.commit(text),
      end: (exitCode, cwd) => this.onEnd(exitCode, cwd),
      // Output of a job a command left running (`server &`) and job notices: not part of any
      // command's result, but kept in the session log so nothing is lost.
      idle: (text) => this.appendLog(text),
    });
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    this.logPath = join(this.dir, 'session.log');
    this.commandFile = join(this.dir, 'cmd.sh');
    this.rcLog = options.rcLogDir
      ? join(options.rcLogDir, `session-${options.id}.log`)
      : join(this.dir, 'rc-errors.log');
    // Beside the rc log: writable inside a sandbox, private to the registry, gone with its temp dir.
    this.historyFile = options.rcLogDir
      ? join(options.rcLogDir, `session-${options.id}.history`)
      : join(this.dir, 'history');
    if (options.rmFunction !== undefined) {
      this.rmFile = join(this.dir, 'rm.sh');
      writeFileSync(this.rmFile, options.rmFunction, { mode: 0o600 });
    }
    // The rc files as they are before the shell reads them: a later change is re-sourced.
    if (options.reloadRcFiles) this.rcWatch = new RcWatch(options.shellKind, options.shellArgs, options.env);
    const init = join(this.dir, 'init.sh');
    writeFileSync(
      init,
      initScript({
        kind: options.shellKind,
        nonce: this.nonce,
        key: this.key,
        commandFile: this.commandFile,
        sessionEnv: options.sessionEnv,
        historyFile: this.historyFile,
        ...(this.rmFile === undefined ? {} : { rmFile: this.rmFile }),
      }),
      { mode: 0o600 },
    );
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(options.env)) if (v !== undefined) env[k] = v;
    env.TERM = env.TERM && env.TERM !== 'dumb' ? env.TERM : 'xterm-256color';
    // From the first line the shell reads (and in shells the agent starts in it): the agent's
    // commands never land in the user's history. The init file sets it again after the rc files.
    env.HISTFILE = this.historyFile;
    this.pty = options.spawnPty({
      file: options.shell,
      args: options.shellArgs,
      cwd: options.cwd,
      env,
      cols: options.cols,
      rows: options.rows,
      ...(options.outside ? { outside: true } : {}),
    });
    this.removeListeners.push(
      this.pty.onData((data) => this.onData(data)),
      this.pty.onExit((e) => this.onExit(e)),
    );
    // Typed once the rc files are done (the tty queues it until then).
    this.pty.write(` \\. ${shellQuote(init)}\n`);
  }

  get pid(): number {
    return this.pty.pid;
  }

  /** The shell made no progress while waited on: whether its supervisor is to blame (SessionPty.overdue). */
  supervisorOverdue(): boolean {
    return this.pty.overdue?.() ?? false;
  }

  get cookie(): string {
    return this.pty.cookie;
  }

  get alive(): boolean {
    return this.lifecycle.alive;
  }

  /** Whether the current command printed its begin marker (input may be typed into it). */
  get begun(): boolean {
    return this.parser.begun;
  }

  /** Output seen before the shell was ready (rc noise, errors): what explains a startup failure. */
  get startupOutput(): string {
    return this.startupText ?? this.parser.startupText;
  }

  /** Whether the running command's foreground job is blocked reading the terminal (Linux). */
  readsTerminal(): boolean {
    if (!this.parser.begun || !this.lifecycle.commandRunning) return false;
    this.tty ??= ttyOf(this.pty.pid);
    return foregroundReadsTty(this.pty.pid, this.tty);
  }

  /**
   * The shell typed input would reach as commands right now (the foreground job is `bash`, `sh`,
   * an `exec zsh`, ...), or undefined when input reaches a program (or nothing runs).
   */
  commandReader(): { pid: number; shell: string } | undefined {
    if (!this.parser.begun || !this.lifecycle.commandRunning) return undefined;
    this.tty ??= ttyOf(this.pty.pid);
    return commandReaderOf(this.pty.pid, this.tty, this.image);
  }

  /**
   * Resolves once the init file ran and the shell waits for commands; rejects when the shell exits
   * first or `failStart` gives up on it (the pool's watchdog judges its progress, not a clock).
   */
  whenReady(): Promise<void> {
    const state = this.lifecycle.state;
    if (state !== 'starting') {
      return state === 'exited' || state === 'closing'
        ? Promise.reject(new TerminalProtocolError('SHELL_NOT_READY', this.exitDescription()))
        : Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => this.readyWaiters.push({ resolve, reject }));
  }

  /** Gives up on a shell still starting: whoever waits for it gets `error` (the pool kills it). */
  failStart(error: Error): void {
    for (const w of this.readyWaiters.splice(0)) w.reject(error);
  }

  /** Types a command. The pool started it (lifecycle `running`); its begin marker follows. */
  run(command: string, options: { cwd?: string; env?: Readonly<Record<string, string>> } = {}): number {
    if (this.lifecycle.state !== 'running' || this.parser.begun) {
      const now = `'${this.lifecycle.state}'${this.parser.begun ? ' with a command running' : ''}`;
      throw new TerminalProtocolError(
        'SESSION_NOT_TYPABLE',
        `session ${this.id}: expected a session the pool started for a command ('running', not begun); it is ${now}`,
      );
    }
    const seq = this.seq + 1;
    // rc files the user changed since the shell read them are sourced again first.
    const reload = this.rcWatch?.takeChanged() ?? [];
    const { script, restore } = commandScript({
      nonce: this.nonce,
      seq,
      command,
      ...options,
      ...(this.pendingRestore === undefined ? {} : { pendingRestore: this.pendingRestore }),
      ...(reload.length > 0
        ? {
            preamble: rcReloadScript(
              this.options.shellKind,
              reload,
              this.rcLog,
              this.rmFile,
              this.historyFile,
            ),
          }
        : {}),
    });
    this.reloadedRc = reload;
    // One file per session, rewritten for each command through one fd: bash reads a sourced file
    // whole, the next command is only written after this one's end marker, and an open() per
    // command was most of the node-side cost of a round trip.
    this.cmdFd ??= openSync(this.commandFile, 'w', 0o600);
    const bytes = Buffer.from(script);
    writeSync(this.cmdFd, bytes, 0, bytes.length, 0);
    ftruncateSync(this.cmdFd, bytes.length);
    this.seq = seq;
    this.pendingRestore = restore;
    this.command = command;
    this.done = undefined;
    this.unread = [];
    this.unreadChars = 0;
    this.recent = '';
    this.droppedChars = 0;
    this.shellLine = undefined;
    this.unwatch();
    this.parser.expect(seq);
    this.lastActivity = performance.now();
    this.lastUsed = performance.now();
    this.typedAt = performance.now();
    this.beginStalled = false;
    this.appendLog(`\n$ ${command}\n`);
    this.pty.write(releaseLine(this.key) + sourceLine(this.options.shellKind, this.commandFile));
    return seq;
  }

  /** Types into the running program. Refused unless a command runs and has begun. */
  write(input: string): boolean {
    if (!this.parser.begun || !this.lifecycle.commandRunning) return false;
    this.lastActivity = performance.now();
    this.lastUsed = performance.now();
    if (input.length === 0) return true;
    this.lastInputAt = performance.now();
    this.pty.write(input);
    return true;
  }

  /**
   * Watches the current command's output for `pattern` (ANSI stripped): output not yet returned is
   * searched now, every later chunk as it arrives; `matchedLine` is set on the first match.
   */
  watch(pattern: RegExp): void {
    this.pattern = pattern;
    this.patternCarry = '';
    this.matchedLine = undefined;
    if (this.unread.length > 0) this.scan(this.unread.join(''));
  }

  unwatch(): void {
    this.pattern = undefined;
    this.patternCarry = '';
  }

  private scan(raw: string): void {
    const pattern = this.pattern;
    if (!pattern || this.matchedLine !== undefined) return;
    const text = this.patternCarry + stripAnsi(raw).replace(/\r(?!\n)/g, '\n');
    const m = pattern.exec(text);
    if (m) {
      const start = text.lastIndexOf('\n', m.index) + 1;
      const end = text.indexOf('\n', m.index + m[0].length);
      const line = text
        .slice(start, end < 0 ? undefined : end)
        .replace(/\r/g, '')
        .trim();
      this.matchedLine = line.length > 200 ? `${line.slice(0, 199)}…` : line;
      return;
    }
    this.patternCarry = text.slice(-4096);
  }

  /** Logs what the rc files re-sourced before this command printed on stderr (and how they failed). */
  private reportRcErrors(): void {
    if (this.reloadedRc.length === 0) return;
    let text = '';
    try {
      // The log's directory is writable inside a sandbox: whatever took its name is read only as a
      // regular file (a FIFO would block the host in open()), and at most 1 MiB of it.
      text = readRegularFileSync(this.rcLog, { maxBytes: 1 << 20, encoding: 'utf8' });
    } catch {
      // nothing was written: every file was sourced cleanly (or it was not a file conch reads)
    }
    try {
      unlinkSync(this.rcLog);
    } catch {
      // not there
    }
    if (text.trim()) {
      this.options.logger.warn(
        { sessionId: this.id, files: this.reloadedRc, errors: text.slice(-4000) },
        'an rc file re-sourced before a terminal command reported errors; the command ran anyway',
      );
    } else {
      this.options.logger.info({ sessionId: this.id, files: this.reloadedRc }, 'rc files re-sourced');
    }
  }

  /** Raw output of the current command not yet returned, and marks it read. */
  takeUnread(): string {
    const text = this.unread.join('');
    this.unread = [];
    this.unreadChars = 0;
    return text;
  }

  /** The last `chars` raw characters of the current command's output. */
  tail(chars: number): string {
    return this.recent.slice(Math.max(0, this.recent.length - chars));
  }

  /**
   * Kills the shell and everything it started (tree + cookie sweep). Idempotent. `treeKill` is a
   * kill of many sessions' trees at once (the pool's dispose) that covers this one's, cookie
   * sweep included: this session then only waits for it and for its shell's exit.
   */
  kill(graceMs: number, treeKill?: Promise<void>): Promise<void> {
    this.killing ??= (async () => {
      if (this.lifecycle.alive) {
        if (treeKill) this.sweeping ??= treeKill;
        if (!this.cancelled || treeKill)
          await (treeKill ?? killSessionTree(this.pty.pid, this.cookie, graceMs));
        this.pty.kill('SIGKILL');
        await this.waitExit(2000);
      }
      await this.sweeping;
    })();
    return this.killing;
  }

  /**
   * A cancel (an aborted call, `kill: true`): SIGKILLs the shell and its whole tree at once, no
   * grace, and returns once they are gone (synchronously: it may run inside the abort event). The
   * kill that follows only waits for the shell's exit report and sweeps.
   */
  cancelNow(): void {
    // Also during a kill already under way: its SIGTERM grace ends as soon as the tree is gone.
    if (!this.lifecycle.alive) return;
    const left = cancelSessionTree(this.pty.pid, this.cookie);
    // Gone, cookie escapees included: the kill that follows need not look for the tree again.
    this.cancelled = left.length === 0;
    if (left.length > 0) {
      this.options.logger.warn(
        { sessionId: this.id, pids: left },
        'terminal cancel: processes still alive after SIGKILL',
      );
    }
  }

  /** SIGKILLs the tree synchronously (host process exit). */
  killSync(): void {
    killSessionTreeSync(this.pty.pid, this.cookie);
  }

  /** Resolves when what the shell left behind after it exited is gone (at once while it runs). */
  swept(): Promise<void> {
    return this.sweeping ?? Promise.resolve();
  }

  /** Flushes the log and closes the command file; the directory stays for readLog (registry temp). */
  release(): void {
    this.flushLog();
    this.closeCommandFile();
    for (const remove of this.removeListeners.splice(0)) remove();
  }

  private waitExit(timeoutMs: number): Promise<void> {
    if (!this.lifecycle.alive) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.exitWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private exitDescription(): string {
    const e = this.exit;
    if (!e) return 'the shell exited';
    if (e.supervisorLost !== undefined)
      return `the shell was killed because conch's process supervisor went away (${e.supervisorLost})`;
    return `the shell exited (${e.signal ? `signal ${e.signal}` : `code ${e.exitCode}`})`;
  }

  private onReady(cwd: string, before: string): void {
    this.startupText = before;
    this.cwd = this.verifiedCwd(cwd);
    this.image = imageOf(this.pty.pid);
    if (this.lifecycle.state !== 'starting') return; // killed while starting
    this.lifecycle.ready();
    for (const w of this.readyWaiters.splice(0)) w.resolve();
  }

  private onEnd(exitCode: number, cwd: string): void {
    this.cwd = this.verifiedCwd(cwd);
    this.appendLog(`\n[exit ${exitCode}]\n`);
    if (!this.lifecycle.commandRunning) return; // closing: the kill reports
    this.done = { exitCode, cwd: this.cwd };
    this.lifecycle.finish();
  }

  /**
   * The cwd the end marker names, when it is where the shell really is: `$PWD` is a variable a
   * command can assign, the kernel's `/proc/<pid>/cwd` is not. The marker's spelling is kept when
   * it resolves to the same directory (symlinked paths stay as the user typed them).
   */
  private verifiedCwd(reported: string): string {
    let real: string;
    try {
      real = readlinkSync(`/proc/${this.pty.pid}/cwd`);
    } catch {
      return reported || this.cwd; // not Linux
    }
    if (reported) {
      try {
        if (realpathSync.native(reported) === real) return reported;
      } catch {
        // not a directory: the kernel's answer
      }
    }
    const deleted = real.endsWith(' (deleted)') ? real.slice(0, -' (deleted)'.length) : undefined;
    // A directory removed under the shell: the kernel names it from the root of the mount it was on,
    // which in a sandbox is the bound workspace (`/tdir` for `<workspace>/tdir`). The marker's
    // spelling is kept when it ends with that path: where the shell was, now gone.
    if (deleted !== undefined && reported && (deleted === '/' || reported.endsWith(deleted))) return reported;
    return deleted ?? real;
  }

  private onExit(e: ShellExit): void {
    const { exitCode, signal } = e;
    this.exit = {
      exitCode: signal ? 128 + signal : exitCode,
      signal,
      ...(e.supervisorLost === undefined ? {} : { supervisorLost: e.supervisorLost }),
      ...(e.supervisorUnresponsive ? { supervisorUnresponsive: true as const } : {}),
    };
    const wasStarting = this.lifecycle.state === 'starting';
    this.appendLog(
      e.supervisorLost === undefined
        ? `\n[shell exited: ${signal ? `signal ${signal}` : `code ${exitCode}`}]\n`
        : `\n[shell killed: ${e.supervisorLost}]\n`,
    );
    this.flushLog();
    this.closeCommandFile();
    // What the shell started may outlive it (`nohup server & exit`, a job still running): swept
    // like a killed session's, by its cookie (the shell's pid is free for reuse now).
    this.sweeping ??= sweepSessionCookie(this.cookie, this.options.killGraceMs).catch((error: unknown) => {
      this.options.logger.warn({ err: error, sessionId: this.id }, 'terminal session sweep failed');
    });
    const error = new TerminalProtocolError(
      'SHELL_NOT_READY',
      `${this.exitDescription()}${wasStarting ? ' before it was ready' : ''}`,
    );
    for (const w of this.readyWaiters.splice(0)) w.reject(error);
    for (const w of this.exitWaiters.splice(0)) w();
    this.lifecycle.exited();
  }

  private onData(data: string): void {
    this.lastActivity = performance.now();
    this.receivedChars += data.length;
    if (!this.lifecycle.alive) {
      // Late bytes of a shell that died before it was ready still explain why.
      if (this.startupText === undefined) this.parser.push(data);
      return;
    }
    this.parser.push(data);
    this.options.onData?.();
  }

  /** Adds command output: unread list (bounded), recent tail, log, output event. */
  private commit(text: string): void {
    if (text.length === 0) return;
    this.lastOutputAt = performance.now();
    this.unread.push(text);
    this.unreadChars += text.length;
    this.recent =
      text.length >= TAIL_CHARS
        ? text.slice(text.length - TAIL_CHARS)
        : (this.recent + text).slice(-TAIL_CHARS);
    while (this.unreadChars > this.options.maxBufferChars && this.unread.length > 1) {
      const dropped = this.unread.shift()!;
      this.unreadChars -= dropped.length;
      this.droppedChars += dropped.length;
    }
    this.appendLog(text);
    if (this.pattern) this.scan(text);
    this.options.onOutput?.(text);
  }

  /**
   * Appends to the session log. Text is batched and written synchronously every LOG_FLUSH_MS (or
   * at 256 KiB): one small write per batch instead of a threadpool round trip per chunk.
   */
  private appendLog(text: string): void {
    if (this.logBytes >= this.options.maxLogBytes || text.length === 0) return;
    this.logPending.push(text);
    this.logPendingChars += text.length;
    if (this.logPendingChars >= 256 * 1024) this.flushLog();
    else if (!this.logTimer) {
      this.logTimer = setTimeout(() => this.flushLog(), LOG_FLUSH_MS);
      this.logTimer.unref();
    }
  }

  private closeCommandFile(): void {
    if (this.cmdFd === undefined) return;
    try {
      closeSync(this.cmdFd);
    } catch {
      // already closed
    }
    this.cmdFd = undefined;
  }

  /** Writes the batched log text now (before a host reads the log, and at the end). */
  flushLog(): void {
    if (this.logTimer) clearTimeout(this.logTimer);
    this.logTimer = undefined;
    if (this.logPending.length === 0) return;
    let text = this.logPending.join('');
    this.logPending = [];
    this.logPendingChars = 0;
    const room = this.options.maxLogBytes - this.logBytes;
    let bytes = Buffer.byteLength(text);
    if (bytes > room) {
      text = `${Buffer.from(text).subarray(0, Math.max(0, room)).toString()}\n[log truncated at ${this.options.maxLogBytes} bytes]\n`;
      bytes = this.options.maxLogBytes - this.logBytes;
    }
    this.logBytes += bytes;
    try {
      appendFileSync(this.logPath, text, { mode: 0o600 });
    } catch (error) {
      if (!this.logFailed) {
        this.logFailed = true;
        this.options.logger.warn({ err: error, sessionId: this.id }, 'terminal session log write failed');
      }
    }
  }
}
