export {
  PROTOCOL_NAME,
  PROTOCOL_VERSION,
  STREAM_WINDOW_BYTES,
  type ServerHello,
  type FilesPolicy,
  type SessionInfo,
  type AttachResult,
} from './protocol.js';
export {
  executorConfigSchema,
  sandboxClaimSchema,
  type ExecutorConfig,
  type ExecutorConfigInput,
  type RemoteExecutorConfig,
} from './config.js';
export {
  executorFromConfig,
  parseExecutorConfig,
  remoteTarget,
  transportFor,
  type ExecutionTarget,
  type ExecutorContext,
  type TargetInfo,
} from './execution-target.js';
export { executorPlugin } from './executor-plugin.js';
export { EXECUTION_TARGET, FILE_OPERATIONS_TARGET, PROCESS_LAYER, TERMINAL_BACKEND } from './tokens.js';
export type { OutputStore, ProcessHandle, ProcessLayer } from './process-layer.js';
export {
  ExecClient,
  type ExecClientOptions,
  type ConnectionInfo,
  type SessionParticipant,
} from './client/exec-client.js';
export { RemoteProcessManager, type RemoteProcessManagerOptions } from './client/remote-process-manager.js';
export { RemoteProcess, type RemoteProcessResult } from './client/remote-process.js';
export { RemoteLeftovers } from './client/remote-leftovers.js';
export { RemoteFileOperator, type RemoteFileOperatorOptions } from './client/remote-file-operator.js';
export {
  RemoteTerminal,
  createRemoteTerminalTool,
  type RemoteTerminalInfo,
  type RemoteTerminalOptions,
} from './client/remote-terminal.js';
// The file operator, its policy, types and errors live in @conch/files (the exec server runs it
// in targets); re-exported under the names this package has always exported.
export {
  TargetFileOperator,
  DEFAULT_GLOB_IGNORE,
  looksBinary,
  PathPolicy,
  FileOperationError,
  isFileOperationError,
  InvalidFileArgumentError,
  type FileOperatorOptions,
  type PathPolicyOptions,
  type FileErrorCode,
  type FileOperations,
  type DirectoryEntry,
  type EditOptions,
  type EditResult,
  type EntryType,
  type GlobOptions,
  type GlobResult,
  type ListResult,
  type ReadOptions,
  type ReadResult,
  type StatResult,
  type WriteOptions,
  type WriteResult,
} from '@conch/files';
export { remoteFileOperator, remoteFileOperationsTarget } from './remote-file-operations.js';
export { TransportLostError } from './errors/transport-lost-error.js';
export { SessionExpiredError } from './errors/session-expired-error.js';
export { ExecServerStartError, type ExecServerStartStage } from './errors/exec-server-start-error.js';
export { ProtocolVersionError } from './errors/protocol-version-error.js';
export { RemoteCallError } from './errors/remote-call-error.js';
export { ExecutorDisposedError } from './errors/executor-disposed-error.js';
export { CommandTransport } from './transport/command-transport.js';
export { SshTransport, type SshTransportOptions } from './transport/ssh-transport.js';
export { ContainerTransport, type ContainerTransportOptions } from './transport/container-transport.js';
export { KubectlTransport, type KubectlTransportOptions } from './transport/kubectl-transport.js';
export {
  SandboxClaimTransport,
  type SandboxClaimTransportOptions,
  type SandboxClaimInfo,
} from './transport/sandbox-claim-transport.js';
export { resolveKubectlContext, type ResolvedKubectlContext } from './transport/kubectl-context.js';
export type { Transport } from './transport/transport.js';
export { bundleDir, bundleManifest, type BundleManifest } from './bundle/bundle.js';
export { BOOT_SCRIPT } from './bundle/boot-script.js';
