import { ConchError, describeValue } from '@conch/core';

/** A file operator method got an argument of the wrong type or value (a programming error). */
export class InvalidFileArgumentError extends ConchError {
  readonly field: string;

  constructor(operation: string, field: string, expected: string, received: unknown) {
    super({
      code: 'INVALID_FILE_ARGUMENT',
      message: `files.${operation} '${field}': expected ${expected}; received ${describeValue(received)}`,
    });
    this.name = 'InvalidFileArgumentError';
    this.field = field;
  }
}
