import type { Readable, Writable } from 'node:stream';
import type { ResourceLimitHit } from './sandbox-limits.js';

/**
 * What an executor returns for one started process: the part of node's ChildProcess that
 * ManagedProcess uses. A ChildProcess is one; a child started by the supervisor is another
 * (RoutedChild), whose pid and pipes arrive a moment after spawn() returned.
 *
 * Events: 'spawn' once the process runs (pid and pipes are set by then), 'error' when it could
 * not be started (pid stays undefined; `code` is ENOENT, EACCES, ...), 'exit' (code, signal) when
 * it ended, 'close' (code, signal) once it ended and its stdout/stderr are closed. The process
 * leads its own process group, so `-pid` reaches its tree.
 */
export interface SpawnedChild {
  /**
   * The host pid, set by 'spawn'. A sandboxed child in its own pid namespace that ended before the
   * host could look it up has none even after 'spawn'.
   */
  readonly pid?: number | undefined;
  /**
   * Set by 'exit' when the one who reaped it could tell: whether its process group still had
   * members (processes it left running). Undefined: ask the kernel by the pid.
   */
  readonly groupAliveAtExit?: boolean | undefined;
  /** Why it was killed by conch rather than by its own doing: its supervisor went away. */
  readonly lostReason?: string | undefined;
  /** With lostReason: the supervisor stopped answering and was killed by the health check. */
  readonly lostUnresponsive?: boolean | undefined;
  /**
   * With lostReason: it had ended on its own while its supervisor was stopped (a zombie it had
   * not reaped), its whole output was already here, and 'exit' carries its own code or signal as
   * the kernel kept them.
   */
  readonly endedBeforeLoss?: boolean | undefined;
  /** Its sandbox reached its process limit and stopped it (the group holding the most tasks was its). */
  readonly limitHit?: ResourceLimitHit | undefined;
  /**
   * The call's time limit passed before the child started (no pid yet): the one who starts it
   * decides whether that is a fault (a supervisor that does not answer) or progress (a supervisor
   * still starting). Absent: nothing to decide (a local spawn has its pid at once).
   */
  overdue?(): void;
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  on(event: 'spawn', listener: () => void): this;
  /**
   * Output that came without a pipe (a supervisor held the pipe and read it; see RoutedChild),
   * in order with the pipes' own data. A ChildProcess never emits it.
   */
  on(event: 'output', listener: (stream: 'stdout' | 'stderr', chunk: Buffer) => void): this;
  /** `stdout` / `stderr` was set after 'spawn' (a held pipe handed over). A ChildProcess never emits it. */
  on(event: 'pipe', listener: () => void): this;
  on(event: 'error', listener: (error: NodeJS.ErrnoException) => void): this;
  on(event: 'exit' | 'close', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  once(event: 'spawn', listener: () => void): this;
  once(event: 'error', listener: (error: NodeJS.ErrnoException) => void): this;
  once(event: 'exit' | 'close', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
}
