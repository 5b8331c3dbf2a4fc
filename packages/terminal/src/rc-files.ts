import { homedir } from 'node:os';
import { join } from 'node:path';
import type { ShellKind } from './shell-scripts.js';
import { safeStatSync } from '@conch/core';

/** Whether shell arguments start a login shell (`-l`, `--login`, a bundle such as `-il`). */
function isLogin(args: readonly string[]): boolean {
  return args.some((a) => a === '--login' || /^-[A-Za-z]*l[A-Za-z]*$/.test(a));
}

/** The identity of a file's content for change detection (absent files included). */
function fingerprint(path: string): string {
  try {
    // No exception for a missing file: building one costs ~25 µs, and most of these files are absent.
    const st = safeStatSync(path, { throwIfNoEntry: false });
    return st ? `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}` : 'absent';
  } catch {
    return 'absent'; // EACCES, ENOTDIR: unreadable is as good as absent
  }
}

/**
 * The user's rc files a session's shell read at start-up, watched for changes. In start-up order:
 * bash login shells read the first of `~/.bash_profile`, `~/.bash_login`, `~/.profile`, and
 * interactive setup lives in `~/.bashrc` (which profiles source); zsh reads `.zshenv`, `.zprofile`
 * (login), `.zshrc` (interactive), `.zlogin` (login) from `$ZDOTDIR` (default `$HOME`). System files
 * (`/etc/profile`, `/etc/zsh/*`) are not watched: users edit their own.
 */
export class RcWatch {
  private readonly kind: ShellKind;
  private readonly login: boolean;
  private readonly home: string;
  private readonly zdotdir: string;
  private readonly seen = new Map<string, string>();

  constructor(kind: ShellKind, args: readonly string[], env: Readonly<Record<string, string | undefined>>) {
    this.kind = kind;
    this.login = isLogin(args);
    this.home = env.HOME || homedir();
    this.zdotdir = env.ZDOTDIR || this.home;
    for (const path of this.watched()) this.seen.set(path, fingerprint(path));
  }

  /** Every file watched. */
  watched(): string[] {
    if (this.kind === 'zsh') {
      const z = (name: string) => join(this.zdotdir, name);
      return [
        z('.zshenv'),
        ...(this.login ? [z('.zprofile')] : []),
        z('.zshrc'),
        ...(this.login ? [z('.zlogin')] : []),
      ];
    }
    const h = (name: string) => join(this.home, name);
    return [...(this.login ? [h('.bash_profile'), h('.bash_login'), h('.profile')] : []), h('.bashrc')];
  }

  /**
   * The files to source again, in start-up order, because they changed since the session started
   * or last re-sourced them (empty when nothing changed). Files that were deleted are not sourced.
   * The state is recorded as seen now: a file is re-sourced once per change, even if it fails.
   */
  takeChanged(): string[] {
    const changed: string[] = [];
    for (const path of this.watched()) {
      const now = fingerprint(path);
      if (now !== this.seen.get(path)) {
        this.seen.set(path, now);
        if (now !== 'absent') changed.push(path);
      }
    }
    if (this.kind === 'bash' && this.login) {
      // Of the three profiles bash reads only the first that exists: re-source that one.
      const profiles = [
        join(this.home, '.bash_profile'),
        join(this.home, '.bash_login'),
        join(this.home, '.profile'),
      ];
      const effective = profiles.find((p) => this.seen.get(p) !== 'absent');
      const touched = changed.some((p) => profiles.includes(p));
      const rest = changed.filter((p) => !profiles.includes(p));
      return touched && effective ? [effective, ...rest] : rest;
    }
    return changed;
  }
}
