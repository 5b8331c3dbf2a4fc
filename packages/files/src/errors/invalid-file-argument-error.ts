import { ConchError, describeValue } from '@conch/core';

/** A file operator method got an argument of the wrong type or value (a programming error). */
export class InvalidFileArgumentError extends ConchError {
  readonly field: string;

  /** `receivedText`: what was given, said in words (a size), instead of a prefix of the value. */
  constructor(operation: string, field: string, expected: string, received: unknown, receivedText?: string) {
    super({
      code: 'INVALID_FILE_ARGUMENT',
      message: `files.${operation} '${field}': expected ${expected}; received ${receivedText ?? describeValue(received)}`,
    });
    this.name = 'InvalidFileArgumentError';
    this.field = field;
  }
}
