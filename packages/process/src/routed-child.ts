import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { SandboxKind } from '@conch/sandbox';
import { DeferredWritable } from './deferred-writable.js';
import type { ExecutorSpawnRequest } from './executor.js';
import type { SpawnedChild } from './spawned-child.js';
import type { ChildLimits, ResourceLimitHit } from './sandbox-limits.js';

/**
 * A SpawnedChild whose process is started after spawn() returned: by a supervisor (the pid comes
 * in a message, the pipes as passed handles) or, when no supervisor could start, by the host
 * itself (`bindLocal`, events forwarded). It behaves like a ChildProcess towards ManagedProcess:
 * 'spawn' once the pid and every pipe are here, 'error' if the spawn failed, 'exit', then 'close'
 * once the pipes are closed too.
 */
export class RoutedChild extends EventEmitter implements SpawnedChild {
  /**
   * The host pid. A child of a sandboxed supervisor in its own pid namespace that ended before the
   * host could look it up runs and exits without one (see ns-pid.ts).
   */
  pid: number | undefined;
  /** Whether its process group still had members when it exited (from a supervisor; see SpawnedChild). */
  groupAliveAtExit: boolean | undefined;
  /** Set when it was killed because its supervisor went away (see SpawnedChild). */
  lostReason: string | undefined;
  /** With lostReason: the supervisor stopped answering and was killed (see SpawnedChild). */
  lostUnresponsive: boolean | undefined;
  /** With lostReason: it had ended on its own before, and its exit is its own (see SpawnedChild). */
  endedBeforeLoss: boolean | undefined;
  /** Set when its sandbox's process-limit watch stopped it (see SpawnedChild). */
  limitHit: ResourceLimitHit | undefined;
  /** The limits of the sandbox that started it (for its result's memory check). */
  limits: ChildLimits | undefined;
  /**
   * Output pipes its supervisor still holds (a short command's stay there until it ends or outlives
   * the hold): what dies with that supervisor. Empty once they are handed over.
   */
  heldFds: readonly number[] = [];
  /** Set by the supervisor client it is submitted to: it exited or will never start (called once or more). */
  onEnded: (() => void) | undefined;
  /** Set by the supervisor client it is submitted to: the call's limit passed before it started. */
  onOverdue: (() => void) | undefined;
  stdout: Readable | null = null;
  stderr: Readable | null = null;
  readonly stdin: DeferredWritable | null;
  /** The prepared request (what really runs). */
  readonly request: ExecutorSpawnRequest;
  /** Its env cookie: what sweeps find its tree by. */
  readonly cookie: string;
  /** Which sandbox the process really runs in (set when it is started). */
  sandbox: SandboxKind = 'none';
  private expectedFds: number[] = [];
  private readonly receivedFds = new Set<number>();
  private openPipes = 0;
  private exit: [number | null, NodeJS.Signals | null] | undefined;
  /** The supervisor started it (its pid may still be unknown to the host). */
  private startedFlag = false;
  private spawnEmitted = false;
  private closed = false;

  constructor(request: ExecutorSpawnRequest, cookie: string) {
    super();
    this.request = request;
    this.cookie = cookie;
    this.stdin = request.stdin === 'pipe' ? new DeferredWritable() : null;
  }

  /** The call's limit passed with no pid yet: its supervisor client judges whether that is a fault. */
  overdue(): void {
    this.onOverdue?.();
  }

  /** Whether it was started (by a supervisor or here), whether or not its host pid is known. */
  get started(): boolean {
    return this.startedFlag;
  }

  /**
   * The supervisor started it; `first` is the handle of `fds[0]` (the others follow). Output pipes
   * its supervisor holds are not in `fds`: their output comes by onHeldOutput, the pipes (if they
   * outlive the hold) by onUnheld.
   */
  onSpawned(
    pid: number | undefined,
    fds: readonly number[],
    first: Socket | undefined,
    held: readonly number[] = [],
  ): void {
    this.pid = pid;
    this.heldFds = held;
    this.startedFlag = true;
    this.expectedFds = [...fds];
    if (first && fds[0] !== undefined) this.onPipe(fds[0], first);
    this.maybeSpawned();
  }

