import { constants, type Stats } from 'node:fs';
import { lstat, mkdir, open, readdir, readFile, readlink, stat, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, relative, resolve } from 'node:path';
import { glob as tinyglob } from 'tinyglobby';
import { FileOperationError, isFileOperationError } from '../errors/file-operation-error.js';
import { InvalidFileArgumentError } from '../errors/invalid-file-argument-error.js';
import { PathPolicy, realPathOf, type PathPolicyOptions } from './path-policy.js';
import type { FileOperations } from './file-operations.js';

export interface FileOperatorOptions extends PathPolicyOptions {
  /** Bytes of text one read returns at most. Default 256 KiB. */
  maxReadBytes?: number;
  /** Lines one read returns at most (and the default `limit`). Default 2000. */
  maxReadLines?: number;
  /** Entries list() and glob() return at most. Default 1000. */
  maxResults?: number;
  /** Files edit() will load whole. Default 16 MiB. */
  maxEditBytes?: number;
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

const SNIFF_BYTES = 8192;
const COUNT_LINES_UP_TO = 16 * 1024 * 1024;
export const DEFAULT_GLOB_IGNORE: readonly string[] = Object.freeze(['**/node_modules/**', '**/.git/**']);

/**
 * Whether a buffer's start looks binary: a NUL byte, or mostly bytes that are not UTF-8 (more than
 * 30% replacement characters once decoded; a sequence cut at the end of the sample is not counted).
 */
export function looksBinary(sample: Uint8Array): boolean {
  if (sample.length === 0) return false;
  if (sample.includes(0)) return true;
  const text = new TextDecoder('utf-8', { fatal: false }).decode(
    sample.subarray(0, Math.max(0, sample.length - 3)),
  );
  let bad = 0;
  for (const ch of text) if (ch === '\uFFFD') bad++;
  return text.length > 0 && bad / text.length > 0.3;
}

function typeOf(stats: Stats): EntryType {
  if (stats.isSymbolicLink()) return 'symlink';
  if (stats.isFile()) return 'file';
  if (stats.isDirectory()) return 'directory';
  return 'other';
}

/** Turns a node fs error into a FileOperationError the model can act on. */
function fsError(operation: string, path: string, abs: string, error: unknown): FileOperationError {
  if (isFileOperationError(error)) return error;
  const e = error as NodeJS.ErrnoException;
  const common = { operation, path, cause: error };
  switch (e.code) {
    case 'ENOENT':
      return new FileOperationError({
        ...common,
        code: 'FILE_NOT_FOUND',
        message: `No such file or directory: ${abs}. Check the path (list_directory or glob) first.`,
      });
    case 'EISDIR':
      return new FileOperationError({
        ...common,
        code: 'NOT_A_FILE',
        message: `${abs} is a directory, not a file. Use list_directory for directories.`,
      });
    case 'ENOTDIR':
      return new FileOperationError({
        ...common,
        code: 'NOT_A_DIRECTORY',
        message: `A component of ${abs} is not a directory.`,
      });
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
      return new FileOperationError({
        ...common,
        code: 'FILE_PERMISSION_DENIED',
        message: `Permission denied: ${operation} ${abs} (${e.code}).`,
      });
    default:
      return new FileOperationError({
        ...common,
        code: 'FILE_ERROR',
        message: `${operation} ${abs} failed: ${e.message ?? String(error)}`,
      });
  }
}

function positiveInt(operation: string, field: string, value: unknown, min: number): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new InvalidFileArgumentError(operation, field, `an integer >= ${min}`, value);
  }
  return value;
}

/** 1-based line numbers of each start offset in `text`. */
function lineNumbers(text: string, offsets: readonly number[]): number[] {
  const out: number[] = [];
  let line = 1;
  let pos = 0;
  for (const offset of offsets) {
    for (; pos < offset; pos++) if (text.charCodeAt(pos) === 10) line++;
    out.push(line);
  }
  return out;
}

function occurrences(text: string, needle: string): number[] {
  const found: number[] = [];
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length))
    found.push(at);
  return found;
}

