import { ConchError } from '@conch/core';

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

/** A spawn option has the wrong type or value. */
export class InvalidSpawnOptionError extends ConchError {
  constructor(field: string, expected: string, received: unknown) {
    super({
      code: 'INVALID_SPAWN_OPTION',
      message: `spawn option '${field}': expected ${expected}; received ${JSON.stringify(received)}`,
    });
    this.name = 'InvalidSpawnOptionError';
  }
}
