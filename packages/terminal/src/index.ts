import './events.js';

export { terminalPlugin, terminalPlugin as default } from './plugin.js';
export {
  DISABLED_IDLE_MS,
  SEED_SLOW_PATTERNS,
  SEED_TERMINAL_CONFIG,
  terminalConfigSchema,
  type TerminalConfig,
  type TerminalConfigInput,
} from './config.js';
export { findDownloadReview, reviewSteps, type DownloadReview, type ReviewSteps } from './download-review.js';
export { TERMINAL_SERVICE } from './tokens.js';
export { TERMINAL_BACKEND, routeToBackend, type TerminalBackend } from './terminal-backend.js';
export {
  SessionPool,
  SessionLease,
  execRefusal,
  type FinishedResult,
  type RunningResult,
  type RunSyncOptions,
  type RunSyncResult,
  type TerminalService,
  type TerminalSessionInfo,
} from './session-pool.js';
export {
  SessionLifecycle,
  publicState,
  type SessionExitReason,
  type SessionLifecycleState,
  type SessionState,
} from './session-state.js';
export { TerminalSessionError, type TerminalSessionErrorCode } from './errors/terminal-session-error.js';
export { InvalidSessionTransitionError } from './errors/invalid-session-transition-error.js';
export { TerminalProtocolError, type TerminalProtocolErrorCode } from './errors/terminal-protocol-error.js';
export { TerminalCommandError, type TerminalCommandErrorCode } from './errors/terminal-command-error.js';
export { analyzeCommand, type CommandAnalysis } from './command-analysis.js';
export { RcWatch } from './rc-files.js';
export {
  managedPtySpawner,
  spawnLocalPty,
  type PtyManager,
  type SessionPty,
  type SessionPtyOptions,
  type SessionPtySpawner,
} from './session-pty.js';
export {
  classifyCall,
  judgedCommand,
  TERMINAL_ARGUMENT_LIMITS,
  terminalInputSchema,
  type CallShape,
  type TerminalArgs,
} from './terminal-tool.js';
export { cleanOutput, capTotal } from './output-cleaner.js';
export { looksLikePrompt } from './prompt-detector.js';
export { describeTerminalCall, type TerminalCallArgs } from './describe-terminal-call.js';