/**
 * The file operations (read, write, edit, list, stat, glob) wherever the files are: this is
 * @conch/environment's `FileOperator` (it re-exports this class under that name) and what the exec
 * server runs in targets (the host's `RemoteFileOperator` calls it there). One implementation for
 * both; it lives here because the exec server bundles it and @conch/environment depends on this
 * package, not the other way round. In a target `protectedReason` is absent: the protected-path
 * rule is the host's permission gate, which judges remote writes first (`resolvePaths`, then the
 * write).
 *
 * Files under the working dir for a host or a model: bounded reads that report the true size,
 * binary detection, writes and exact-replacement edits that pass the permission gate's
 * protected-path rule, directory listings, stat and glob. Paths outside the working dir (and the
 * host's extra roots) are refused unless the host allows them.
 *
 * Reads count in lines (`offset` 1-based, `limit` lines), capped by `maxReadBytes` of text; the
 * true size in bytes is always reported, and the total line count for files up to 16 MiB.
 * Failures the caller can act on throw `FileOperationError` with a stable code.
 */
export class TargetFileOperator implements FileOperations {
  /** Where the files are ('local', 'ssh:user@host', ...). */
  readonly target: string;
  readonly policy: PathPolicy;
  readonly maxReadBytes: number;
  readonly maxReadLines: number;
  readonly maxResults: number;
  readonly maxEditBytes: number;

  constructor(options: FileOperatorOptions & { target?: string }) {
    this.target = options.target ?? 'local';
    this.policy = new PathPolicy(options);
    this.maxReadBytes = options.maxReadBytes ?? 256 * 1024;
    this.maxReadLines = options.maxReadLines ?? 2000;
    this.maxResults = options.maxResults ?? 1000;
    this.maxEditBytes = options.maxEditBytes ?? 16 * 1024 * 1024;
  }

  /** The working directory. */
  get root(): string {
    return this.policy.root;
  }

  /** A path as shown to the model: relative to the working dir when inside it. */
  display(abs: string): string {
    return this.policy.display(abs);
  }

  /**
   * The absolute path a write or an edit of `path` would change, or a FileOperationError
   * (OUTSIDE_WORKING_DIR, PROTECTED_PATH): what the file tools check before asking the gate.
   */
  checkWrite(operation: string, path: string): string {
    return this.policy.resolveForWrite(operation, path);
  }

  /**
   * Where `path` leads for `operation` (refused outside the allowed roots): the absolute path as
   * written and its real path (symlinks resolved for the part that exists). The host judges a
   * remote write's protected paths on these before it writes.
   */
  resolvePaths(operation: string, path: string): { abs: string; real: string } {
    const abs = this.policy.resolve(operation, path);
    return { abs, real: realPathOf(abs) };
  }

