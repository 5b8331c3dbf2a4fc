export {
  FileOperator,
  TargetFileOperator,
  DEFAULT_GLOB_IGNORE,
  type FileOperatorOptions,
} from './file-operator.js';
export type {
  FileOperations,
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
} from './file-operations.js';
export { looksBinary } from './looks-binary.js';
export { PathPolicy, realPathOf, type PathPolicyOptions, type ResolvedPath } from './path-policy.js';
export { resolveTargetPath } from './resolve-target-path.js';
export {
  errnoError,
  type BackendDirectoryEntry,
  type FileReadHandle,
  type FileStats,
  type FileSystemBackend,
  type WriteFileAtomicOptions,
} from './file-system-backend.js';
export { localFileSystem } from './local-file-system.js';
export {
  FileOperationError,
  isFileOperationError,
  type FileErrorCode,
} from './errors/file-operation-error.js';
export { InvalidFileArgumentError } from './errors/invalid-file-argument-error.js';
export { filesConfigSchema, type FilesConfig, type FilesConfigInput } from './files-config.js';
export {
  DEFAULT_MAX_WRITE_BYTES,
  fileArgumentLimits,
  filesPlugin,
  fileTools,
  createFileOperator,
  fileOperationsRequest,
  protectedReasonFor,
  routedFiles,
  type FileToolsBackend,
} from './files-plugin.js';
export {
  FILE_OPERATIONS_TARGET,
  type FileOperationsPolicy,
  type FileOperationsRequest,
  type FileOperationsTarget,
  type RoutedFileOperations,
} from './tokens.js';
export { kernelFileSystem } from './kernel-file-system.js';
