export { stripAnsi, cleanForModel } from './strip-ansi.js';
export { completeUtf8Prefix, decodeUtf8, looksBinary, utf8StartOffset } from './utf8.js';
export { SpillSink, type SpillSinkOptions } from './spill-sink.js';
export { OutputCapture, type CaptureSnapshot, type OutputCaptureOptions } from './output-capture.js';
export {
  COOKIE_VAR,
  findCookiePids,
  groupAlive,
  killGroupSync,
  killProcessTree,
  pidAlive,
  procEntry,
  procTable,
  type ProcEntry,
  sweepCookie,
  type KillTreeOptions,
} from './kill-tree.js';
export { LocalExecutor, type Executor, type ExecutorSpawnRequest } from './executor.js';
export { BubblewrapExecutor, findBwrap, type BubblewrapOptions } from './bubblewrap-executor.js';
export { InvalidSpawnOptionError, ProcessManagerDisposedError } from './errors.js';
export {
  ManagedProcess,
  ProcessManager,
  type CaptureOptions,
  type ExitReason,
  type OutputEvent,
  type ProcessManagerOptions,
  type ProcessResult,
  type SpawnOptions,
} from './process-manager.js';
export { ensureProcessManager } from './ensure.js';
export { trackedManagerCount } from './exit-hook.js';