  /** Reads text lines [offset, offset + limit), at most maxReadBytes of them. Refuses binary files (BINARY_FILE). */
  async read(path: string, options: ReadOptions = {}): Promise<ReadResult> {
    const offset = positiveInt('read', 'offset', options.offset, 1) ?? 1;
    const limit = Math.min(
      positiveInt('read', 'limit', options.limit, 1) ?? this.maxReadLines,
      this.maxReadLines,
    );
    const abs = this.policy.resolve('read', path);
    let handle;
    try {
      handle = await open(abs, constants.O_RDONLY);
    } catch (error) {
      throw fsError('read', path, abs, error);
    }
    try {
      const info = await handle.stat();
      if (info.isDirectory())
        throw fsError('read', path, abs, Object.assign(new Error('EISDIR'), { code: 'EISDIR' }));
      const sizeBytes = info.size;
      const chunk = Buffer.allocUnsafe(64 * 1024);
      const sniff = await handle.read(chunk, 0, Math.min(SNIFF_BYTES, chunk.length), 0);
      if (looksBinary(chunk.subarray(0, sniff.bytesRead))) {
        throw new FileOperationError({
          code: 'BINARY_FILE',
          operation: 'read',
          path,
          message: `${abs} looks binary (${sizeBytes} bytes: NUL bytes or invalid UTF-8 at its start); it is not returned as text.`,
          display: `${path} is binary (${sizeBytes} bytes)`,
        });
      }
      // Walk the file by bytes: a newline byte never occurs inside a multi-byte UTF-8 character,
      // so lines are cut on bytes and decoded once at the end.
      const parts: Buffer[] = []; // whole lines returned
      let current: Buffer[] = []; // the line being read, until its newline arrives
      let currentBytes = 0;
      let bytes = 0;
      let line = 1;
      let returned = 0;
      let newlines = 0;
      let endPos = 0; // file position after the last line returned
      let lineCut = false;
      let stopped = false;
      let position = 0;
      let lastByte = -1;
      for (;;) {
        if (stopped && sizeBytes > COUNT_LINES_UP_TO) break;
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
        if (bytesRead === 0) break;
        lastByte = chunk[bytesRead - 1]!;
        let start = 0;
        while (start < bytesRead) {
          const nl = chunk.indexOf(10, start);
          const ends = nl !== -1 && nl < bytesRead;
          const end = ends ? nl + 1 : bytesRead;
          if (!stopped && line >= offset) {
            const piece = chunk.subarray(start, end);
            if (bytes + currentBytes + piece.length > this.maxReadBytes) {
              if (returned === 0) {
                // The first line alone is over the budget: return its start, cut.
                const room = this.maxReadBytes - currentBytes;
                current.push(Buffer.from(piece.subarray(0, room)));
                parts.push(...current);
                lineCut = true;
                returned = 1;
              }
              current = [];
              stopped = true;
            } else {
              current.push(Buffer.from(piece));
              currentBytes += piece.length;
            }
          }
          if (ends) {
            newlines++;
            if (!stopped && line >= offset) {
              parts.push(...current);
              bytes += currentBytes;
              returned++;
              endPos = position + end;
              if (returned >= limit) stopped = true;
            }
            current = [];
            currentBytes = 0;
            line++;
          }
          start = end;
        }
        position += bytesRead;
      }
      const atEnd = position >= sizeBytes;
      if (!stopped && current.length > 0) {
        // The last line has no newline.
        parts.push(...current);
        returned++;
        endPos = position;
      }
      const totalLines = atEnd ? newlines + (sizeBytes > 0 && lastByte !== 10 ? 1 : 0) : undefined;
      let content = Buffer.concat(parts).toString('utf8');
      // A cut inside a multi-byte character leaves a replacement character: drop it.
      if (lineCut) content = content.replace(/\uFFFD$/, '');
      const truncated = lineCut || (returned > 0 ? endPos < sizeBytes : false);
      return {
        path: abs,
        content,
        sizeBytes,
        offset,
        lines: returned,
        totalLines,
        truncated,
        ...(truncated ? { nextOffset: offset + returned } : {}),
        ...(lineCut ? { lineCut: true } : {}),
      };
    } catch (error) {
      throw fsError('read', path, abs, error);
    } finally {
      await handle.close();
    }
  }

  /** Raw bytes of any file (binary included): `length` bytes from `offset`, at most maxReadBytes. */
  async readBytes(
    path: string,
    options: { offset?: number; length?: number } = {},
  ): Promise<{ path: string; data: Buffer; sizeBytes: number }> {
    const offset = positiveInt('readBytes', 'offset', options.offset, 0) ?? 0;
    const length = Math.min(
      positiveInt('readBytes', 'length', options.length, 1) ?? this.maxReadBytes,
      this.maxReadBytes,
    );
    const abs = this.policy.resolve('read', path);
    try {
      const handle = await open(abs, constants.O_RDONLY);
      try {
        const sizeBytes = (await handle.stat()).size;
        const data = Buffer.alloc(Math.max(0, Math.min(length, sizeBytes - offset)));
        const { bytesRead } = await handle.read(data, 0, data.length, offset);
        return { path: abs, data: data.subarray(0, bytesRead), sizeBytes };
      } finally {
        await handle.close();
      }
    } catch (error) {
      throw fsError('read', path, abs, error);
    }
  }

  /** Writes (creates or replaces) a file. Refused for protected paths (PROTECTED_PATH) and outside the roots. */
  async write(path: string, content: string | Uint8Array, options: WriteOptions = {}): Promise<WriteResult> {
    if (typeof content !== 'string' && !(content instanceof Uint8Array)) {
      throw new InvalidFileArgumentError('write', 'content', 'a string or a Uint8Array', content);
    }
    const abs = this.policy.resolveForWrite('write', path);
    let created = false;
    try {
      try {
        const existing = await stat(abs);
        if (existing.isDirectory()) throw Object.assign(new Error('EISDIR'), { code: 'EISDIR' });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        created = true;
        if (options.createDirs !== false) await mkdir(dirname(abs), { recursive: true });
      }
      // In place (not write-and-rename): a symlink keeps pointing where it did and a hard link
      // stays one file; the protected-path check above followed both the way the kernel will.
      await writeFile(abs, content);
    } catch (error) {
      throw fsError('write', path, abs, error);
    }
    const bytesWritten = typeof content === 'string' ? Buffer.byteLength(content) : content.length;
    return { path: abs, bytesWritten, created };
  }

