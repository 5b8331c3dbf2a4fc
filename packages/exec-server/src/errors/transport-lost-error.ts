import { ConchError } from '@conch/core';

/**
 * The connection to a target dropped (the transport command exited, its stream closed, or the
 * server stopped answering pings). Calls running on it fail with this; the next call reconnects.
 * What ran in the target is killed there by the server when it sees its stream close.
 */
export class TransportLostError extends ConchError {
  readonly target: string;
  readonly reason: string;

  constructor(target: string, reason: string, cause?: unknown) {
    super({
      code: 'TRANSPORT_LOST',
      message: `the connection to ${target} was lost (${reason}); what ran there was killed by its exec server, and the next call reconnects`,
      cause,
    });
    this.name = 'TransportLostError';
    this.target = target;
    this.reason = reason;
  }
}
