import { ConchError } from '@conch/core';

/** Why a file operation was refused or failed; each is a stable `code`. */
export type FileErrorCode =
  | 'FILE_NOT_FOUND'
  | 'NOT_A_FILE'
  | 'NOT_A_DIRECTORY'
  | 'OUTSIDE_WORKING_DIR'
  | 'PROTECTED_PATH'
  | 'BINARY_FILE'
  | 'FILE_TOO_LARGE'
  | 'EDIT_NO_MATCH'
  | 'EDIT_AMBIGUOUS'
  | 'EDIT_NO_CHANGE'
  | 'FILE_PERMISSION_DENIED'
  | 'FILE_ERROR';

/**
 * A file operation the caller can recover from (a missing file, a protected path, an edit that
 * does not match): the host API throws it; the model's tools return it as `{ error, error_code, display }`.
 */
export class FileOperationError extends ConchError {
  declare readonly code: FileErrorCode;
  /** read, write, edit, list, stat, glob. */
  readonly operation: string;
  /** The path as the caller gave it. */
  readonly path: string;
  /** One line for UIs. */
  readonly display: string;

  constructor(options: {
    code: FileErrorCode;
    operation: string;
    path: string;
    message: string;
    display?: string;
    cause?: unknown;
  }) {
    super({ code: options.code, message: options.message, cause: options.cause });
    this.name = 'FileOperationError';
    this.operation = options.operation;
    this.path = options.path;
    const first = options.message.split('\n', 1)[0]!;
    this.display = options.display ?? (first.length > 300 ? `${first.slice(0, 299)}…` : first);
  }
}

/** Whether `error` is a FileOperationError (also from a duplicated copy of this package). */
export function isFileOperationError(error: unknown): error is FileOperationError {
  return ConchError.isInstance(error) && (error as Error).name === 'FileOperationError';
}
