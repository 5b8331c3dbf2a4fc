import { ConchError } from '@conch/core';
import { describeReceived } from './describe-received.js';

/**
 * A spawn option has the wrong type or value. Thrown by the sandbox profile's checks
 * (`normalizeSandboxProfile`) and by @conch/process for every other spawn option: one class, so
 * `instanceof` and `code` answer the same wherever the option was checked.
 */
export class InvalidSpawnOptionError extends ConchError {
  constructor(field: string, expected: string, received: unknown) {
    super({
      code: 'INVALID_SPAWN_OPTION',
      message: `spawn option '${field}': expected ${expected}; received ${describeReceived(received)}`,
    });
    this.name = 'InvalidSpawnOptionError';
  }
}
