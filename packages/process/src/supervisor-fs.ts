import { constants, type Dirent, type Stats } from 'node:fs';
import { lstat, mkdir, open, readdir, readlink, realpath, stat, type FileHandle } from 'node:fs/promises';
import { writeFileAtomic } from './atomic-write.js';
import type { FsOp, FsReply, FsRequest, FsStats } from './supervisor-protocol.js';

/**
 * File operations run by a supervisor, inside its sandbox's mount namespace: the kernel resolves
 * every path (symlinks, `..`, bind mounts) and refuses writes to what is read-only there, so a
 * file tool's write is judged by the same wall as a command's, with no check-then-write in the
 * host. Node built-ins only, like the rest of the supervisor.
 */

function typeOf(entry: Stats | Dirent): FsStats['type'] {
  if (entry.isSymbolicLink()) return 'symlink';
  if (entry.isFile()) return 'file';
  if (entry.isDirectory()) return 'directory';
  return 'other';
}

function statsOf(s: Stats): FsStats {
  return { type: typeOf(s), size: s.size, mode: s.mode, mtimeMs: s.mtimeMs };
}

/**
 * Opens a file (or a directory, which the caller refuses) for reading. Non-blocking, and a FIFO,
 * socket or device refused once open: a FIFO a command made (`mkfifo x`, then read_file x) would
 * otherwise hold one of libuv's threads in open() forever, and the call would never come back.
 */
export async function openForReading(path: string): Promise<{ handle: FileHandle; stats: Stats }> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  let stats: Stats;
  try {
    stats = await handle.stat();
  } catch (error) {
    await handle.close();
    throw error;
  }
  if (stats.isFile() || stats.isDirectory()) return { handle, stats };
  await handle.close();
  const kind = stats.isFIFO() ? 'a FIFO' : stats.isSocket() ? 'a socket' : 'a device';
  throw Object.assign(new Error(`EFTYPE: ${path} is ${kind}, not a regular file`), {
    code: 'EFTYPE',
    syscall: 'open',
    path,
  });
}

/** Files a host opened for reading, by handle id (closed by the host, or when this process ends). */
const handles = new Map<number, FileHandle>();
let nextHandle = 0;

/** One file operation, in this process (a supervisor's, or the host's when there is no sandbox). */
export async function performFs(op: FsOp, args: readonly unknown[]): Promise<unknown> {
  const path = String(args[0]);
  switch (op) {
    case 'stat':
      return statsOf(await stat(path));
    case 'lstat':
      return statsOf(await lstat(path));
    case 'realpath':
      return realpath(path);
    case 'readlink':
      return readlink(path);
    case 'readdir':
      return (await readdir(path, { withFileTypes: true })).map((d) => ({ name: d.name, type: typeOf(d) }));
    case 'mkdirp':
      await mkdir(path, { recursive: true });
      return null;
    case 'write': {
      const [, data, mode, createOnly] = args as [string, string, number | null, boolean];
      await writeFileAtomic(path, Buffer.from(data, 'base64'), {
        ...(mode === null ? {} : { mode }),
        createOnly,
      });
      return null;
    }
    case 'open': {
      const { handle, stats } = await openForReading(path);
      const id = ++nextHandle;
      handles.set(id, handle);
      return { handle: id, stat: statsOf(stats) };
    }
    case 'read': {
      const [id, position, length] = args as [number, number, number];
      const handle = handles.get(id);
      if (!handle) throw Object.assign(new Error('EBADF: the file is not open'), { code: 'EBADF' });
      const buffer = Buffer.alloc(Math.max(0, Math.min(length, 16 * 1024 * 1024)));
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
      return buffer.subarray(0, bytesRead).toString('base64');
    }
    case 'fstat': {
      const handle = handles.get(Number(args[0]));
      if (!handle) throw Object.assign(new Error('EBADF: the file is not open'), { code: 'EBADF' });
      return statsOf(await handle.stat());
    }
    case 'close': {
      const id = Number(args[0]);
      const handle = handles.get(id);
      handles.delete(id);
      await handle?.close();
      return null;
    }
  }
}

/** Runs one request and answers with its value or its errno error. */
export async function fsRequest(request: FsRequest, reply: (message: FsReply) => void): Promise<void> {
  try {
    const value = await performFs(request.op, request.args);
    reply({ t: 'fs-result', id: request.id, value });
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    reply({
      t: 'fs-result',
      id: request.id,
      error: {
        code: e.code ?? 'EIO',
        message: e.message,
        ...(e.syscall ? { syscall: e.syscall } : {}),
        ...(e.path ? { path: e.path } : {}),
      },
    });
  }
}
