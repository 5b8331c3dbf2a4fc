import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  closeSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import pty, { type IPty } from '@lydell/node-pty';
import type { Logger } from '@conch/core';
import { killSessionTree, killSessionTreeSync, COOKIE_VAR } from './process-tree.js';
import { foregroundReadsTty, ttyOf } from './tty-reader.js';
import { commandScript, initScript, MARKER_OSC, shellQuote, type ShellKind } from './shell-scripts.js';

const TAIL_CHARS = 8192;
const LOG_FLUSH_MS = 100;

/** Where a suffix of `text` that could begin `prefix` starts (text.length when none). */
function partialPrefixStart(text: string, prefix: string): number {
  const from = Math.max(0, text.length - prefix.length + 1);
  for (let i = text.indexOf('\u001b', from); i >= 0; i = text.indexOf('\u001b', i + 1)) {
    if (prefix.startsWith(text.slice(i))) return i;
  }
  return text.length;
}

export type SessionState = 'starting' | 'idle' | 'running' | 'waiting' | 'background' | 'exited';

export interface PtySessionOptions {
  id: number;
  shell: string;
  /** Which init flavour the shell gets. */
  shellKind: ShellKind;
  shellArgs: readonly string[];
  cwd: string;
  /** Environment of the shell process (the cookie is added). */
  env: Readonly<Record<string, string | undefined>>;
  /** Exported after the rc files ran (e.g. PAGER=cat). */
  sessionEnv: Readonly<Record<string, string>>;
  cols: number;
  rows: number;
  /** The session's private directory (init file, command files, log). */
  dir: string;
  /** Raw characters of one command kept in memory; older ones are dropped (the log has them). */
  maxBufferChars: number;
  /** Bytes the session log may grow to. */
  maxLogBytes: number;
  logger: Logger;
  /** 'data' on output, 'end' when a command finished or the shell exited. */
  onChange: (kind: 'data' | 'end') => void;
  onOutput?: (text: string) => void;
}

export interface CommandDone {
  exitCode: number;
  cwd: string;
}

export interface ShellExit {
  exitCode: number;
  signal: number;
  killed: boolean;
}

/**
 * One persistent login shell under a PTY, driven by the marker protocol of shell-scripts.ts.
 * Runs one command at a time; output between the begin and end markers is the command's.
 */
export class PtySession {
  readonly id: number;
  readonly cookie: string;
  readonly startedAt = Date.now();
  readonly dir: string;
  readonly logPath: string;
  state: SessionState = 'starting';
  /** The command being run (or last run). */
  command: string | undefined;
  cwd: string;
  lastActivity = Date.now();
  lastUsed = Date.now();
  /** Set once the current command printed its end marker. */
  done: CommandDone | undefined;
  exit: ShellExit | undefined;
  /** Whether a tool call is currently reading this session. */
  reading = false;
  /** Characters of the current command dropped from memory (the log keeps them). */
  droppedChars = 0;
  private startupText: string | undefined;
  private tty: string | undefined;

  private readonly options: PtySessionOptions;
  private readonly pty: IPty;
  private readonly nonce = randomBytes(8).toString('hex');
  private readonly key = randomBytes(8).toString('hex');
  private readonly beginPrefix: string;
  private readonly endPrefix: string;
  private phase: 'starting' | 'idle' | 'pre' | 'in' | 'dead' = 'starting';
  private seq = 0;
  private pending = '';
  /** Output of the current command not yet returned, as received (joined only when read). */
  private unread: string[] = [];
  private unreadChars = 0;
  /** The last TAIL_CHARS characters of the current command's output (prompt detection, UIs). */
  private recent = '';
  /** Text that may be the start of an end marker split across chunks. */
  private held = '';
  private logPending: string[] = [];
  private logPendingChars = 0;
  private logTimer: NodeJS.Timeout | undefined;
  private logFailed = false;
  private cmdFd: number | undefined;
  private logBytes = 0;
  private killing: Promise<void> | undefined;
  private exitKilled = false;
  private readyWaiters: { resolve: () => void; reject: (error: Error) => void }[] = [];

