/** The part of `process.stdin` (a tty.ReadStream) the guard uses. */
export interface RawModeStdin {
  isTTY?: boolean;
  isRaw?: boolean;
  setRawMode?(mode: boolean): unknown;
}

/**
 * Keeps the terminal in raw mode while the TUI wants it, and restores it on exit.
 *
 * Ink puts stdin in raw mode (useInput) and believes it stays so. Anything that changes the
 * terminal behind its back — a child that reached the terminal (/dev/tty: a password prompt, an
 * editor, `stty`), a prompt library, a readline — can leave it in cooked mode: keys then wait for
 * Enter and the app looks frozen. Node's `isRaw` still says true, and libuv skips a
 * `setRawMode(true)` it thinks is already in effect, so `reassert()` goes through cooked and back to
 * raw, which writes the terminal settings again. Called after each tool result, each process exit,
 * each answered approval and on SIGCONT; `restore()` leaves the terminal as it was found.
 */
export function rawModeGuard(stdin: RawModeStdin): { reassert(): void; restore(): void } {
  const usable = () => stdin.isTTY === true && typeof stdin.setRawMode === 'function';
  return {
    reassert() {
      // Only while the app wants raw mode (Ink turns it off when no input hook is active).
      if (!usable() || stdin.isRaw !== true) return;
      try {
        stdin.setRawMode!(false);
        stdin.setRawMode!(true);
      } catch {
        // the terminal is gone (EIO): the app's exit path handles that
      }
    },
    restore() {
      if (!usable() || stdin.isRaw !== true) return;
      try {
        stdin.setRawMode!(false);
      } catch {
        // the terminal is gone
      }
    },
  };
}
