export {
  createEnvironment,
  Environment,
  type BrowserSession,
  type EnvironmentOptions,
  type ExecutorOption,
  type LocalExecutorOption,
} from './environment.js';
// The file operator and its types (one implementation, shared with the exec server).
export * from './file-operator.js';
export { PathPolicy, type PathPolicyOptions } from './path-policy.js';
export { filesPlugin, fileTools, createFileOperator, protectedReasonFor } from './files-plugin.js';
export { filesConfigSchema, type FilesConfig, type FilesConfigInput } from './files-config.js';
export {
  createShell,
  DEFAULT_SHELL_TIMEOUT_SEC,
  type EnvironmentShell,
  type ShellResult,
  type ShellRunOptions,
} from './shell.js';
export { createProcesses, type EnvironmentProcesses, type ProcessLogs } from './processes.js';
export { FileOperationError, isFileOperationError, type FileErrorCode } from '@conch/exec-server';
export { InvalidFileArgumentError } from '@conch/exec-server';
export {
  InvalidEnvironmentOptionError,
  UnsupportedExecutorError,
} from './errors/invalid-environment-option-error.js';
export { EnvironmentClosedError, EnvironmentCloseError } from './errors/environment-closed-error.js';