  /** A pipe handle passed by the supervisor (fd 0, 1 or 2 of the child). */
  onPipe(fd: number, socket: Socket): void {
    // Until ManagedProcess listens (at 'spawn'), an error must not be unhandled.
    socket.on('error', () => {});
    this.receivedFds.add(fd);
    if (fd === 0) {
      this.stdin?.attach(socket);
    } else {
      this.openPipes++;
      socket.once('close', () => {
        this.openPipes--;
        this.maybeClose();
      });
      if (fd === 1) this.stdout = socket;
      else this.stderr = socket;
      // A pipe handed over after 'spawn' (held until then): the listener wires it now.
      if (this.spawnEmitted) this.emit('pipe');
    }
    this.maybeSpawned();
  }

  /**
   * Output its supervisor read from its held pipes (base64, as an `unheld` or `exit` message
   * carries it): an 'output' event (stream name, chunk) each, in order before the pipes themselves
   * (onUnheld) or the exit.
   */
  onHeldOutput(held: { out?: string; err?: string }): void {
    if (held.out) this.emit('output', 'stdout', Buffer.from(held.out, 'base64'));
    if (held.err) this.emit('output', 'stderr', Buffer.from(held.err, 'base64'));
  }

  /** Held pipes handed over after all (still open); each is announced by a 'pipe' event once it is here. */
  onUnheld(fds: readonly number[], pipes: readonly Socket[]): void {
    this.heldFds = [];
    for (let i = 0; i < pipes.length; i++) this.onPipe(fds[i]!, pipes[i]!);
  }

  onSpawnError(code: string, message: string): void {
    this.onEnded?.();
    this.stdin?.discard();
    const error: NodeJS.ErrnoException = new Error(message);
    error.code = code;
    // Decided during spawn() itself (a sandbox known to be broken), before anyone listens: an
    // 'error' with no listener would throw out of spawn() instead of becoming the result's
    // spawnError. Emitted once the caller has wired its listeners, as a ChildProcess does.
    if (this.listenerCount('error') === 0) process.nextTick(() => this.emit('error', error));
    else this.emit('error', error);
  }

  onExit(code: number | null, signal: string | null, groupAlive?: boolean): void {
    this.onEnded?.();
    if (groupAlive !== undefined) this.groupAliveAtExit = groupAlive;
    // The exit message comes after every pipe message (the supervisor's sends are ordered), so a
    // pipe still missing now will never come: run with what arrived rather than never start.
    if (!this.spawnEmitted && this.startedFlag) {
      this.expectedFds = [...this.receivedFds];
      this.maybeSpawned();
    }
    this.exit = [code, signal as NodeJS.Signals | null];
    this.emit('exit', code, signal);
    this.maybeClose();
  }

  /** Runs it in the host after all (no supervisor): forwards a local child's events. */
  bindLocal(child: SpawnedChild, sandbox: SandboxKind): void {
    this.sandbox = sandbox;
    this.stdout = child.stdout;
    this.stderr = child.stderr;
    if (child.stdin) this.stdin?.attach(child.stdin);
    else this.stdin?.discard();
    child.once('spawn', () => {
      this.pid = child.pid;
      this.startedFlag = true;
      this.spawnEmitted = true;
      this.emit('spawn');
    });
    child.once('error', (error: NodeJS.ErrnoException) => {
      if (child.pid === undefined) this.stdin?.discard();
      this.emit('error', error);
    });
    child.once('exit', (code, signal) => {
      this.exit = [code, signal];
      this.emit('exit', code, signal);
    });
    child.once('close', (code, signal) => {
      this.closed = true;
      this.emit('close', code, signal);
    });
  }

  private maybeSpawned(): void {
    if (this.spawnEmitted || !this.startedFlag) return;
    if (this.expectedFds.some((fd) => !this.receivedFds.has(fd))) return;
    this.spawnEmitted = true;
    this.emit('spawn');
    this.maybeClose();
  }

  private maybeClose(): void {
    if (this.closed || !this.exit || this.openPipes > 0 || !this.spawnEmitted) return;
    this.closed = true;
    this.emit('close', ...this.exit);
  }
}