  /**
   * Replaces `oldString` with `newString` exactly (no whitespace or line-ending normalisation).
   * Refused when it does not occur (EDIT_NO_MATCH), occurs more than once without `replaceAll`
   * (EDIT_AMBIGUOUS, with the lines), or would change nothing (EDIT_NO_CHANGE).
   */
  async edit(path: string, options: EditOptions): Promise<EditResult> {
    const { oldString, newString } = options;
    if (typeof oldString !== 'string' || oldString.length === 0) {
      throw new InvalidFileArgumentError(
        'edit',
        'oldString',
        'a non-empty string (to create or replace a whole file, use write)',
        oldString,
      );
    }
    if (typeof newString !== 'string') {
      throw new InvalidFileArgumentError('edit', 'newString', 'a string', newString);
    }
    const abs = this.policy.resolveForWrite('edit', path);
    const shown = this.policy.display(abs);
    if (oldString === newString) {
      throw new FileOperationError({
        code: 'EDIT_NO_CHANGE',
        operation: 'edit',
        path,
        message: `Refused: edit of ${shown} would change nothing (oldString and newString are the same).`,
      });
    }
    let raw: Buffer;
    try {
      const info = await stat(abs);
      if (info.isDirectory()) throw Object.assign(new Error('EISDIR'), { code: 'EISDIR' });
      if (info.size > this.maxEditBytes) {
        throw new FileOperationError({
          code: 'FILE_TOO_LARGE',
          operation: 'edit',
          path,
          message: `${abs} has ${info.size} bytes; edit loads files of at most ${this.maxEditBytes} bytes.`,
        });
      }
      raw = await readFile(abs);
    } catch (error) {
      throw fsError('edit', path, abs, error);
    }
    if (looksBinary(raw.subarray(0, SNIFF_BYTES))) {
      throw new FileOperationError({
        code: 'BINARY_FILE',
        operation: 'edit',
        path,
        message: `${abs} looks binary; edit changes text files only.`,
      });
    }
    const text = raw.toString('utf8');
    const found = occurrences(text, oldString);
    if (found.length === 0) {
      throw new FileOperationError({
        code: 'EDIT_NO_MATCH',
        operation: 'edit',
        path,
        message: `Refused: oldString was not found in ${shown}; nothing was changed. It must match exactly, whitespace and line endings included${noMatchHint(text, oldString)}. Read the file again and copy the text.`,
        display: `edit refused: oldString not found in ${shown}`,
      });
    }
    if (found.length > 1 && options.replaceAll !== true) {
      const lines = lineNumbers(text, found.slice(0, 10));
      throw new FileOperationError({
        code: 'EDIT_AMBIGUOUS',
        operation: 'edit',
        path,
        message: `Refused: oldString occurs ${found.length} times in ${shown} (lines ${lines.join(', ')}${found.length > 10 ? ', …' : ''}); nothing was changed. Include more surrounding text so it matches once, or pass replaceAll to replace every occurrence.`,
        display: `edit refused: oldString occurs ${found.length} times in ${shown}`,
      });
    }
    const targets = options.replaceAll === true ? found : found.slice(0, 1);
    let out = '';
    let last = 0;
    for (const at of targets) {
      out += text.slice(last, at) + newString;
      last = at + oldString.length;
    }
    out += text.slice(last);
    try {
      await writeFile(abs, out);
    } catch (error) {
      throw fsError('edit', path, abs, error);
    }
    return {
      path: abs,
      replacements: targets.length,
      line: lineNumbers(text, [targets[0]!])[0]!,
      sizeBytes: Buffer.byteLength(out),
    };
  }

