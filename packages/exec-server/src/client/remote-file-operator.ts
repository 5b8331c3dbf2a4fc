import { posix } from 'node:path';
import { ConchError } from '@conch/core';
import {
  FileOperationError,
  type EditOptions,
  type EditResult,
  type FileErrorCode,
  type GlobOptions,
  type GlobResult,
  type ListResult,
  type ReadOptions,
  type ReadResult,
  type RoutedFileOperations,
  type StatResult,
  type WriteOptions,
  type WriteResult,
} from '@conch/files';
import { RemoteCallError } from '../errors/remote-call-error.js';
import { RpcError } from '../json-rpc.js';
import type { ClientRequests, FilesPolicy } from '../protocol.js';
import type { ExecClient } from './exec-client.js';

type FsMethod =
  'fs.read' | 'fs.readBytes' | 'fs.resolve' | 'fs.write' | 'fs.edit' | 'fs.list' | 'fs.stat' | 'fs.glob';

const FILE_CODES = new Set<string>([
  'FILE_NOT_FOUND',
  'NOT_A_FILE',
  'NOT_A_DIRECTORY',
  'OUTSIDE_WORKING_DIR',
  'PROTECTED_PATH',
  'BINARY_FILE',
  'FILE_TOO_LARGE',
  'EDIT_NO_MATCH',
  'EDIT_AMBIGUOUS',
  'EDIT_NO_CHANGE',
  'FILE_PERMISSION_DENIED',
  'FILE_ERROR',
]);

export interface RemoteFileOperatorOptions {
  client: ExecClient;
  /** Where operations may go in the target (working dir, allowed roots, limits). Default: the workspace. */
  policy?: FilesPolicy;
  /**
   * The host's protected-path rule (the permission gate's `protectedWriteReason`, with its extra
   * globs and names): judged here on the target's absolute and real paths before any write or
   * edit is sent, a first refusal in the gate's words. The target refuses its workspace's outside
   * and the built-in protected names by itself, with its own home, at the write.
   */
  protectedReason?: (absolutePath: string) => string | undefined;
}

/**
 * @conch/files' file operations on a target's files, run there by the exec server (its
 * FileOperator). Failures throw FileOperationError with the same codes and
 * messages (paths in them are the target's); a dropped connection throws TransportLostError.
 * Writes and edits go only inside the target's workspace (and the policy's allowed roots) and
 * never to a protected path: the server judges both in the target, on real paths there, with
 * the target user's home (`~` is that home), whether or not a host rule is given here.
 */
export class RemoteFileOperator implements RoutedFileOperations {
  readonly target: string;
  private readonly client: ExecClient;
  private readonly policy: FilesPolicy | undefined;
  private readonly protectedReason: ((abs: string) => string | undefined) | undefined;

  constructor(options: RemoteFileOperatorOptions) {
    this.client = options.client;
    this.target = options.client.target;
    this.policy = options.policy;
    this.protectedReason = options.protectedReason;
  }

  async read(path: string, options: ReadOptions = {}): Promise<ReadResult> {
    return this.call('fs.read', { path, ...pick(options, ['offset', 'limit']) });
  }

  async readBytes(
    path: string,
    options: { offset?: number; length?: number } = {},
  ): Promise<{ path: string; data: Buffer; sizeBytes: number }> {
    const r = await this.call('fs.readBytes', { path, ...pick(options, ['offset', 'length']) });
    return { path: r.path, data: Buffer.from(r.data, 'base64'), sizeBytes: r.sizeBytes };
  }

  async write(path: string, content: string | Uint8Array, options: WriteOptions = {}): Promise<WriteResult> {
    if (typeof content !== 'string' && !(content instanceof Uint8Array)) {
      throw new FileOperationError({
        code: 'FILE_ERROR',
        operation: 'write',
        path,
        message: `files.write 'content': expected a string or a Uint8Array; received ${typeof content}`,
      });
    }
    if (this.protectedReason) await this.checkProtected('write', path);
    const binary = typeof content !== 'string';
    return this.call('fs.write', {
      path,
      content: binary ? Buffer.from(content).toString('base64') : content,
      encoding: binary ? 'base64' : 'utf8',
      ...pick(options, ['createDirs']),
    });
  }

