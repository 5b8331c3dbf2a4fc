import { ConchError } from '@conch/core';

/** The environment was used after close(). */
export class EnvironmentClosedError extends ConchError {
  constructor(operation: string) {
    super({
      code: 'ENVIRONMENT_CLOSED',
      message: `Cannot ${operation}: this environment has been closed. Create a new one with createEnvironment().`,
    });
    this.name = 'EnvironmentClosedError';
  }
}

/** Some step of close() failed; every step still ran. */
export class EnvironmentCloseError extends ConchError {
  readonly failures: readonly { step: string; error: unknown }[];

  constructor(failures: readonly { step: string; error: unknown }[]) {
    super({
      code: 'ENVIRONMENT_CLOSE_FAILED',
      message: `Closing the environment: ${failures
        .map((f) => `${f.step} failed (${f.error instanceof Error ? f.error.message : String(f.error)})`)
        .join('; ')}. Every other step ran.`,
      cause: failures[0]?.error,
    });
    this.name = 'EnvironmentCloseError';
    this.failures = failures;
  }
}
