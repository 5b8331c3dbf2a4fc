import { ConchError } from '@conch/core';
import type { RemoteErrorCode } from '../protocol.js';

/** An error the server answers a request with; its code reaches the client as `error.data.code`. */
export class ServerError extends ConchError {
  constructor(code: RemoteErrorCode, message: string, cause?: unknown) {
    super({ code, message, cause });
    this.name = 'ServerError';
  }
}
