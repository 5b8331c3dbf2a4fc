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
  withHostPorts,
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
export {
  ConchStdioTransport,
  DEFAULT_MAX_ANSWER_BYTES,
  DEFAULT_MAX_MESSAGE_BYTES,
  DEFAULT_PROBE_INTERVAL_MS,
  MAX_ERROR_ANSWER_BYTES,
  MAX_ID_CHARS,
  type ConchStdioTransportOptions,
} from './stdio-transport.js';
export {
  chooseAllowPorts,
  chooseConfig,
  parseCliArgs,
  parsePorts,
  USAGE,
  type ConfigSource,
  type McpCliArgs,
} from './cli-args.js';
