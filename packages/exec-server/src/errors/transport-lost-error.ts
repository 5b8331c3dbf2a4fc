import { ConchError } from '@conch/core';

/**
 * The connection to a target dropped (the transport command exited, its stream closed, or the
 * server stopped answering pings). Calls running on it fail with this. Without a detachable
 * session (`detachGraceMs: 0`) the server kills what it ran when it sees its stream close and the
 * next call reconnects to a new server; with one (`keptMs` > 0) the work keeps running there and
 * the next call re-attaches to it.
 */
export class TransportLostError extends ConchError {
  readonly target: string;
  readonly reason: string;
  /** How long the target keeps the work for a re-attach (0: it was killed there). */
  readonly keptMs: number;

  constructor(target: string, reason: string, cause?: unknown, keptMs = 0) {
    super({
      code: 'TRANSPORT_LOST',
      message:
        keptMs > 0
          ? `the connection to ${target} was lost (${reason}); what runs there keeps running for ${keptMs} ms, and the next call re-attaches to it`
          : `the connection to ${target} was lost (${reason}); what ran there was killed by its exec server, and the next call reconnects`,
      cause,
    });
    this.name = 'TransportLostError';
    this.target = target;
    this.reason = reason;
    this.keptMs = keptMs;
  }
}
