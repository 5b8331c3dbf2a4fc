declare const SERVICE: unique symbol;

/**
 * A typed key for a service plugins share (`token<BackgroundService>('conch.background')`): the
 * type travels with the token, so `ctx.resolveOptional(token)` needs no type argument. Tokens
 * with the same name are the same key (`Symbol.for`), also across duplicated package copies.
 */
export interface Token<T> {
  readonly id: symbol;
  readonly name: string;
  /** Type carrier only; never set. */
  readonly [SERVICE]?: T;
}

export function token<T>(name: string): Token<T> {
  return Object.freeze({ id: Symbol.for(name), name }) as Token<T>;
}

export function isToken(value: unknown): value is Token<unknown> {
  return typeof value === 'object' && value !== null && typeof (value as Token<unknown>).id === 'symbol';
}
