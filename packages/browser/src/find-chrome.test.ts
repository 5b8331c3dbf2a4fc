// Invariant: the browser executable comes from CHROME_PATH or PATH only (never a download), and when there is none the error names everything that was searched.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BrowserNotFoundError } from './errors/browser-not-found-error.js';
import { findChrome } from './find-chrome.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

function fakeExecutable(name: string): string {
  dir ??= mkdtempSync(join(tmpdir(), 'conch-find-chrome-'));
  const path = join(dir, name);
  writeFileSync(path, '#!/bin/sh\nexit 0\n');
  chmodSync(path, 0o755);
  return path;
}

describe('findChrome', () => {
  it('prefers CHROME_PATH', () => {
    const path = fakeExecutable('my-chrome');
    expect(findChrome({ CHROME_PATH: path, PATH: '/usr/bin' })).toBe(path);
  });

  it('refuses a CHROME_PATH that is not an executable file, naming it', () => {
    const path = fakeExecutable('not-exec');
    chmodSync(path, 0o644);
    expect(() => findChrome({ CHROME_PATH: path })).toThrow(BrowserNotFoundError);
    expect(() => findChrome({ CHROME_PATH: path })).toThrow(`CHROME_PATH=${path}`);
    expect(() => findChrome({ CHROME_PATH: 'chromium' })).toThrow(/not an absolute path/);
  });

  it('searches PATH for the known names in order', () => {
    const chrome = fakeExecutable('google-chrome');
    fakeExecutable('chrome');
    expect(findChrome({ PATH: `/nonexistent:${dir!}` })).toBe(chrome);
  });

  it('says what it searched and that it never downloads', () => {
    let error: unknown;
    try {
      findChrome({ PATH: '/nonexistent' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(BrowserNotFoundError);
    const e = error as BrowserNotFoundError;
    expect(e.code).toBe('BROWSER_NOT_FOUND');
    expect(e.message).toMatch(/chromium on PATH, chromium-browser on PATH, google-chrome on PATH/);
    expect(e.message).toMatch(/never downloads/);
    expect(e.message).toMatch(/apt-get install -y chromium/);
  });
});
