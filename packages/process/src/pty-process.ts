import type { SandboxKind } from '@conch/sandbox';
import type { NodePty } from './pty-module.js';

/** How a PTY's shell ended (node-pty's shape: `signal` is 0 unless a signal ended it). */
export interface PtyExit {
  exitCode: number;
  signal: number;
  /**
   * Set when the shell did not end on its own: its supervisor went away (crashed, was killed, or
   * stopped answering and was replaced) and the host killed the PTY's tree. Why, in words.
   */
  supervisorLost?: string;
  /** With `supervisorLost`: the supervisor was stopped or hung (the health check replaced it). */
  supervisorUnresponsive?: true;
}

/** A PTY started by `ProcessManager.spawnPty` (through the supervisor, or in-process without one). */
export interface PtyProcess {
  /** The PTY child (shell) pid, in the host's pid namespace. */
  readonly pid: number;
  /** The env cookie (CONCH_PROC_COOKIE) its whole tree carries. */
  readonly cookie: string;
  /** Which sandbox it really runs in. */
  readonly sandbox: SandboxKind;
  onData(listener: (data: string) => void): () => void;
  /** Called once; at once (next tick) when the PTY already exited. */
  onExit(listener: (e: PtyExit) => void): () => void;
  write(data: string): void;
  resize(cols: number, rows: number): void;
  /** Signals the shell process only (default SIGHUP, like node-pty). */
  kill(signal?: NodeJS.Signals): void;
  /**
   * The caller waited for this PTY's shell and it made no progress (a typed command never began).
   * Input reaches the shell through the supervisor: when the health check already finds the
   * supervisor not answering, it is declared unresponsive now (the PTY then exits at once with
   * `supervisorLost`). Returns whether the supervisor is not answering, or is gone: the caller
   * should then not blame the shell. Absent (or always false) without a supervisor.
   */
  overdue?(): boolean;
}

/** The listener bookkeeping both implementations share. */
export abstract class BasePty implements PtyProcess {
  abstract readonly pid: number;
  readonly cookie: string;
  readonly sandbox: SandboxKind;
  private readonly dataListeners = new Set<(data: string) => void>();
  private readonly exitListeners = new Set<(e: PtyExit) => void>();
  private exited: PtyExit | undefined;
  private readonly onExited: (pty: BasePty) => void;

  constructor(cookie: string, sandbox: SandboxKind, onExited: (pty: BasePty) => void) {
    this.cookie = cookie;
    this.sandbox = sandbox;
    this.onExited = onExited;
  }

  get hasExited(): boolean {
    return this.exited !== undefined;
  }

  onData(listener: (data: string) => void): () => void {
    this.dataListeners.add(listener);
    return () => this.dataListeners.delete(listener);
  }

  onExit(listener: (e: PtyExit) => void): () => void {
    const exited = this.exited;
    if (exited) {
      process.nextTick(() => listener(exited));
      return () => {};
    }
    this.exitListeners.add(listener);
    return () => this.exitListeners.delete(listener);
  }

  kill(signal: NodeJS.Signals = 'SIGHUP'): void {
    if (this.exited) return;
    try {
      process.kill(this.pid, signal);
    } catch {
      // gone already
    }
  }

  abstract write(data: string): void;
  abstract resize(cols: number, rows: number): void;

  /** @internal */
  emitData(data: string): void {
    for (const listener of this.dataListeners) listener(data);
  }

  /** @internal */
  emitExit(exit: PtyExit): void {
    if (this.exited) return;
    this.exited = exit;
    this.onExited(this);
    const listeners = [...this.exitListeners];
    this.exitListeners.clear();
    this.dataListeners.clear();
    for (const listener of listeners) listener(exit);
  }
}

/** A PTY node-pty runs in this process (no supervisor). */
export class LocalPty extends BasePty {
  readonly pid: number;
  private readonly pty: NodePty;

  constructor(pty: NodePty, cookie: string, sandbox: SandboxKind, onExited: (p: BasePty) => void) {
    super(cookie, sandbox, onExited);
    this.pty = pty;
    this.pid = pty.pid;
    pty.onData((data) => this.emitData(data));
    pty.onExit(({ exitCode, signal }) => this.emitExit({ exitCode, signal: signal ?? 0 }));
  }

  write(data: string): void {
    if (!this.hasExited) this.pty.write(data);
  }

  resize(cols: number, rows: number): void {
    if (this.hasExited) return;
    try {
      this.pty.resize(cols, rows);
    } catch {
      // closed meanwhile
    }
  }
}

/** What a supervised PTY needs from its supervisor connection. */
export interface PtyRelay {
  write(id: number, data: string): void;
  resize(id: number, cols: number, rows: number): void;
  /** See PtyProcess.overdue. */
  overdue(id: number): boolean;
}

/** A PTY the supervisor runs: output arrives as messages, input and resizes go as messages. */
export class SupervisedPty extends BasePty {
  readonly pid: number;
  readonly id: number;
  private readonly relay: PtyRelay;

  constructor(
    init: { id: number; pid: number; cookie: string; sandbox: SandboxKind; relay: PtyRelay },
    onExited: (p: BasePty) => void,
  ) {
    super(init.cookie, init.sandbox, onExited);
    this.id = init.id;
    this.pid = init.pid;
    this.relay = init.relay;
  }

  write(data: string): void {
    if (!this.hasExited) this.relay.write(this.id, data);
  }

  resize(cols: number, rows: number): void {
    if (!this.hasExited) this.relay.resize(this.id, cols, rows);
  }

  overdue(): boolean {
    return this.relay.overdue(this.id);
  }
}
