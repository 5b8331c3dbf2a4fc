export { ConchToolCallError, type ConchToolError } from './conch-tool-call-error.js';
export {
  isConchToolError,
  toAiSdkTools,
  type ConchAiSdkTool,
  type ConchToolCallOptions,
  type ToAiSdkToolsOptions,
} from './to-ai-sdk-tools.js';
