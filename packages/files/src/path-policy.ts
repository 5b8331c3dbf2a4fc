import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { FileOperationError } from './errors/file-operation-error.js';
import { InvalidFileArgumentError } from './errors/invalid-file-argument-error.js';
import type { FileSystemBackend } from './file-system-backend.js';
import { localFileSystem } from './local-file-system.js';

/** The longest path an operation takes, in bytes: Linux's PATH_MAX (a longer one names no file). */
export const PATH_MAX_BYTES = 4096;

export interface PathPolicyOptions {
  /** The working directory: relative paths resolve from it, and it is always allowed. */
  root: string;
  /** More directories the host allows (absolute, or relative to `root`). */
  allowedRoots?: readonly string[];
  /** Allow any path on the machine (protected paths stay refused for writes). Default false. */
  allowOutside?: boolean;
  /**
   * Why writing an absolute path is refused, in the permission gate's words, or undefined. Called
   * at each write (the host may expose a permission plugin after the operator was made), on the
   * path as written and on its real path. In an exec-server target it is @conch/permission's
   * rule judged with the target's home and workspace (the host's gate judges its own first).
   */
  protectedReason?: (absolutePath: string) => string | undefined;
  /** Where real paths are resolved (the same backend the operator reads and writes through). Default `localFileSystem`. */
  backend?: FileSystemBackend;
}

/**
 * The real path of `abs` through `backend`: symlinks resolved for the part that exists, the rest
 * appended as written. A final component that cannot be resolved (missing, a dangling symlink, a
 * loop) stays as written: a write there replaces that entry, it never follows it.
 */
export async function realPathOf(abs: string, backend: FileSystemBackend = localFileSystem): Promise<string> {
  const missing: string[] = [];
  let current = abs;
  for (;;) {
    try {
      const real = await backend.realpath(current);
      return missing.length ? join(real, ...missing.reverse()) : real;
    } catch {
      const parent = dirname(current);
      if (parent === current) return abs;
      missing.push(basename(current));
      current = parent;
    }
  }
}

function inside(path: string, root: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/** A path the policy allowed: as written (lexically normalised, symlinks kept) and real. */
export interface ResolvedPath {
  abs: string;
  real: string;
}

/**
 * Where the file operator may read and write: inside the working dir (and the host's extra
 * roots), judged on real paths so a symlink inside the workspace cannot lead outside it; writes
 * additionally pass the permission gate's protected-path rule, on the path as written and on the
 * real path the write will replace.
 */
export class PathPolicy {
  readonly root: string;
  readonly backend: FileSystemBackend;
  private readonly allowOutside: boolean;
  private readonly protectedReason: ((absolutePath: string) => string | undefined) | undefined;
  private readonly lexicalRoots: readonly string[];
  private roots: Promise<readonly string[]> | undefined;

  constructor(options: PathPolicyOptions) {
    this.root = resolve(options.root);
    this.allowOutside = options.allowOutside === true;
    this.protectedReason = options.protectedReason;
    this.backend = options.backend ?? localFileSystem;
    this.lexicalRoots = [this.root, ...(options.allowedRoots ?? []).map((r) => resolve(this.root, r))];
  }

  /** The allowed directories (real paths, resolved once through the backend), the working dir first. */
  allowedRoots(): Promise<readonly string[]> {
    this.roots ??= Promise.all(this.lexicalRoots.map((r) => realPathOf(r, this.backend)));
    return this.roots;
  }

  /** Checks a path argument's type: a non-empty string without NUL bytes. */
  static checkArgument(operation: string, field: string, value: unknown): string {
    if (typeof value !== 'string' || value.length === 0 || value.includes('\0')) {
      throw new InvalidFileArgumentError(operation, field, 'a non-empty path without NUL bytes', value);
    }
    // A longer path cannot name a file (Linux's PATH_MAX): refused before the file system sees it.
    if (value.length > PATH_MAX_BYTES || Buffer.byteLength(value) > PATH_MAX_BYTES) {
      throw new InvalidFileArgumentError(
        operation,
        field,
        `a path of at most ${PATH_MAX_BYTES} bytes (PATH_MAX)`,
        value,
        `a path of ${Buffer.byteLength(value)} bytes`,
      );
    }
    return value;
  }

  /**
   * Resolves `path` (relative to the working dir) and refuses it when it leads outside the
   * allowed directories (OUTSIDE_WORKING_DIR). Returns the absolute path as written (lexically
   * normalised, symlinks kept), which is what reads then use.
   */
  async resolve(operation: string, path: string): Promise<string> {
    return (await this.resolvePaths(operation, path)).abs;
  }

  /** `resolve`, with the real path the policy judged (symlinks resolved for the part that exists). */
  async resolvePaths(operation: string, path: string): Promise<ResolvedPath> {
    PathPolicy.checkArgument(operation, 'path', path);
    const abs = resolve(this.root, path);
    const real = await realPathOf(abs, this.backend);
    if (this.allowOutside) return { abs, real };
    const roots = await this.allowedRoots();
    if (roots.some((root) => inside(real, root))) return { abs, real };
    const via = real === abs ? '' : ` (through a symlink, it is ${real})`;
    const where =
      roots.length > 1
        ? `the working directory ${this.root} and the allowed roots ${roots.slice(1).join(', ')}`
        : `the working directory ${this.root}`;
    throw new FileOperationError({
      code: 'OUTSIDE_WORKING_DIR',
      operation,
      path,
      message: `Refused: ${operation} ${abs}${via} is outside ${where}. The host allows file operations only inside it.`,
      display: `${operation} refused: ${path} is outside the working directory`,
    });
  }

  /**
   * `resolvePaths` for a write, plus the gate's protected-path rule (PROTECTED_PATH, in the gate's
   * words) on the path as written and on its real path — the one the write replaces.
   */
  async resolveForWrite(operation: string, path: string): Promise<ResolvedPath> {
    const resolved = await this.resolvePaths(operation, path);
    const { abs, real } = resolved;
    const reason = this.protectedReason?.(abs) ?? (real !== abs ? this.protectedReason?.(real) : undefined);
    if (reason !== undefined) {
      throw new FileOperationError({
        code: 'PROTECTED_PATH',
        operation,
        path,
        message: `Refused: ${operation} would modify ${reason}. Protected paths are never written by conch; write somewhere else.`,
        display: `${operation} refused: ${reason}`,
      });
    }
    return resolved;
  }

  /** The path as shown to the model: relative to the working dir when inside it. */
  display(abs: string): string {
    const rel = relative(this.root, abs);
    return rel === '' ? '.' : inside(abs, this.root) ? rel : abs;
  }
}
