import { ConchError } from '@conch/core';

/**
 * A request the target's exec server refused. `code` is the server's stable code (protocol.ts
 * `RemoteErrorCode`: UNKNOWN_PROCESS, TERMINAL_UNAVAILABLE, INVALID_SPAWN_OPTION, ...).
 */
export class RemoteCallError extends ConchError {
  readonly target: string;
  readonly method: string;

  constructor(target: string, method: string, code: string, message: string, cause?: unknown) {
    super({ code, message: `${method} on ${target}: ${message}`, cause });
    this.name = 'RemoteCallError';
    this.target = target;
    this.method = method;
  }
}
