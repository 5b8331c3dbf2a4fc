import { ConchError } from '@conch/core';

/**
 * A detached exec-server session could not be re-attached: its grace period ended with no client
 * (or no client could reach the target before it ended), so the server killed everything it ran
 * and removed its attach socket. The message names the work that was lost; the next call starts a
 * new server.
 */
export class SessionExpiredError extends ConchError {
  readonly target: string;
  readonly sessionId: string;
  readonly graceMs: number;
  /** What the client had there: 'process <id> (<command>)', 'terminal session <n>'. */
  readonly lost: readonly string[];

  constructor(target: string, sessionId: string, graceMs: number, lost: readonly string[], why: string) {
    const what =
      lost.length > 0 ? `its work is gone: ${lost.join(', ')}` : 'nothing of this client ran there';
    super({
      code: 'SESSION_EXPIRED',
      message: `the exec server session ${sessionId} on ${target} expired (${why}; grace period ${graceMs} ms) and killed everything it ran; ${what}. Start what is still needed again: the next call starts a new server`,
    });
    this.name = 'SessionExpiredError';
    this.target = target;
    this.sessionId = sessionId;
    this.graceMs = graceMs;
    this.lost = lost;
  }
}