  async edit(path: string, options: EditOptions): Promise<EditResult> {
    if (this.protectedReason) await this.checkProtected('edit', path);
    return this.call('fs.edit', {
      path,
      oldString: options.oldString,
      newString: options.newString,
      ...pick(options, ['replaceAll']),
    });
  }

  async list(path = '.', options: { limit?: number } = {}): Promise<ListResult> {
    return this.call('fs.list', { path, ...pick(options, ['limit']) });
  }

  async stat(path: string): Promise<StatResult> {
    return this.call('fs.stat', { path });
  }

  async glob(patterns: string | readonly string[], options: GlobOptions = {}): Promise<GlobResult> {
    return this.call('fs.glob', {
      patterns: typeof patterns === 'string' ? [patterns] : [...patterns],
      ...pick(options, ['cwd', 'dot', 'limit']),
      ...(options.ignore ? { ignore: [...options.ignore] } : {}),
    });
  }

  /** The working dir in the target (the policy's root, else the workspace once connected). */
  get root(): string | undefined {
    return this.policy?.root ?? this.client.lastConnection?.init.cwd;
  }

  /** A target path as shown to the model: relative to the working dir when inside it. */
  display(abs: string): string {
    const root = this.root;
    if (!root) return abs;
    const rel = posix.relative(root, abs);
    return rel === '' ? '.' : rel.startsWith('../') || rel === '..' || posix.isAbsolute(rel) ? abs : rel;
  }

  /**
   * The absolute target path a write or an edit of `path` would change, or a FileOperationError
   * (OUTSIDE_WORKING_DIR and the built-in PROTECTED_PATH judged in the target, the host rule's
   * PROTECTED_PATH judged here): what file tools check before asking the gate.
   */
  async checkWrite(operation: string, path: string): Promise<string> {
    return this.checkProtected(operation, path);
  }

  /** The target's write check, then the gate's protected-path rule on what the path is there (as written, and real). */
  private async checkProtected(operation: string, path: string): Promise<string> {
    const { abs, real } = await this.call('fs.resolve', { operation, path });
    if (!this.protectedReason) return abs;
    const reason = this.protectedReason(abs) ?? (real !== abs ? this.protectedReason(real) : undefined);
    if (reason === undefined) return abs;
    throw new FileOperationError({
      code: 'PROTECTED_PATH',
      operation,
      path,
      message: `Refused: ${operation} would modify ${reason}. Protected paths are never written by conch; write somewhere else.`,
      display: `${operation} refused: ${reason}`,
    });
  }

  private async call<M extends FsMethod>(
    method: M,
    params: Omit<ClientRequests[M][0], 'policy'>,
  ): Promise<ClientRequests[M][1]> {
    try {
      const full = { ...params, ...(this.policy ? { policy: this.policy } : {}) } as ClientRequests[M][0];
      return await this.client.request(method, full);
    } catch (error) {
      throw fileError(method, error);
    }
  }
}

function pick<T extends object, K extends keyof T>(source: T, keys: readonly K[]): Partial<Pick<T, K>> {
  const out: Partial<Pick<T, K>> = {};
  for (const key of keys) if (source[key] !== undefined) out[key] = source[key];
  return out;
}

/** A refusal of the target's file operator, rebuilt as the same FileOperationError the environment throws. */
function fileError(method: string, error: unknown): unknown {
  if (!(error instanceof RemoteCallError) || !(error.cause instanceof RpcError)) return error;
  const rpc = error.cause;
  const data = rpc.data;
  if (FILE_CODES.has(data.code)) {
    return new FileOperationError({
      code: data.code as FileErrorCode,
      operation: typeof data.operation === 'string' ? data.operation : method.slice(3),
      path: typeof data.path === 'string' ? data.path : '',
      message: rpc.message,
      ...(typeof data.display === 'string' ? { display: data.display } : {}),
      cause: error,
    });
  }
  if (data.code === 'INVALID_FILE_ARGUMENT') {
    const invalid = new ConchError({ code: 'INVALID_FILE_ARGUMENT', message: rpc.message, cause: error });
    invalid.name = 'InvalidFileArgumentError';
    return Object.assign(invalid, { field: typeof data.field === 'string' ? data.field : '' });
  }
  return error;
}
