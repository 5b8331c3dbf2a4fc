import { InvalidSessionTransitionError } from './errors/invalid-session-transition-error.js';

/**
 * The lifecycle of one terminal session, the single owner of its state. Every change goes through
 * a method named for the event that causes it; a change the lifecycle does not allow throws an
 * InvalidSessionTransitionError (code INVALID_SESSION_TRANSITION) instead of corrupting the pool.
 *
 *   starting --ready--> idle --start--> running <--report--> waiting / background
 *                        ^  \--abandon-- running (the command was never typed)
 *                        |                 | end marker (finish)
 *                        +--takeResult-- finished
 *   any but exited --close(reason)--> closing --exited--> exited   (and any --exited--> exited)
 *
 * Who holds the session (a tool call reading it) is the lease, kept beside the state: a leased
 * session is never handed to another call, reaped or taken for a new command.
 */
export type SessionLifecycleState =
  'starting' | 'idle' | 'running' | 'waiting' | 'background' | 'finished' | 'closing' | 'exited';

/** The state hosts see (`list()`, `terminal.session.state`): a finished command's shell is idle. */
export type SessionState = 'starting' | 'idle' | 'running' | 'waiting' | 'background' | 'exited';

/** Why a session ended (`terminal.session.exited`). */
export type SessionExitReason = 'exit' | 'killed' | 'reaped' | 'disposed' | 'startup-failed' | 'broken';

const NEXT: Readonly<Record<SessionLifecycleState, readonly SessionLifecycleState[]>> = {
  starting: ['idle', 'closing', 'exited'],
  idle: ['running', 'closing', 'exited'],
  running: ['idle', 'waiting', 'background', 'finished', 'closing', 'exited'],
  waiting: ['running', 'background', 'finished', 'closing', 'exited'],
  background: ['finished', 'closing', 'exited'],
  finished: ['idle', 'closing', 'exited'],
  closing: ['exited'],
  exited: [],
};

/** The public projection of a lifecycle state. */
export function publicState(state: SessionLifecycleState): SessionState {
  if (state === 'finished') return 'idle';
  if (state === 'closing') return 'exited';
  return state;
}

export class SessionLifecycle {
  readonly sessionId: number;
  private current: SessionLifecycleState = 'starting';
  private reason: SessionExitReason | undefined;
  private readonly onChange: (state: SessionLifecycleState, previous: SessionLifecycleState) => void;

  constructor(
    sessionId: number,
    onChange: (state: SessionLifecycleState, previous: SessionLifecycleState) => void = () => {},
  ) {
    this.sessionId = sessionId;
    this.onChange = onChange;
  }

  get state(): SessionLifecycleState {
    return this.current;
  }

  /** Why the session closed or exited (undefined while it lives). */
  get exitReason(): SessionExitReason | undefined {
    return this.reason;
  }

  /** Whether the shell process still runs (closing sessions are being killed). */
  get alive(): boolean {
    return this.current !== 'exited';
  }

  /** Whether a command was started and its result not yet returned. */
  get hasCommand(): boolean {
    return (
      this.current === 'running' ||
      this.current === 'waiting' ||
      this.current === 'background' ||
      this.current === 'finished'
    );
  }

  /** Whether a command runs right now (its end marker has not arrived). */
  get commandRunning(): boolean {
    return this.current === 'running' || this.current === 'waiting' || this.current === 'background';
  }

  /** The init file ran: the shell waits at its gate. */
  ready(): void {
    this.move('idle');
  }

  /** A command is about to be typed. */
  start(): void {
    this.move('running');
  }

  /** The claimed session is given back without its command having been typed. */
  abandon(): void {
    this.move('idle');
  }

  /** How a collect saw the running command: still running, waiting for input, or in background. */
  report(state: 'running' | 'waiting' | 'background'): void {
    this.move(state);
  }

  /** The command's end marker arrived. */
  finish(): void {
    this.move('finished');
  }

  /** The finished command's result was returned: the shell is free again. */
  takeResult(): void {
    this.move('idle');
  }

  /** The session is being killed. Returns false when it already was (or is gone). */
  close(reason: SessionExitReason): boolean {
    if (this.current === 'closing' || this.current === 'exited') return false;
    this.reason = reason;
    this.move('closing');
    return true;
  }

  /** The shell process is gone. Idempotent. */
  exited(): void {
    if (this.current === 'exited') return;
    this.reason ??= this.current === 'starting' ? 'startup-failed' : 'exit';
    this.move('exited');
  }

  private move(next: SessionLifecycleState): void {
    const previous = this.current;
    if (previous === next) return;
    const allowed = NEXT[previous];
    if (!allowed.includes(next)) {
      throw new InvalidSessionTransitionError(this.sessionId, previous, next, allowed);
    }
    this.current = next;
    this.onChange(next, previous);
  }
}
