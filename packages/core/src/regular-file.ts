import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { clearStaleStat } from './stale-stat.js';

/*
 * Reading a file that a sandboxed command could have written, from the host.
 *
 * `readFileSync(path)` opens whatever is at `path` when it runs. Checking first (`stat`, then read)
 * leaves a window in which a process the agent left running swaps the name: a FIFO there makes
 * open() wait for a writer forever (measured: the gate's read of a repository's `.git/config`,
 * with a background loop renaming a FIFO and a regular file over it in turn, blocked the host's
 * event loop in `open` within seconds, every run), a symlink to a device opens the device (its
 * driver runs: a tape rewinds, a watchdog starts), and a regular file can be gigabytes.
 *
 * So the path is opened with O_PATH (Linux): following symlinks as a read would, but without
 * opening what is there (no driver's open, no waiting for a FIFO's writer). The descriptor's fstat
 * says what the name held at that instant; only a regular file within the limit is then opened for
 * reading, through /proc/self/fd/N, which reopens that same file whatever the name holds now.
 * Elsewhere (no O_PATH, or no /proc) the path is opened O_NONBLOCK | O_NOCTTY (a FIFO's open
 * returns at once, no terminal becomes the host's) and the opened descriptor is checked instead.
 * Node has no binding for this (fs.constants has no O_PATH): the Linux value is used directly.
 * (libuv opens every descriptor close-on-exec.)
 */

/** O_PATH on Linux (the same value on x86_64, arm64 and every other architecture node runs on). */
const O_PATH = process.platform === 'linux' ? 0o10000000 : 0;
const CHUNK = 64 * 1024;

/** What a read of a file the host did not write refuses. */
export interface ReadRegularFileOptions {
  /** More bytes than this: the read fails with code EFBIG (the file is not read whole). */
  maxBytes: number;
}

function kindOf(st: Stats): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isDirectory()) return 'a directory';
  return 'not a regular file';
}

function failure(code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code });
}

/** fstat of `fd`, leaving node's shared stat buffer off a socket or FIFO (see stale-stat.ts). */
function describe(fd: number): Stats {
  const st = fstatSync(fd);
  if (st.isFIFO() || st.isSocket()) clearStaleStat();
  return st;
}

function check(path: string, st: Stats, maxBytes: number): void {
  if (!st.isFile()) throw failure('EFTYPE', `${path} is ${kindOf(st)}, not a regular file: not read`);
  if (st.size > maxBytes)
    throw failure('EFBIG', `${path} holds ${st.size} bytes, more than the ${maxBytes} read`);
}

/** The bytes of an open regular file, at most `maxBytes` (more: EFBIG; /proc-like sizes of 0 are read to the end). */
function readAll(fd: number, path: string, size: number, maxBytes: number): Buffer {
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    // What fstat said is left, and one byte more to see the end (a file that grew reads on); a
    // size of 0 (/proc) reads by chunks.
    const want = size > total ? size - total + 1 : CHUNK;
    const buffer = Buffer.allocUnsafe(Math.min(want, maxBytes - total + 1, CHUNK));
    const n = readSync(fd, buffer, 0, buffer.length, null);
    if (n === 0) break;
    total += n;
    if (total > maxBytes) throw failure('EFBIG', `${path} holds more than the ${maxBytes} bytes read`);
    chunks.push(n === buffer.length ? buffer : buffer.subarray(0, n));
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
}

/**
 * The contents of the regular file at `path` (symlinks followed), for a file the host did not write
 * itself: a FIFO, socket, device or directory there fails at once with code EFTYPE and is never
 * opened for reading; more than `maxBytes` fails with EFBIG; a missing path fails as open() does
 * (ENOENT, ENOTDIR, EACCES…). Conch's product code reads files only through this (eslint.config.js)
 * or, for the kernel's own /proc files and its own package files, readFileSync.
 */
export function readRegularFileSync(path: string, options: ReadRegularFileOptions): Buffer;
export function readRegularFileSync(
  path: string,
  options: ReadRegularFileOptions & { encoding: BufferEncoding },
): string;
export function readRegularFileSync(
  path: string,
  options: ReadRegularFileOptions & { encoding?: BufferEncoding },
): Buffer | string {
  const { maxBytes, encoding } = options;
  const bytes = O_PATH ? readThroughPath(path, maxBytes) : readNonBlocking(path, maxBytes);
  return encoding ? bytes.toString(encoding) : bytes;
}

function readThroughPath(path: string, maxBytes: number): Buffer {
  const handle = openSync(path, O_PATH);
  try {
    const st = describe(handle);
    check(path, st, maxBytes);
    let fd: number;
    try {
      fd = openSync(`/proc/self/fd/${handle}`, constants.O_RDONLY | constants.O_NOCTTY);
    } catch (error) {
      // No /proc (a chroot, a container without it): the name again, checked on the descriptor.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      return readNonBlocking(path, maxBytes, st);
    }
    try {
      return readAll(fd, path, st.size, maxBytes);
    } finally {
      closeSync(fd);
    }
  } finally {
    closeSync(handle);
  }
}

function readNonBlocking(path: string, maxBytes: number, expected?: Stats): Buffer {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const st = describe(fd);
    check(path, st, maxBytes);
    if (expected && (st.dev !== expected.dev || st.ino !== expected.ino))
      throw failure('EAGAIN', `${path} was replaced while it was opened: not read`);
    return readAll(fd, path, st.size, maxBytes);
  } finally {
    closeSync(fd);
  }
}
