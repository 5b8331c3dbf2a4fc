export {
  createEnvironment,
  Environment,
  type BrowserSession,
  type EnvironmentOptions,
  type ExecutorOption,
  type LocalExecutorOption,
} from './environment.js';
// The file operator, the files plugin and their types are @conch/files' (re-exported under the
// names this package has always exported).
export {
  FileOperator,
  DEFAULT_GLOB_IGNORE,
  looksBinary,
  PathPolicy,
  filesPlugin,
  fileTools,
  createFileOperator,
  protectedReasonFor,
  filesConfigSchema,
  FileOperationError,
  isFileOperationError,
  InvalidFileArgumentError,
  type FileErrorCode,
  type FilesConfig,
  type FilesConfigInput,
  type PathPolicyOptions,
  type DirectoryEntry,
  type EditOptions,
  type EditResult,
  type EntryType,
  type FileOperatorOptions,
  type GlobOptions,
  type GlobResult,
  type ListResult,
  type ReadOptions,
  type ReadResult,
  type StatResult,
  type WriteOptions,
  type WriteResult,
} from '@conch/files';
export {
  createShell,
  DEFAULT_SHELL_TIMEOUT_SEC,
  type EnvironmentShell,
  type ShellResult,
  type ShellRunOptions,
} from './shell.js';
export { createProcesses, type EnvironmentProcesses, type ProcessLogs } from './processes.js';
export {
  InvalidEnvironmentOptionError,
  UnsupportedExecutorError,
} from './errors/invalid-environment-option-error.js';
export { EnvironmentClosedError, EnvironmentCloseError } from './errors/environment-closed-error.js';
