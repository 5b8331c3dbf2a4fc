// Every error conch throws is a ConchError with a stable code whose message names field, expectation and value.
import { describe, expect, test } from 'vitest';
import { ConchError } from './conch-error.js';
import { InvalidConfigError } from './invalid-config-error.js';
import { NoSuchToolError } from './no-such-tool-error.js';

describe('ConchError', () => {
  test('isInstance works through the Symbol.for brand, even for a copy from another package instance', () => {
    const error = new NoSuchToolError('x', ['a']);
    expect(ConchError.isInstance(error)).toBe(true);
    const foreign = Object.assign(new Error('copy'), { [Symbol.for('conch.error')]: true, code: 'X' });
    expect(ConchError.isInstance(foreign)).toBe(true);
    expect(ConchError.isInstance(new Error('plain'))).toBe(false);
    expect(ConchError.isInstance(null)).toBe(false);
  });

  test('toJSON carries code, message and cause', () => {
    const error = new InvalidConfigError(
      'cli',
      [{ path: 'a', expected: 'number', received: '"x"' }],
      new Error('root'),
    );
    expect(error.toJSON()).toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringContaining('a: number; received "x"'),
      cause: { name: 'Error', message: 'root' },
    });
    expect(JSON.parse(JSON.stringify(error))).toMatchObject({ code: 'INVALID_CONFIG' });
  });
});
