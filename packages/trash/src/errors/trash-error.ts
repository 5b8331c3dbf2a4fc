import { ConchError } from '@conch/core';

/**
 * Why a trash operation failed. `UNKNOWN_TRASH_ENTRY`: no entry has that id.
 * `TRASH_RESTORE_CONFLICT`: something exists where the entry would go back (nothing is
 * overwritten). `TRASH_RESTORE_FAILED`: the move back failed (permissions, a read-only file
 * system). `TRASH_PUT_FAILED`: a path could not be moved into the trash.
 */
export type TrashErrorCode =
  'UNKNOWN_TRASH_ENTRY' | 'TRASH_RESTORE_CONFLICT' | 'TRASH_RESTORE_FAILED' | 'TRASH_PUT_FAILED';

const CODES = new Set<string>([
  'UNKNOWN_TRASH_ENTRY',
  'TRASH_RESTORE_CONFLICT',
  'TRASH_RESTORE_FAILED',
  'TRASH_PUT_FAILED',
]);

/** A trash operation the caller can recover from; the message is what a model reads. */
export class TrashError extends ConchError {
  declare readonly code: TrashErrorCode;
  /** The entry (restore) or path (put) concerned. */
  readonly subject: string;

  constructor(code: TrashErrorCode, subject: string, message: string, cause?: unknown) {
    super({ code, message, cause });
    this.name = 'TrashError';
    this.subject = subject;
  }

  /** Whether `error` is one of these (works across duplicated package copies, like ConchError). */
  static is(error: unknown): error is TrashError {
    return ConchError.isInstance(error) && CODES.has(error.code);
  }
}
