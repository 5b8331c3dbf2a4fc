import './events.js';
export { stripAnsi, cleanForModel, applyLineEdits } from './strip-ansi.js';
export { completeUtf8Prefix, decodeUtf8, utf8StartOffset } from './utf8.js';
export {
  SpillBudget,
  SpillSink,
  type SpillDir,
  type SpillProblem,
  type SpillReport,
  type SpillSinkOptions,
} from './spill-sink.js';
export { OutputCapture, type CaptureSnapshot, type OutputCaptureOptions } from './output-capture.js';
export {
  COOKIE_VAR,
  findCookiePids,
  findEnvPids,
  pidAlive,
  procEnviron,
  procTable,
  type ProcEntry,
  sigkillAllSync,
  sweepCookie,
  sweepCookieUntilGone,
} from './kill-tree.js';
export { killTree, killTreeSync, treePids } from './process-tree.js';
export { procPids, procStatFields, PROC_STAT } from './proc-stat.js';
export { LocalExecutor, type Executor, type ExecutorSpawnRequest } from './executor.js';
export type { SpawnedChild } from './spawned-child.js';
export { BubblewrapExecutor, type BubblewrapOptions } from './bubblewrap-executor.js';
export {
  BwrapNotFoundError,
  DuplicateProcessIdError,
  InvalidProcessArgumentError,
  InvalidSpawnOptionError,
  LeftoverAdoptionError,
  ProcessManagerDisposedError,
  PtySpawnError,
} from './errors.js';
export { ManagedProcess } from './managed-process.js';
export {
  DEFAULT_SPILL_LIMITS,
  ProcessManager,
  type SpillLimits,
  type ProcessManagerOptions,
  type ProcessManagerStatus,
  type SpawnPtyOptions,
  type SupervisorOptions,
} from './process-manager.js';
export {
  argMax,
  commandLineProblem,
  describeCommandLineProblem,
  MAX_ARG_STRLEN,
  MAX_PROCESS_ID_LENGTH,
  MAX_TIMEOUT_MS,
  requestedProcessId,
  validateSpawnArguments,
  type CaptureOptions,
  type CommandLineProblem,
  type SpawnOptions,
} from './spawn-options.js';
export type { ExitReason, LeftoverProcess, OutputEvent, ProcessResult } from './process-result.js';
export type { ResourceLimitHit, SandboxLimitsStatus } from './sandbox-limits.js';
export type { LeftoverHandle } from './leftover-handle.js';
export type { PtyExit, PtyProcess } from './pty-process.js';
// The sandbox's mechanism lives in @conch/sandbox; these names are exported here as before.
export {
  findBwrap,
  isConfigEntryPath,
  NetworkProxy,
  normalizeHost,
  probeSandbox,
  probeSandboxSync,
  PROXY_PORT,
  profileFor,
  type BlockedConnection,
  type ConnectionVerdict,
  type Destination,
  type PolicyForProfile,
  type SandboxKind,
  type SandboxProfile,
  type SandboxStatus,
  type WorkspaceWriteProfile,
} from '@conch/sandbox';
export type { SpawnerStatus } from './supervisor-protocol.js';
export { DEFAULT_FORWARD_POLL_MS, type ForwardedPort } from './port-forwarder.js';
export { type SandboxFileHandle, type SandboxFileSystem } from './sandbox-file-system.js';
export { onHostExit } from './host-exit.js';
export {
  applyEnvChanges,
  envForOutside,
  loaderEnvOutside,
  pathOutside,
  writableBy,
  type OutsideDropped,
} from './load-paths.js';
export { writeFileAtomic, type AtomicWriteOptions } from './atomic-write.js';
export { openForReading } from './supervisor-fs.js';
export { ensureProcessManager, PROCESS_MANAGER } from './ensure.js';
export {
  PROCESS_LAYER,
  resolveProcessLayer,
  type OutputStore,
  type ProcessHandle,
  type ProcessLayer,
  type ProcessTarget,
} from './process-layer.js';
export {
  DEFAULT_SLOW_PATTERNS,
  estimateSlowSeconds,
  mayBeSlow,
  slowEstimate,
  type CommandWords,
  type SlowPattern,
} from './slow-commands.js';
export {
  defaultOutputDir,
  OUTPUT_FILE_MAX_AGE_MS,
  outputFileName,
  prepareOutputDir,
  pruneOutputDir,
} from './output-dir.js';
export { processEvents, toProcessInfo, type ProcessEventSource } from './process-events.js';
export {
  killGraceFromSeconds,
  PAI_KILL_ALL_TIMEOUT_S,
  PAI_KILL_TIMEOUT_S,
  seedExitCode,
  type ManagedProcessInfo,
} from './pai-api.js';
