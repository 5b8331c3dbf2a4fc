export {
  CLI_ARGUMENT_LIMITS,
  cliPlugin,
  cliToolInputSchema,
  describeCliCall,
  type CliToolInput,
} from './plugin.js';
export {
  cliConfigSchema,
  DEFAULT_CLI_CONFIG,
  type CliConfig,
  type CliConfigInput,
  type SlowPattern,
} from './config.js';
export {
  runCommand,
  getShellParser,
  planRequest,
  type RunCommandOptions,
  type RunCommandRequest,
  type RunCommandResult,
} from './run-command.js';
export { planCommand, resolveShell, dialectOf, type CliPlan, type PlanInput } from './plan.js';
export {
  cutMiddle,
  errorGuidance,
  formatResult,
  type CliBackgroundResult,
  type CliMode,
  type CliResult,
  type FormatOptions,
} from './format-result.js';
export { DEFAULT_SLOW_PATTERNS, estimateSeconds } from './slow-patterns.js';
export { commandEnv, expandPath, NON_INTERACTIVE_ENV } from './env.js';
export { cliInstructions } from './instructions.js';
export * from './templates/index.js';
