import { accessSync, constants } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import { BrowserNotFoundError } from './errors/browser-not-found-error.js';
import { safeStatSync } from '@conch/core';

/** Executable names searched on PATH, in order. */
export const CHROME_NAMES: readonly string[] = Object.freeze([
  'chromium',
  'chromium-browser',
  'google-chrome',
  'google-chrome-stable',
  'chrome',
  'chrome-headless-shell',
]);

function isExecutableFile(path: string): boolean {
  try {
    if (!safeStatSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The Chrome/Chromium to start: `CHROME_PATH` when set (it must be an executable file), else the
 * first of CHROME_NAMES on PATH. Throws BrowserNotFoundError naming what was searched; never
 * downloads anything.
 */
export function findChrome(env: NodeJS.ProcessEnv = process.env): string {
  const override = env.CHROME_PATH?.trim();
  if (override) {
    if (isAbsolute(override) && isExecutableFile(override)) return override;
    throw new BrowserNotFoundError(
      [`CHROME_PATH=${override}`],
      isAbsolute(override) ? 'it is not an executable file' : 'it is not an absolute path',
    );
  }
  const dirs = (env.PATH ?? '').split(delimiter).filter((d) => d.length > 0);
  for (const name of CHROME_NAMES) {
    for (const dir of dirs) {
      const candidate = join(dir, name);
      if (isExecutableFile(candidate)) return candidate;
    }
  }
  throw new BrowserNotFoundError(['CHROME_PATH (unset)', ...CHROME_NAMES.map((n) => `${n} on PATH`)]);
}
