import { randomBytes } from 'node:crypto';
import { constants, type Dirent, type Stats } from 'node:fs';
import {
  access,
  link,
  lstat,
  mkdir,
  open,
  readdir,
  readlink,
  realpath,
  rename,
  stat,
  unlink,
} from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { EntryType } from './file-operations.js';
import type {
  BackendDirectoryEntry,
  FileStats,
  FileSystemBackend,
  WriteFileAtomicOptions,
} from './file-system-backend.js';

function typeOf(entry: Stats | Dirent): EntryType {
  if (entry.isSymbolicLink()) return 'symlink';
  if (entry.isFile()) return 'file';
  if (entry.isDirectory()) return 'directory';
  return 'other';
}

function statsOf(stats: Stats): FileStats {
  return { type: typeOf(stats), size: stats.size, mode: stats.mode, mtimeMs: stats.mtimeMs };
}

/** A name beside `path` that no one else picks: `.<name>.<random>.conch-tmp`. */
function tempNameFor(path: string): string {
  return join(dirname(path), `.${basename(path).slice(0, 200)}.${randomBytes(6).toString('hex')}.conch-tmp`);
}

/** Errors of `link()` that say the file system has no hard links (not that the target exists). */
const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EXDEV']);

async function writeFileAtomic(
  path: string,
  data: Uint8Array,
  options: WriteFileAtomicOptions = {},
): Promise<void> {
  // A file its owner made read-only is not replaced: the rename needs only the directory's write
  // permission, where `>` and an editor refuse. access() answers as open(O_WRONLY) would (root
  // writes anyway; a read-only mount says EROFS).
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
      // On disk before the rename makes it visible: a crash leaves the old file or the new one.
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
        return;
      }
    } else {
      // Replaces the directory entry: a symlink there is replaced, not followed; the old inode
      // (maybe a hard link to a file elsewhere) keeps its content.
      await rename(temp, path);
      renamed = true;
    }
  } finally {
    if (!renamed) await unlink(temp).catch(() => undefined);
  }
}

/** `FileSystemBackend` on this machine's file systems (node:fs/promises), as the host process sees them. */
export const localFileSystem: FileSystemBackend = Object.freeze({
  async open(path: string) {
    const handle = await open(path, constants.O_RDONLY);
    return {
      stat: async () => statsOf(await handle.stat()),
      read: async (buffer: Uint8Array, offset: number, length: number, position: number) =>
        (await handle.read(buffer, offset, length, position)).bytesRead,
      close: () => handle.close(),
    };
  },
  stat: async (path: string) => statsOf(await stat(path)),
  lstat: async (path: string) => statsOf(await lstat(path)),
  realpath: (path: string) => realpath(path),
  readlink: (path: string) => readlink(path),
  async readdir(path: string): Promise<BackendDirectoryEntry[]> {
    const entries = await readdir(path, { withFileTypes: true });
    return entries.map((d) => ({ name: d.name, type: typeOf(d) }));
  },
  async mkdirp(path: string) {
    await mkdir(path, { recursive: true });
  },
  writeFileAtomic,
});
