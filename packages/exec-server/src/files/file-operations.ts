import type {
  EditOptions,
  EditResult,
  GlobOptions,
  GlobResult,
  ListResult,
  ReadOptions,
  ReadResult,
  StatResult,
  WriteOptions,
  WriteResult,
} from './target-file-operator.js';

/**
 * What an environment's file tools need, wherever the files are: @conch/environment's FileOperator
 * surface (read by lines with the true size, readBytes, write, exact-replacement edit, list, stat,
 * glob), implemented by `TargetFileOperator` (this machine) and `RemoteFileOperator` (a target).
 * Failures throw `FileOperationError` (`name === 'FileOperationError'`, same codes as the
 * environment's, so its `isFileOperationError` and tools treat remote failures alike).
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

export type {
  DirectoryEntry,
  EditOptions,
  EditResult,
  EntryType,
  GlobOptions,
  GlobResult,
  ListResult,
  ReadOptions,
  ReadResult,
  StatResult,
  WriteOptions,
  WriteResult,
} from './target-file-operator.js';
