export {
  isConchToolError,
  toAiSdkTools,
  type ConchAiSdkTool,
  type ConchToolError,
  type ToAiSdkToolsOptions,
} from './to-ai-sdk-tools.js';
