import { ConchError } from '@conch/core';

/** Why a call could not have the session it asked for (each maps to the tool's `error` result). */
export type TerminalSessionErrorCode =
  | 'UNKNOWN_SESSION'
  | 'SESSION_BUSY'
  | 'NO_RUNNING_COMMAND'
  | 'POOL_FULL'
  | 'POOL_DISPOSED'
  | 'SHELL_START_FAILED';

const CODES = new Set<string>([
  'UNKNOWN_SESSION',
  'SESSION_BUSY',
  'NO_RUNNING_COMMAND',
  'POOL_FULL',
  'POOL_DISPOSED',
  'SHELL_START_FAILED',
]);

/**
 * A session could not be claimed or acquired: unknown or finished id, busy, no running command,
 * pool full or shutting down, or the shell did not start. The message is the one the model gets.
 */
export class TerminalSessionError extends ConchError {
  declare readonly code: TerminalSessionErrorCode;
  /** The session asked for, when one was named. */
  readonly sessionId: number | undefined;

  constructor(code: TerminalSessionErrorCode, message: string, sessionId?: number, cause?: unknown) {
    super({ code, message, cause });
    this.name = 'TerminalSessionError';
    this.sessionId = sessionId;
  }

  /** Whether `error` is one of these (works across duplicated package copies, like ConchError). */
  static is(error: unknown): error is TerminalSessionError {
    return ConchError.isInstance(error) && CODES.has(error.code);
  }
}
