export {
  createConchMcpServer,
  DEFAULT_ELICITATION_TIMEOUT_MS,
  DEFAULT_PROGRESS_INTERVAL_MS,
  type ConchMcpServerOptions,
} from './server.js';
export {
  MCP_DEFAULT_CONFIG,
  outputDirs,
  startStdioServer,
  withOutputFilesReadable,
  type RunningServer,
  type StartOptions,
} from './start.js';
export {
  clientSupportsElicitation,
  elicitationApprover,
  elicitationMessage,
} from './elicitation-approver.js';
export { ProgressRelay, type ProgressNotification } from './progress-relay.js';
export {
  denialAdvice,
  errorToCallToolResult,
  toCallToolResult,
  type DenialAdviceOptions,
  type DenialConfigFile,
} from './to-call-tool-result.js';
export { chooseConfig, parseCliArgs, USAGE, type ConfigSource, type McpCliArgs } from './cli-args.js';
