import { dirname, isAbsolute, relative, resolve } from 'node:path';
import { glob as tinyglob } from 'tinyglobby';
import { FileOperationError } from './errors/file-operation-error.js';
import { InvalidFileArgumentError } from './errors/invalid-file-argument-error.js';
import type {
  DirectoryEntry,
  EditOptions,
  EditResult,
  FileOperations,
  GlobOptions,
  GlobResult,
  ListResult,
  ReadOptions,
  ReadResult,
  StatResult,
  WriteOptions,
  WriteResult,
} from './file-operations.js';
import { errnoError, type FileReadHandle, type FileSystemBackend } from './file-system-backend.js';
import { fsError } from './fs-error.js';
import { globFileSystem } from './glob-file-system.js';
import { localFileSystem } from './local-file-system.js';
import { looksBinary, SNIFF_BYTES } from './looks-binary.js';
import { PathPolicy, type PathPolicyOptions, type ResolvedPath } from './path-policy.js';

export interface FileOperatorOptions extends PathPolicyOptions {
  /** Bytes of text one read returns at most. Default 256 KiB. */
  maxReadBytes?: number;
  /** Lines one read returns at most (and the default `limit`). Default 2000. */
  maxReadLines?: number;
  /** Entries list() and glob() return at most. Default 1000. */
  maxResults?: number;
  /** Files edit() will load whole. Default 16 MiB. */
  maxEditBytes?: number;
  /**
   * Where every file-system access goes (reads, stats, listings, real paths, and the one atomic
   * write primitive). Default `localFileSystem` (this machine, node:fs/promises).
   */
  backend?: FileSystemBackend;
}

const COUNT_LINES_UP_TO = 16 * 1024 * 1024;
export const DEFAULT_GLOB_IGNORE: readonly string[] = Object.freeze(['**/node_modules/**', '**/.git/**']);

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

/** Reads a whole file of `size` bytes (as stat'ed) through an open handle. */
async function readAll(handle: FileReadHandle, size: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let position = 0;
  for (;;) {
    const chunk = Buffer.allocUnsafe(Math.max(64 * 1024, size - position));
    const bytesRead = await handle.read(chunk, 0, chunk.length, position);
    if (bytesRead === 0) break;
    chunks.push(chunk.subarray(0, bytesRead));
    position += bytesRead;
  }
  return Buffer.concat(chunks);
}

/**
 * Files under the working dir for a host or a model: bounded reads that report the true size,
 * binary detection, writes and exact-replacement edits that pass the permission gate's
 * protected-path rule, directory listings, stat and glob. Paths outside the working dir (and the
 * host's extra roots) are refused unless the host allows them.
 *
 * Reads count in lines (`offset` 1-based, `limit` lines), capped by `maxReadBytes` of text; the
 * true size in bytes is always reported, and the total line count for files up to 16 MiB.
 * Failures the caller can act on throw `FileOperationError` with a stable code.
 *
 * Every file-system access goes through `backend` (default: this machine). Writes and edits are
 * one primitive, `backend.writeFileAtomic`, on the **real path** the policy judged: a temp file
 * beside it renamed over it, so a write replaces the directory entry and never writes through an
 * existing hard link (the file's other names keep their content) nor through a symlink put there
 * after the check (the rename replaces the symlink). A path that is a symlink inside the allowed
 * roots is resolved (through the backend's realpath) and its real file replaced; the symlink
 * stays. A replaced file keeps its mode. This is also what the exec server runs in targets (the
 * host's `RemoteFileOperator` calls it there), where `protectedReason` is @conch/permission's rule
 * judged with the target's home and workspace, and the host's gate judges its own rule first.
 */
export class FileOperator implements FileOperations {
  /** Where the files are ('local', 'ssh:user@host', ...). */
  readonly target: string;
  readonly policy: PathPolicy;
  readonly backend: FileSystemBackend;
  readonly maxReadBytes: number;
  readonly maxReadLines: number;
  readonly maxResults: number;
  readonly maxEditBytes: number;

