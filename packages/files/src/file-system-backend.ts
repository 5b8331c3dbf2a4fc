import type { AtomicWriteOptions } from '@conch/process';
import type { EntryType } from './file-operations.js';

/** What a backend says about a path (`stat` follows symlinks, `lstat` does not). */
export interface FileStats {
  type: EntryType;
  /** Bytes. */
  size: number;
  /** The mode bits (`st_mode`; the operator keeps `& 0o7777`). */
  mode: number;
  /** Last modification, milliseconds since the epoch. */
  mtimeMs: number;
}

/** One entry of a directory, typed without following symlinks (a `readdir` with file types). */
export interface BackendDirectoryEntry {
  name: string;
  type: EntryType;
}

/** A file opened for reading: its stat and reads of byte ranges. */
export interface FileReadHandle {
  stat(): Promise<FileStats>;
  /** Reads up to `length` bytes at file `position` into `buffer` from `offset`; resolves with the bytes read (0 at the end). */
  read(buffer: Uint8Array, offset: number, length: number, position: number): Promise<number>;
  close(): Promise<void>;
}

/** `mode` and `createOnly` of a write: the options of @conch/process's writeFileAtomic. */
export type WriteFileAtomicOptions = AtomicWriteOptions;

/**
 * The file-system primitives a `FileOperator` uses — every access it makes goes through one of
 * them, so the same operator can work on this machine (`localFileSystem`) or through another
 * kernel's view (a sandboxed process, later). All are async; failures reject with node errno
 * errors (`Error & { code: 'ENOENT' | 'EACCES' | 'EROFS' | … }`), which the operator turns into
 * `FileOperationError`s naming the path.
 *
 * Writes are one primitive, `writeFileAtomic`: a temp file in the same directory, renamed over
 * `path`. It replaces the directory entry and never writes through what is there: an existing
 * hard link's other names keep the old content, a symlink at `path` is replaced (not followed).
 */
export interface FileSystemBackend {
  /** True for a backend whose operations run inside the kernel sandbox the permission gate describes. */
  readonly viaKernel?: boolean;
  /** Opens an existing file read-only (follows symlinks). */
  open(path: string): Promise<FileReadHandle>;
  /** Follows symlinks. */
  stat(path: string): Promise<FileStats>;
  /** Does not follow a final symlink. */
  lstat(path: string): Promise<FileStats>;
  /** The canonical path: every symlink resolved (ENOENT when a component is missing). */
  realpath(path: string): Promise<string>;
  /** A symlink's target, as stored. */
  readlink(path: string): Promise<string>;
  /** A directory's entries (any order), typed like `readdir(path, { withFileTypes: true })`. */
  readdir(path: string): Promise<BackendDirectoryEntry[]>;
  /** Creates a directory and its missing parents (`mkdir -p`); an existing directory is fine. */
  mkdirp(path: string): Promise<void>;
  /**
   * Creates or replaces `path` with `data` atomically: a temp file in the same directory, written
   * whole, then renamed over `path` (`createOnly`: linked there, failing with EEXIST if anything
   * is). Readers see the old file or the new one, never a part; the temp file never stays behind.
   */
  writeFileAtomic(path: string, data: Uint8Array, options?: WriteFileAtomicOptions): Promise<void>;
}

/** A node-style errno error (`code`, `syscall`, `path`), for backends that are not node's fs. */
export function errnoError(
  code: string,
  syscall: string,
  path: string,
  detail?: string,
): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException = new Error(`${code}: ${detail ?? code}, ${syscall} '${path}'`);
  error.code = code;
  error.syscall = syscall;
  error.path = path;
  return error;
}
