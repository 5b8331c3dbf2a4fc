/**
 * What file tools need, wherever the files are: read by lines with the true size, readBytes,
 * write, exact-replacement edit, list, stat, glob — implemented by `FileOperator` (through a
 * `FileSystemBackend`: this machine by default) and by @conch/exec-server's `RemoteFileOperator`
 * (a target's files). Failures throw `FileOperationError` (`name === 'FileOperationError'`, the
 * same codes everywhere, so `isFileOperationError` and the tools treat remote failures alike).
 */
export interface FileOperations {
  /** Where the files are: 'local', 'ssh:user@host:port', 'podman:name', 'kubernetes:ns/pod'. */
  readonly target: string;
  read(path: string, options?: ReadOptions): Promise<ReadResult>;
  readBytes(
    path: string,
    options?: { offset?: number; length?: number },
  ): Promise<{ path: string; data: Buffer; sizeBytes: number }>;
  write(path: string, content: string | Uint8Array, options?: WriteOptions): Promise<WriteResult>;
  edit(path: string, options: EditOptions): Promise<EditResult>;
  list(path?: string, options?: { limit?: number }): Promise<ListResult>;
  stat(path: string): Promise<StatResult>;
  glob(patterns: string | readonly string[], options?: GlobOptions): Promise<GlobResult>;
}

export interface ReadOptions {
  /** First line to return, 1-based. Default 1. */
  offset?: number;
  /** Lines to return at most. Default (and cap) maxReadLines. */
  limit?: number;
}

export interface ReadResult {
  path: string;
  content: string;
  /** The file's true size in bytes, whatever was returned. */
  sizeBytes: number;
  /** The line `content` starts at (1-based). */
  offset: number;
  /** Lines in `content`. */
  lines: number;
  /** Lines in the whole file; known when the file is at most 16 MiB (else undefined). */
  totalLines: number | undefined;
  /** More of the file follows `content` (line limit or byte limit). */
  truncated: boolean;
  /** The `offset` that continues after `content`, when truncated. */
  nextOffset?: number;
  /** A line longer than the byte budget was cut (the rest of that line is not returned). */
  lineCut?: boolean;
}

export interface WriteOptions {
  /** Create missing parent directories. Default true. */
  createDirs?: boolean;
}

export interface WriteResult {
  path: string;
  bytesWritten: number;
  created: boolean;
}

export interface EditOptions {
  /** The exact text to replace (whitespace and line endings included). */
  oldString: string;
  newString: string;
  /** Replace every occurrence; without it, `oldString` must occur exactly once. */
  replaceAll?: boolean;
}

export interface EditResult {
  path: string;
  replacements: number;
  /** The 1-based line of the first replacement. */
  line: number;
  sizeBytes: number;
}

export type EntryType = 'file' | 'directory' | 'symlink' | 'other';

export interface DirectoryEntry {
  name: string;
  type: EntryType;
  /** Bytes (files only). */
  size?: number;
}

export interface ListResult {
  path: string;
  entries: DirectoryEntry[];
  total: number;
  truncated: boolean;
}

export interface StatResult {
  path: string;
  type: EntryType;
  sizeBytes: number;
  modifiedAt: string;
  /** Permission bits, octal (`644`). */
  mode: string;
  /** Files: whether the start of the file looks binary. */
  binary?: boolean;
  /** Symlinks: where it points. */
  target?: string;
}

export interface GlobOptions {
  /** Directory the patterns are relative to (inside the working dir). Default the working dir. */
  cwd?: string;
  /** Let `*` and `**` match names starting with a dot. Default false (a pattern that spells the dot, like `.env*`, always matches). */
  dot?: boolean;
  /** Patterns to leave out. Default `**\/node_modules/**` and `**\/.git/**`. */
  ignore?: readonly string[];
  /** Matches to return at most. Default maxResults. */
  limit?: number;
}

export interface GlobResult {
  /** Matching files, relative to `cwd`, sorted. */
  matches: string[];
  cwd: string;
  total: number;
  truncated: boolean;
}
