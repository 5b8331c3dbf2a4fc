import type { Dirent, Stats } from 'node:fs';
import { lstat, mkdir, readdir, readlink, realpath, stat } from 'node:fs/promises';
import { openForReading, writeFileAtomic } from '@conch/process';
import type { EntryType } from './file-operations.js';
import type { BackendDirectoryEntry, FileStats, FileSystemBackend } from './file-system-backend.js';

function typeOf(entry: Stats | Dirent): EntryType {
  if (entry.isSymbolicLink()) return 'symlink';
  if (entry.isFile()) return 'file';
  if (entry.isDirectory()) return 'directory';
  return 'other';
}

function statsOf(stats: Stats): FileStats {
  return { type: typeOf(stats), size: stats.size, mode: stats.mode, mtimeMs: stats.mtimeMs };
}

/** `FileSystemBackend` on this machine's file systems (node:fs/promises), as the host process sees them. */
export const localFileSystem: FileSystemBackend = Object.freeze({
  async open(path: string) {
    // Non-blocking, a FIFO or device refused (EFTYPE): the supervisor's open, in this process.
    const { handle } = await openForReading(path);
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
  // The same write the sandbox's supervisor makes (@conch/process atomic-write.ts).
  writeFileAtomic,
});
