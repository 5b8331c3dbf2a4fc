export {
  createConchMcpServer,
  DEFAULT_ELICITATION_TIMEOUT_MS,
  DEFAULT_PROGRESS_INTERVAL_MS,
  type ConchMcpServerOptions,
} from './server.js';
export { startStdioServer, type RunningServer, type StartOptions } from './start.js';
export {
  clientSupportsElicitation,
  elicitationApprover,
  elicitationMessage,
} from './elicitation-approver.js';
export { ProgressRelay, type ProgressNotification } from './progress-relay.js';
export { errorToCallToolResult, toCallToolResult } from './to-call-tool-result.js';
export { parseCliArgs, USAGE, type McpCliArgs } from './cli-args.js';
