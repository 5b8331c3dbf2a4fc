import { ConchError, describeValue } from '@conch/core';

/** A browser option given to a host API (launchChrome, probeCdp …) has the wrong value. */
export class InvalidBrowserOptionError extends ConchError {
  readonly field: string;

  constructor(field: string, expected: string, received: unknown) {
    super({
      code: 'INVALID_BROWSER_OPTION',
      message: `browser option '${field}': expected ${expected}; received ${describeValue(received)}`,
    });
    this.name = 'InvalidBrowserOptionError';
    this.field = field;
  }
}
