import { ConchError } from '@conch/core';

/**
 * A command the terminal would not (or could not) run to its end. `EXEC_REPLACES_SHELL`: `exec`
 * would replace the session's shell (see command-analysis.ts). `PERMISSION_DENIED`: the gate
 * refused it (`runSync`). `SHELL_PROTOCOL_BROKEN`: the shell stopped following the marker protocol
 * and was killed. `INVALID_ARGUMENTS`: an option of `runSync` is not what it must be (the message
 * names it). `SUPERVISOR_UNRESPONSIVE` / `SUPERVISOR_LOST`: conch's process supervisor, which runs
 * the session's shell, stopped answering and was replaced / went away, and the shell was killed
 * with it (not the command's failure; it may have done part of its work).
 */
export type TerminalCommandErrorCode =
  | 'EXEC_REPLACES_SHELL'
  | 'PERMISSION_DENIED'
  | 'SHELL_PROTOCOL_BROKEN'
  | 'INVALID_ARGUMENTS'
  | 'SUPERVISOR_UNRESPONSIVE'
  | 'SUPERVISOR_LOST';

export class TerminalCommandError extends ConchError {
  declare readonly code: TerminalCommandErrorCode;
  /** The permission rule that decided a denial, when there was one. */
  readonly rule: string | undefined;

  constructor(
    code: TerminalCommandErrorCode,
    message: string,
    options: { rule?: string; cause?: unknown } = {},
  ) {
    super({ code, message, cause: options.cause });
    this.name = 'TerminalCommandError';
    this.rule = options.rule;
  }
}
