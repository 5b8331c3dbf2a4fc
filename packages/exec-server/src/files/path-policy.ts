import { realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { FileOperationError } from '../errors/file-operation-error.js';
import { InvalidFileArgumentError } from '../errors/invalid-file-argument-error.js';

export interface PathPolicyOptions {
  /** The working directory: relative paths resolve from it, and it is always allowed. */
  root: string;
  /** More directories the host allows (absolute, or relative to `root`). */
  allowedRoots?: readonly string[];
  /** Allow any path on the machine (protected paths stay refused for writes). Default false. */
  allowOutside?: boolean;
  /**
   * Why writing an absolute path is refused, in the permission gate's words, or undefined. Called
   * at each write (the host may expose a permission plugin after the operator was made). Absent in
   * a target: the host's gate judges remote writes before it sends them.
   */
  protectedReason?: (absolutePath: string) => string | undefined;
}

/** The real path of `abs`: symlinks resolved for the part that exists, the rest appended as written. */
export function realPathOf(abs: string): string {
  const missing: string[] = [];
  let current = abs;
  for (;;) {
    try {
      const real = realpathSync(current);
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

/**
 * Where the file operator may read and write: inside the working dir (and the host's extra
 * roots), judged on real paths so a symlink inside the workspace cannot lead outside it; writes
 * additionally pass the permission gate's protected-path rule.
 */
export class PathPolicy {
  readonly root: string;
  private readonly roots: readonly string[];
  private readonly allowOutside: boolean;
  private readonly protectedReason: ((absolutePath: string) => string | undefined) | undefined;

  constructor(options: PathPolicyOptions) {
    this.root = resolve(options.root);
    this.allowOutside = options.allowOutside === true;
    this.protectedReason = options.protectedReason;
    this.roots = [this.root, ...(options.allowedRoots ?? []).map((r) => resolve(this.root, r))].map((r) =>
      realPathOf(r),
    );
  }

  /** The allowed directories (real paths), the working dir first. */
  allowedRoots(): readonly string[] {
    return this.roots;
  }

  /** Checks a path argument's type: a non-empty string without NUL bytes. */
  static checkArgument(operation: string, field: string, value: unknown): string {
    if (typeof value !== 'string' || value.length === 0 || value.includes('\0')) {
      throw new InvalidFileArgumentError(operation, field, 'a non-empty path without NUL bytes', value);
    }
    return value;
  }

  /**
   * Resolves `path` (relative to the working dir) and refuses it when it leads outside the
   * allowed directories (OUTSIDE_WORKING_DIR). Returns the absolute path as written (lexically
   * normalised, symlinks kept), which is what reads and writes then use.
   */
  resolve(operation: string, path: string): string {
    PathPolicy.checkArgument(operation, 'path', path);
    const abs = resolve(this.root, path);
    if (this.allowOutside) return abs;
    const real = realPathOf(abs);
    if (this.roots.some((root) => inside(real, root))) return abs;
    const via = real === abs ? '' : ` (through a symlink, it is ${real})`;
    const where =
      this.roots.length > 1
        ? `the working directory ${this.root} and the allowed roots ${this.roots.slice(1).join(', ')}`
        : `the working directory ${this.root}`;
    throw new FileOperationError({
      code: 'OUTSIDE_WORKING_DIR',
      operation,
      path,
      message: `Refused: ${operation} ${abs}${via} is outside ${where}. The host allows file operations only inside it.`,
      display: `${operation} refused: ${path} is outside the working directory`,
    });
  }

  /** `resolve` for a write, plus the gate's protected-path rule (PROTECTED_PATH, in the gate's words). */
  resolveForWrite(operation: string, path: string): string {
    const abs = this.resolve(operation, path);
    const reason = this.protectedReason?.(abs);
    if (reason !== undefined) {
      throw new FileOperationError({
        code: 'PROTECTED_PATH',
        operation,
        path,
        message: `Refused: ${operation} would modify ${reason}. Protected paths are never written by conch; write somewhere else.`,
        display: `${operation} refused: ${reason}`,
      });
    }
    return abs;
  }

  /** The path as shown to the model: relative to the working dir when inside it. */
  display(abs: string): string {
    const rel = relative(this.root, abs);
    return rel === '' ? '.' : inside(abs, this.root) ? rel : abs;
  }
}
