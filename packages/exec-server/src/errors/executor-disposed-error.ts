import { ConchError } from '@conch/core';

/** A call on an executor (or its process layer, files, terminal) after it was disposed. */
export class ExecutorDisposedError extends ConchError {
  readonly target: string;

  constructor(target: string, operation: string) {
    super({
      code: 'EXECUTOR_DISPOSED',
      message: `${operation} on ${target}: expected a live executor; it was disposed (its registry or environment closed)`,
    });
    this.name = 'ExecutorDisposedError';
    this.target = target;
  }
}
