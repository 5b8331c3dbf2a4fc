import { ConchError } from '@conch/core';

/** A session was asked to move between states the lifecycle does not connect (a terminal bug). */
export class InvalidSessionTransitionError extends ConchError {
  readonly sessionId: number;
  readonly from: string;
  readonly to: string;

  constructor(sessionId: number, from: string, to: string, allowed: readonly string[]) {
    super({
      code: 'INVALID_SESSION_TRANSITION',
      message:
        `terminal session ${sessionId}: state '${from}' cannot become '${to}'; ` +
        `expected one of ${allowed.length > 0 ? allowed.map((s) => `'${s}'`).join(', ') : '(none: final state)'}`,
    });
    this.name = 'InvalidSessionTransitionError';
    this.sessionId = sessionId;
    this.from = from;
    this.to = to;
  }
}