  constructor(options: FileOperatorOptions & { target?: string }) {
    this.target = options.target ?? 'local';
    this.backend = options.backend ?? localFileSystem;
    this.policy = new PathPolicy({ ...options, backend: this.backend });
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
  async checkWrite(operation: string, path: string): Promise<string> {
    return (await this.policy.resolveForWrite(operation, path)).abs;
  }

  /**
   * Where `path` leads for `operation` (refused outside the allowed roots): the absolute path as
   * written and its real path (symlinks resolved for the part that exists). The host judges a
   * remote write's protected paths on these before it writes.
   */
  resolvePaths(operation: string, path: string): Promise<ResolvedPath> {
    return this.policy.resolvePaths(operation, path);
  }

  /** Reads text lines [offset, offset + limit), at most maxReadBytes of them. Refuses binary files (BINARY_FILE). */
  async read(path: string, options: ReadOptions = {}): Promise<ReadResult> {
    const offset = positiveInt('read', 'offset', options.offset, 1) ?? 1;
    const limit = Math.min(
      positiveInt('read', 'limit', options.limit, 1) ?? this.maxReadLines,
      this.maxReadLines,
    );
    const abs = await this.policy.resolve('read', path);
    let handle;
    try {
      handle = await this.backend.open(abs);
    } catch (error) {
      throw fsError('read', path, abs, error);
    }
    try {
      const info = await handle.stat();
      if (info.type === 'directory') throw fsError('read', path, abs, errnoError('EISDIR', 'read', abs));
      const sizeBytes = info.size;
      const chunk = Buffer.allocUnsafe(64 * 1024);
      const sniffed = await handle.read(chunk, 0, Math.min(SNIFF_BYTES, chunk.length), 0);
      if (looksBinary(chunk.subarray(0, sniffed))) {
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
        const bytesRead = await handle.read(chunk, 0, chunk.length, position);
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
    const abs = await this.policy.resolve('read', path);
    try {
      const handle = await this.backend.open(abs);
      try {
        const sizeBytes = (await handle.stat()).size;
        const data = Buffer.alloc(Math.max(0, Math.min(length, sizeBytes - offset)));
        const bytesRead = await handle.read(data, 0, data.length, offset);
        return { path: abs, data: data.subarray(0, bytesRead), sizeBytes };
      } finally {
        await handle.close();
      }
    } catch (error) {
      throw fsError('read', path, abs, error);
    }
  }

  /**
   * Writes (creates or replaces) a file, atomically: see the class. Refused for protected paths
   * (PROTECTED_PATH) and outside the roots, judged on the path as written and on the real path
   * that is replaced.
   */
  async write(path: string, content: string | Uint8Array, options: WriteOptions = {}): Promise<WriteResult> {
    if (typeof content !== 'string' && !(content instanceof Uint8Array)) {
      throw new InvalidFileArgumentError('write', 'content', 'a string or a Uint8Array', content);
    }
    const data = typeof content === 'string' ? Buffer.from(content) : content;
    // A file created by someone else between the check and the write (createOnly fails with
    // EEXIST) is judged again and replaced: write means create or overwrite.
    for (let attempt = 0; ; attempt++) {
      const { abs, real } = await this.policy.resolveForWrite('write', path);
      let created = false;
      let createOnly = false;
      try {
        let mode: number | undefined;
        try {
          // `real` is resolved: a symlink still there is dangling (or a loop), and is replaced.
          const existing = await this.backend.lstat(real);
          if (existing.type === 'directory') throw errnoError('EISDIR', 'open', real);
          if (existing.type === 'symlink') created = true;
          else mode = existing.mode & 0o7777;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
          created = createOnly = true;
          if (options.createDirs !== false) await this.backend.mkdirp(dirname(real));
        }
        await this.backend.writeFileAtomic(real, data, {
          ...(mode !== undefined ? { mode } : {}),
          ...(createOnly ? { createOnly } : {}),
        });
      } catch (error) {
        if (createOnly && attempt === 0 && (error as NodeJS.ErrnoException).code === 'EEXIST') continue;
        throw fsError('write', path, abs, error);
      }
      return { path: abs, bytesWritten: data.length, created };
    }
  }

  /**
   * Replaces `oldString` with `newString` exactly (no whitespace or line-ending normalisation).
   * Refused when it does not occur (EDIT_NO_MATCH), occurs more than once without `replaceAll`
   * (EDIT_AMBIGUOUS, with the lines), or would change nothing (EDIT_NO_CHANGE). The new content
   * replaces the real file atomically, keeping its mode (see `write`).
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
    const { abs, real } = await this.policy.resolveForWrite('edit', path);
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
    let mode: number;
    try {
      const handle = await this.backend.open(real);
      try {
        const info = await handle.stat();
        if (info.type === 'directory') throw errnoError('EISDIR', 'read', real);
        if (info.size > this.maxEditBytes) {
          throw new FileOperationError({
            code: 'FILE_TOO_LARGE',
            operation: 'edit',
            path,
            message: `${abs} has ${info.size} bytes; edit loads files of at most ${this.maxEditBytes} bytes.`,
          });
        }
        mode = info.mode & 0o7777;
        raw = await readAll(handle, info.size);
      } finally {
        await handle.close();
      }
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
    const data = Buffer.from(out);
    try {
      await this.backend.writeFileAtomic(real, data, { mode });
    } catch (error) {
      throw fsError('edit', path, abs, error);
    }
    return {
      path: abs,
      replacements: targets.length,
      line: lineNumbers(text, [targets[0]!])[0]!,
      sizeBytes: data.length,
    };
  }

  /** A directory's entries, sorted by name (at most maxResults; `total` is the true count). */
  async list(path = '.', options: { limit?: number } = {}): Promise<ListResult> {
    const limit = Math.min(
      positiveInt('list', 'limit', options.limit, 1) ?? this.maxResults,
      this.maxResults,
    );
    const abs = await this.policy.resolve('list', path);
    try {
      const info = await this.backend.stat(abs);
      if (info.type !== 'directory') throw errnoError('ENOTDIR', 'scandir', abs);
      const dirents = await this.backend.readdir(abs);
      dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      const entries: DirectoryEntry[] = [];
      for (const d of dirents.slice(0, limit)) {
        const entry: DirectoryEntry = { name: d.name, type: d.type };
        if (d.type === 'file') {
          try {
            entry.size = (await this.backend.lstat(resolve(abs, d.name))).size;
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
    const abs = await this.policy.resolve('stat', path);
    try {
      const info = await this.backend.lstat(abs);
      const result: StatResult = {
        path: abs,
        type: info.type,
        sizeBytes: info.size,
        modifiedAt: new Date(info.mtimeMs).toISOString(),
        mode: (info.mode & 0o7777).toString(8),
      };
      if (info.type === 'symlink') result.target = await this.backend.readlink(abs);
      if (info.type === 'file') {
        const handle = await this.backend.open(abs);
        try {
          const sample = Buffer.alloc(Math.min(SNIFF_BYTES, info.size));
          const bytesRead = await handle.read(sample, 0, sample.length, 0);
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
   * or climb out with `..` (list the other directory's files from a `cwd` there instead). The
   * crawl reads directories through the backend.
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
    const cwd = await this.policy.resolve('glob', options.cwd ?? '.');
    try {
      const info = await this.backend.stat(cwd);
      if (info.type !== 'directory') throw errnoError('ENOTDIR', 'scandir', cwd);
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
      fs: globFileSystem(this.backend),
    });
    found.sort();
    const matches = found.slice(0, limit).map((m) => relative(cwd, resolve(cwd, m)));
    return { matches, cwd, total: found.length, truncated: found.length > limit };
  }
}

/** The operator's former name (it ran only in exec-server targets then); the same class. */
export { FileOperator as TargetFileOperator };

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
