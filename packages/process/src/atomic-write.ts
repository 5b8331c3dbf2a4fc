import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { access, link, lstat, open, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

// Node built-ins only: the supervisor runs this inside its sandbox (supervisor-fs.ts), and the
// files plugin runs it in the host (@conch/files' local-file-system.ts): one implementation of the
// write every file tool ends in, wherever it runs.

export interface AtomicWriteOptions {
  /** Permission bits of the new file (`& 0o7777`, exact: no umask). Default: a new file's default (0o666 minus the umask). */
  mode?: number;
  /** Fail with EEXIST when something exists at `path` already (no replacement). Default false. */
  createOnly?: boolean;
}

/** A name beside `path` that no one else picks: `.<name>.<random>.conch-tmp`. */
export function tempNameFor(path: string): string {
  return join(dirname(path), `.${basename(path).slice(0, 200)}.${randomBytes(6).toString('hex')}.conch-tmp`);
}

/** Errors of `link()` that say the file system has no hard links (not that the target exists). */
const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EXDEV']);

/**
 * A temp file beside `path`, written whole, synced, and renamed over it (or linked, for
 * `createOnly`): the directory entry is replaced, never written through (a hard link's other names
 * keep their content, a symlink is replaced, not followed), and a crash leaves the old file or the
 * new one. A file its owner made read-only is not replaced.
 */
export async function writeFileAtomic(
  path: string,
  data: Uint8Array,
  options: AtomicWriteOptions = {},
): Promise<void> {
  // The rename needs only the directory's write permission, where `>` and an editor refuse a
  // read-only file. access() answers as open(O_WRONLY) would (root writes anyway; a read-only
  // mount says EROFS).
  if (!options.createOnly)
    await access(path, constants.W_OK).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
    });
  const temp = tempNameFor(path);
  // O_EXCL: the temp name is created here, never opened through something planted there.
  const handle = await open(
    temp,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    options.mode ?? 0o666,
  );
  let renamed = false; // else the temp name is removed (after a failure, or after link())
  try {
    try {
      await handle.writeFile(data);
      // The exact mode (open's mode is reduced by the umask; a replaced file's mode is not).
      if (options.mode !== undefined) await handle.chmod(options.mode & 0o7777);
      // On disk before the rename makes it visible.
      await handle.datasync();
    } finally {
      await handle.close();
    }
    if (options.createOnly) {
      try {
        await link(temp, path); // EEXIST when anything is at `path`
      } catch (error) {
        if (!NO_HARD_LINKS.has((error as NodeJS.ErrnoException).code ?? '')) throw error;
        // No hard links here (some FUSE and network file systems): check, then rename.
        const existing = await lstat(path).then(
          () => true,
          (e: NodeJS.ErrnoException) => {
            if (e.code === 'ENOENT') return false;
            throw e;
          },
        );
        if (existing) {
          throw Object.assign(new Error(`EEXIST: file already exists, link '${temp}' -> '${path}'`), {
            code: 'EEXIST',
            syscall: 'link',
            path,
          });
        }
        await rename(temp, path);
        renamed = true;
      }
    } else {
      await rename(temp, path);
      renamed = true;
    }
  } finally {
    if (!renamed) await unlink(temp).catch(() => undefined);
  }
}
