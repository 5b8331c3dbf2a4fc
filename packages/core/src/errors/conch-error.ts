const BRAND = Symbol.for('conch.error');

export interface ConchErrorOptions {
  code: string;
  message: string;
  cause?: unknown;
}

/**
 * Base class of every error conch throws. `code` is stable across releases; match on it,
 * never on the message. `isInstance` works across duplicated package copies.
 */
export class ConchError extends Error {
  readonly code: string;
  private readonly [BRAND] = true;

  constructor({ code, message, cause }: ConchErrorOptions) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'ConchError';
    this.code = code;
  }

  static isInstance(error: unknown): error is ConchError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[BRAND] === true;
  }

  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      code: this.code,
      message: this.message,
      ...(this.cause === undefined ? {} : { cause: describeCause(this.cause) }),
    };
  }
}

function describeCause(cause: unknown): unknown {
  if (ConchError.isInstance(cause)) return cause.toJSON();
  if (cause instanceof Error) return { name: cause.name, message: cause.message };
  return String(cause);
}
