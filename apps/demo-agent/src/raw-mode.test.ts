// The TUI's raw-mode guard: re-asserting goes through cooked and back (libuv skips a raw-to-raw
// switch, so a terminal reset behind Node's back would otherwise stay cooked); restore leaves raw.
import { describe, expect, it } from 'vitest';
import { rawModeGuard } from './raw-mode.js';

function fakeStdin(isRaw: boolean, isTTY = true) {
  const calls: boolean[] = [];
  const stdin = {
    isTTY,
    isRaw,
    setRawMode(mode: boolean) {
      calls.push(mode);
      stdin.isRaw = mode;
      return stdin;
    },
  };
  return { stdin, calls };
}

describe('rawModeGuard', () => {
  it('re-asserts raw mode by switching to cooked and back while the app wants raw', () => {
    const { stdin, calls } = fakeStdin(true);
    rawModeGuard(stdin).reassert();
    expect(calls).toEqual([false, true]);
    expect(stdin.isRaw).toBe(true);
  });

  it('leaves a cooked terminal (no input hook active) and a non-TTY alone', () => {
    const cooked = fakeStdin(false);
    rawModeGuard(cooked.stdin).reassert();
    expect(cooked.calls).toEqual([]);
    const piped = fakeStdin(true, false);
    rawModeGuard(piped.stdin).reassert();
    expect(piped.calls).toEqual([]);
  });

  it('restores cooked mode on exit, and survives a terminal that is gone', () => {
    const { stdin, calls } = fakeStdin(true);
    rawModeGuard(stdin).restore();
    expect(calls).toEqual([false]);
    const gone = {
      isTTY: true,
      isRaw: true,
      setRawMode: () => {
        throw new Error('EIO');
      },
    };
    expect(() => rawModeGuard(gone).reassert()).not.toThrow();
    expect(() => rawModeGuard(gone).restore()).not.toThrow();
  });
});
