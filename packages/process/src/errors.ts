import { ConchError } from '@conch/core';
import { describeReceived } from '@conch/sandbox';

// Thrown by the sandbox profile's checks too, so it lives in @conch/sandbox; exported here as before.
export { InvalidSpawnOptionError } from '@conch/sandbox';

/** spawn() was called on a disposed ProcessManager. */
export class ProcessManagerDisposedError extends ConchError {
  constructor() {
    super({
      code: 'PROCESS_MANAGER_DISPOSED',
      message:
        'Cannot spawn: this ProcessManager has been disposed (its registry was disposed). Create a new registry.',
    });
    this.name = 'ProcessManagerDisposedError';
  }
}

/** spawn() was given a `process_id` that a process the manager lists already has. */
export class DuplicateProcessIdError extends ConchError {
  readonly processId: string;
  constructor(
    field: string,
    id: string,
    holder: { isRunning: boolean; label: string; pid: number | undefined },
  ) {
    const what = holder.isRunning
      ? `a running process (${holder.label}${holder.pid !== undefined ? `, pid ${holder.pid}` : ''})`
      : `a finished process still listed (${holder.label})`;
    super({
      code: 'DUPLICATE_PROCESS_ID',
      message: `spawn option '${field}': expected an id no process of this manager has; received ${describeReceived(id)}, the id of ${what}. Choose another id, or leave it out for an automatic one`,
    });
    this.name = 'DuplicateProcessIdError';
    this.processId = id;
  }
}

/** A ProcessManager / ManagedProcess method was given an argument of the wrong type or value. */
export class InvalidProcessArgumentError extends ConchError {
  constructor(method: string, field: string, expected: string, received: unknown) {
    super({
      code: 'INVALID_PROCESS_ARGUMENT',
      message: `${method} '${field}': expected ${expected}; received ${describeReceived(received)}`,
    });
    this.name = 'InvalidProcessArgumentError';
  }
}

/** `bwrap` is needed (BubblewrapExecutor) but not on PATH. */
export class BwrapNotFoundError extends ConchError {
  constructor(what: string) {
    super({
      code: 'BWRAP_NOT_FOUND',
      message: `${what}: expected bwrap on PATH; found none. Install bubblewrap (apt-get install bubblewrap) or use LocalExecutor`,
    });
    this.name = 'BwrapNotFoundError';
  }
}

/** A PTY could not be started (node-pty missing or failing, bad cwd, ...). */
export class PtySpawnError extends ConchError {
  readonly file: string;
  constructor(file: string, cause: { code: string; message: string }) {
    super({
      code: 'PTY_SPAWN_FAILED',
      message: `spawnPty('${file}'): expected a running PTY; the spawn failed with ${cause.code}: ${cause.message}`,
      cause,
    });
    this.name = 'PtySpawnError';
    this.file = file;
  }
}

/** adoptLeftovers() was given a process that is not this manager's or has not finished. */
export class LeftoverAdoptionError extends ConchError {
  constructor(field: string, expected: string, received: unknown) {
    super({
      code: 'INVALID_LEFTOVER_ADOPTION',
      message: `adoptLeftovers '${field}': expected ${expected}; received ${describeReceived(received)}`,
    });
    this.name = 'LeftoverAdoptionError';
  }
}