  /** A directory's entries, sorted by name (at most maxResults; `total` is the true count). */
  async list(path = '.', options: { limit?: number } = {}): Promise<ListResult> {
    const limit = Math.min(
      positiveInt('list', 'limit', options.limit, 1) ?? this.maxResults,
      this.maxResults,
    );
    const abs = this.policy.resolve('list', path);
    try {
      const info = await stat(abs);
      if (!info.isDirectory()) throw Object.assign(new Error('ENOTDIR'), { code: 'ENOTDIR' });
      const dirents = await readdir(abs, { withFileTypes: true });
      dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      const entries: DirectoryEntry[] = [];
      for (const d of dirents.slice(0, limit)) {
        const type: EntryType = d.isSymbolicLink()
          ? 'symlink'
          : d.isFile()
            ? 'file'
            : d.isDirectory()
              ? 'directory'
              : 'other';
        const entry: DirectoryEntry = { name: d.name, type };
        if (type === 'file') {
          try {
            entry.size = (await lstat(resolve(abs, d.name))).size;
          } catch {
            // removed meanwhile
          }
        }
        entries.push(entry);
      }
      return { path: abs, entries, total: dirents.length, truncated: dirents.length > limit };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') {
        throw new FileOperationError({
          code: 'NOT_A_DIRECTORY',
          operation: 'list',
          path,
          message: `${abs} is not a directory. Use read_file for files.`,
          cause: error,
        });
      }
      throw fsError('list', path, abs, error);
    }
  }

  /** Type, size, modification time and mode of a path (a symlink itself, with its target). */
  async stat(path: string): Promise<StatResult> {
    const abs = this.policy.resolve('stat', path);
    try {
      const info = await lstat(abs);
      const type = typeOf(info);
      const result: StatResult = {
        path: abs,
        type,
        sizeBytes: info.size,
        modifiedAt: info.mtime.toISOString(),
        mode: (info.mode & 0o7777).toString(8),
      };
      if (type === 'symlink') result.target = await readlink(abs);
      if (type === 'file') {
        const handle = await open(abs, constants.O_RDONLY);
        try {
          const sample = Buffer.alloc(Math.min(SNIFF_BYTES, info.size));
          const { bytesRead } = await handle.read(sample, 0, sample.length, 0);
          result.binary = looksBinary(sample.subarray(0, bytesRead));
        } finally {
          await handle.close();
        }
      }
      return result;
    } catch (error) {
      throw fsError('stat', path, abs, error);
    }
  }

  /**
   * Files matching glob patterns (picomatch syntax through tinyglobby: `*`, `**`, `?`, `[…]`,
   * `{a,b}`), relative to `cwd`, sorted; symlinks are not followed. Patterns may not be absolute
   * or climb out with `..` (list the other directory's files from a `cwd` there instead).
   */
  async glob(patterns: string | readonly string[], options: GlobOptions = {}): Promise<GlobResult> {
    const list = typeof patterns === 'string' ? [patterns] : [...patterns];
    if (list.length === 0)
      throw new InvalidFileArgumentError('glob', 'patterns', 'at least one pattern', patterns);
    for (const p of list) {
      if (typeof p !== 'string' || p.length === 0 || p.includes('\0'))
        throw new InvalidFileArgumentError('glob', 'patterns', 'non-empty strings', p);
      if (isAbsolute(p) || p.split('/').includes('..'))
        throw new InvalidFileArgumentError(
          'glob',
          'patterns',
          "relative patterns without '..' (set cwd to search another directory)",
          p,
        );
    }
    const limit = Math.min(
      positiveInt('glob', 'limit', options.limit, 1) ?? this.maxResults,
      this.maxResults,
    );
    const cwd = this.policy.resolve('glob', options.cwd ?? '.');
    try {
      const info = await stat(cwd);
      if (!info.isDirectory()) throw Object.assign(new Error('ENOTDIR'), { code: 'ENOTDIR' });
    } catch (error) {
      throw fsError('glob', options.cwd ?? '.', cwd, error);
    }
    const found = await tinyglob(list, {
      cwd,
      dot: options.dot === true,
      ignore: [...(options.ignore ?? DEFAULT_GLOB_IGNORE)],
      onlyFiles: true,
      followSymbolicLinks: false,
      expandDirectories: false,
      absolute: false,
    });
    found.sort();
    const matches = found.slice(0, limit).map((m) => relative(cwd, resolve(cwd, m)));
    return { matches, cwd, total: found.length, truncated: found.length > limit };
  }
}

/** A hint for an edit that did not match: CRLF line endings, or a match that differs only in whitespace. */
function noMatchHint(text: string, needle: string): string {
  if (
    text.includes('\r\n') &&
    needle.includes('\n') &&
    !needle.includes('\r\n') &&
    text.includes(needle.replace(/\n/g, '\r\n'))
  )
    return ' (the file uses CRLF line endings: use \\r\\n in oldString)';
  const squash = (s: string) => s.replace(/\s+/g, ' ').trim();
  const target = squash(needle);
  if (target.length > 0 && squash(text).includes(target))
    return ' (a match exists that differs only in whitespace or indentation)';
  return '';
}
