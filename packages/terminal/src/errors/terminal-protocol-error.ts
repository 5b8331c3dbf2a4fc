import { ConchError } from '@conch/core';

/**
 * The marker protocol was used outside its contract: a value that cannot be written into the
 * shell's scripts, a command typed into a session that cannot take one, a shell that did not
 * become ready. `SHELL_NOT_READY` reaches hosts only as the cause of a SHELL_START_FAILED.
 */
export type TerminalProtocolErrorCode = 'INVALID_PROTOCOL_VALUE' | 'SESSION_NOT_TYPABLE' | 'SHELL_NOT_READY';

export class TerminalProtocolError extends ConchError {
  declare readonly code: TerminalProtocolErrorCode;

  constructor(code: TerminalProtocolErrorCode, message: string) {
    super({ code, message });
    this.name = 'TerminalProtocolError';
  }
}