  constructor(options: PtySessionOptions) {
    this.options = options;
    this.id = options.id;
    this.cwd = options.cwd;
    this.dir = options.dir;
    this.cookie = `terminal-${randomBytes(8).toString('hex')}`;
    this.beginPrefix = `${MARKER_OSC}B;${this.nonce};`;
    this.endPrefix = `${MARKER_OSC}E;${this.nonce};`;
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    this.logPath = join(this.dir, 'session.log');
    const init = join(this.dir, 'init.sh');
    writeFileSync(
      init,
      initScript({
        kind: options.shellKind,
        nonce: this.nonce,
        key: this.key,
        commandFile: join(this.dir, 'cmd.sh'),
        sessionEnv: options.sessionEnv,
      }),
      { mode: 0o600 },
    );
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(options.env)) if (v !== undefined) env[k] = v;
    env[COOKIE_VAR] = this.cookie;
    env.TERM = env.TERM && env.TERM !== 'dumb' ? env.TERM : 'xterm-256color';
    this.pty = pty.spawn(options.shell, [...options.shellArgs], {
      name: env.TERM,
      cols: options.cols,
      rows: options.rows,
      cwd: options.cwd,
      env,
    });
    this.pty.onData((data) => this.onData(data));
    this.pty.onExit(({ exitCode, signal }) => this.onExit(exitCode, signal ?? 0));
    // Typed once the rc files are done (the tty queues it until then).
    this.pty.write(` . ${shellQuote(init)}\n`);
  }

  /** Whether the running command's foreground job is blocked reading the terminal (Linux). */
  readsTerminal(): boolean {
    if (this.phase !== 'in' && this.phase !== 'pre') return false;
    this.tty ??= ttyOf(this.pty.pid);
    return foregroundReadsTty(this.pty.pid, this.tty);
  }

  /** Output seen before the shell was ready (rc noise, errors): what explains a startup failure. */
  get startupOutput(): string {
    return this.startupText ?? this.pending;
  }

  get pid(): number {
    return this.pty.pid;
  }

  get alive(): boolean {
    return this.phase !== 'dead';
  }

  /** Resolves once the init file ran and the shell waits for commands. */
  ready(timeoutMs: number): Promise<void> {
    if (this.phase !== 'starting') {
      return this.phase === 'dead' ? Promise.reject(new Error(this.exitDescription())) : Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`the shell did not become ready within ${timeoutMs} ms`));
      }, timeoutMs);
      this.readyWaiters.push({
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
    });
  }

  /** Starts a command. The session must be idle (the caller claimed it). */
  run(command: string, options: { cwd?: string; env?: Readonly<Record<string, string>> } = {}): number {
    if (this.phase !== 'idle') throw new Error(`session ${this.id} is not idle (${this.phase})`);
    this.seq += 1;
    const seq = this.seq;
    // One file per session, rewritten for each command: bash reads a sourced file whole, and the
    // next command is only written after this one's end marker.
    const file = join(this.dir, 'cmd.sh');
    const postFile = join(this.dir, 'post.sh');
    const { script, post } = commandScript({ seq, command, ...options, postFile });
    // Rewritten in place through one fd per session: an open() per command was most of the
    // node-side cost of a round trip.
    this.cmdFd ??= openSync(file, 'w', 0o600);
    const bytes = Buffer.from(script);
    writeSync(this.cmdFd, bytes, 0, bytes.length, 0);
    ftruncateSync(this.cmdFd, bytes.length);
    if (post) writeFileSync(postFile, post, { mode: 0o600 });
    this.command = command;
    this.done = undefined;
    this.unread = [];
    this.unreadChars = 0;
    this.recent = '';
    this.held = '';
    this.pending = '';
    this.droppedChars = 0;
    this.phase = 'pre';
    this.lastActivity = Date.now();
    this.lastUsed = Date.now();
    this.appendLog(`\n$ ${command}\n`);
    this.pty.write(`${this.key}\n . "$__conch_f"\n`);
    return seq;
  }

  /** Types into the running program. Refused when no command is running. */
  write(input: string): boolean {
    if (this.phase !== 'pre' && this.phase !== 'in') return false;
    this.lastActivity = Date.now();
    this.lastUsed = Date.now();
    if (input.length > 0) this.pty.write(input);
    return true;
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

  /** Kills the shell and everything it started (tree + cookie sweep). Idempotent. */
  kill(graceMs: number): Promise<void> {
    this.killing ??= (async () => {
      if (this.phase !== 'dead') this.exitKilled = true;
      await killSessionTree(this.pty.pid, this.cookie, graceMs);
      try {
        this.pty.kill('SIGKILL');
      } catch {
        // already gone
      }
      await this.waitExit(2000);
    })();
    return this.killing;
  }

  /** SIGKILLs the tree synchronously (host process exit). */
  killSync(): void {
    killSessionTreeSync(this.pty.pid, this.cookie);
  }

  /** Flushes the log and closes the command file; the directory stays for readLog (registry temp). */
  release(): void {
    this.flushLog();
    this.closeCommandFile();
  }

  private waitExit(timeoutMs: number): Promise<void> {
    if (this.phase === 'dead') return Promise.resolve();
    return new Promise((resolve) => {
      const started = Date.now();
      const tick = () => {
        if (this.phase === 'dead' || Date.now() - started > timeoutMs) resolve();
        else setTimeout(tick, 10);
      };
      tick();
    });
  }

  private exitDescription(): string {
    const e = this.exit;
    if (!e) return 'the shell exited';
    return `the shell exited (${e.signal ? `signal ${e.signal}` : `code ${e.exitCode}`})`;
  }

  private onExit(exitCode: number, signal: number): void {
    this.exit = { exitCode: signal ? 128 + signal : exitCode, signal, killed: this.exitKilled };
    const wasStarting = this.phase === 'starting';
    this.phase = 'dead';
    this.state = 'exited';
    this.appendLog(`\n[shell exited: ${signal ? `signal ${signal}` : `code ${exitCode}`}]\n`);
    this.flushLog();
    this.closeCommandFile();
    if (wasStarting) {
      const error = new Error(`${this.exitDescription()} before it was ready`);
      for (const w of this.readyWaiters.splice(0)) w.reject(error);
    }
    this.options.onChange('end');
  }

  private onData(data: string): void {
    this.lastActivity = Date.now();
    switch (this.phase) {
      case 'starting': {
        this.pending += data;
        const at = this.pending.indexOf(`${this.endPrefix}0;`);
        if (at >= 0) {
          const close = this.pending.indexOf('\u0007', at);
          if (close < 0) return;
          const fields = this.pending.slice(at + this.endPrefix.length, close).split(';');
          this.cwd = fields.slice(2).join(';').replace(/\r\n/g, '\n') || this.cwd;
          this.startupText = this.pending.slice(0, at);
          this.pending = '';
          this.phase = 'idle';
          this.state = 'idle';
          for (const w of this.readyWaiters.splice(0)) w.resolve();
        } else if (this.pending.length > 256 * 1024) {
          this.pending = this.pending.slice(-128 * 1024);
        }
        return;
      }
      case 'pre': {
        this.pending += data;
        const marker = `${this.beginPrefix}${this.seq}\u0007`;
        const at = this.pending.indexOf(marker);
        if (at < 0) {
          if (this.pending.length > 64 * 1024) this.pending = this.pending.slice(-1024);
          return;
        }
        const rest = this.pending.slice(at + marker.length);
        this.pending = '';
        this.phase = 'in';
        if (rest) this.onCommandData(rest);
        return;
      }
      case 'in':
        this.onCommandData(data);
        return;
      case 'dead':
        // Late bytes of a shell that died before it was ready still explain why.
        if (this.startupText === undefined) this.pending += data;
        return;
      default:
        // idle: output of a job a command left running (`server &`) and job notices. Not part of
        // any command's result, but kept in the session log so nothing is lost.
        this.appendLog(data);
        return;
    }
  }

  private onCommandData(data: string): void {
    // Only the new chunk (plus a few held characters) is searched: the output so far is never
    // rescanned or flattened, so a flood costs linear time.
    const text = this.held + data;
    this.held = '';
    const at = text.indexOf(this.endPrefix);
    if (at < 0) {
      const keep = partialPrefixStart(text, this.endPrefix);
      this.held = text.slice(keep);
      this.commit(text.slice(0, keep));
      this.options.onChange('data');
      return;
    }
    const close = text.indexOf('\u0007', at);
    if (close < 0) {
      // The marker is split across chunks: hold it until its end arrives (a cwd is < 4 KiB).
      this.commit(text.slice(0, at));
      if (text.length - at > 16 * 1024) this.commit(text.slice(at));
      else this.held = text.slice(at);
      return;
    }
    const [seqText, codeText, ...cwdParts] = text.slice(at + this.endPrefix.length, close).split(';');
    this.commit(text.slice(0, at));
    if (Number(seqText) !== this.seq) {
      // A stale marker (should not happen): drop it and keep reading.
      this.onCommandData(text.slice(close + 1));
      return;
    }
    const cwd = cwdParts.join(';').replace(/\r\n/g, '\n');
    this.cwd = cwd || this.cwd;
    this.done = { exitCode: Number(codeText), cwd: this.cwd };
    this.phase = 'idle';
    this.appendLog(`\n[exit ${this.done.exitCode}]\n`);
    this.options.onChange('end');
  }

  /** Adds command output: unread list (bounded), recent tail, log, output event. */
  private commit(text: string): void {
    if (text.length === 0) return;
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
