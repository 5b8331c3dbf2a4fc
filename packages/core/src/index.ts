import 'reflect-metadata';

export { ConchError, type ConchErrorOptions } from './errors/conch-error.js';
export { formatBytes } from './format-bytes.js';
export { makeTempDir, removeChromiumSingleton, sweepStaleTempDirs, TEMP_OWNER_FILE } from './temp-dirs.js';
export { clearStaleStat, removeSync, safeLstatSync, safeStatSync } from './stale-stat.js';
export { readRegularFileSync, type ReadRegularFileOptions } from './regular-file.js';
export { NoSuchPluginError } from './errors/no-such-plugin-error.js';
export { NoSuchToolError } from './errors/no-such-tool-error.js';
export { InvalidConfigError } from './errors/invalid-config-error.js';
export { InvalidArgumentsError } from './errors/invalid-arguments-error.js';
export { PluginLoadError, type PluginLoadFailure } from './errors/plugin-load-error.js';
export { DuplicateToolError } from './errors/duplicate-tool-error.js';
export { ToolExecutionError } from './errors/tool-execution-error.js';
export { PluginSetupError } from './errors/plugin-setup-error.js';
export { MissingDependencyError } from './errors/missing-dependency-error.js';
export { CircularDependencyError } from './errors/circular-dependency-error.js';
export { UntrustedConfigError } from './errors/untrusted-config-error.js';
export { UntrustedPluginError } from './errors/untrusted-plugin-error.js';
export {
  AbortedError,
  InvalidPluginError,
  PermissionGateMissingError,
  PluginAlreadyExposedError,
  RegistryDisposedError,
} from './errors/simple-errors.js';
export {
  describeValue,
  formatIssues,
  suggestKey,
  toValidationIssues,
  type ValidationIssue,
  type ValidationIssueOptions,
} from './errors/validation-issue.js';
export {
  definePlugin,
  defineTool,
  type Dependencies,
  type Dependency,
  type PluginContext,
  type PluginDefinition,
  type PluginScope,
  type PluginSetup,
  type RegistryEnvironment,
  type ResolvedDependencies,
  type ToolAnnotations,
  type ToolCallContext,
  type ToolDefinition,
  type ToolProgress,
  type ToolResult,
} from './define.js';
export {
  boundedText,
  compactText,
  DISPLAY_TEXT_MAX,
  ERROR_CODES,
  ERROR_TEXT_MAX,
  oneLine,
  toToolErrorResult,
  withResultSummary,
  type ErrorCode,
  type ToolErrorResult,
} from './results.js';
export { EventBus, type ConchEventName, type ConchEvents, type ConchListener } from './events.js';
export { createDefaultLogger, type Logger } from './logger.js';
export { IMPORT_MODULE_HOOK, PLUGIN_PACKAGE_NAME, type DiscoveryWarning } from './discovery.js';
export type {
  ApprovalAnswer,
  ApprovalRequest,
  ApproveFn,
  CommandPlan,
  KernelPolicy,
  NetworkRequest,
  PermissionDecision,
  PermissionGate,
  PermissionRequest,
  SandboxLevel,
} from './permission.js';
export type {
  BackgroundLogs,
  BackgroundRun,
  BackgroundRunOutcome,
  BackgroundService,
  BackgroundTaskInfo,
  BackgroundTaskSpec,
  BackgroundTaskStatus,
  ProcessInfo,
  ProcessManagerService,
  TrashDialect,
  TrashEntryInfo,
  TrashService,
} from './services.js';
export { BACKGROUND_SERVICE, PERMISSION_GATE, TOKENS, TRASH_SERVICE } from './tokens.js';
export { isToken, token, type Token } from './token.js';
export { DuplicateServiceError, NoSuchServiceError } from './errors/service-errors.js';
export { toJsonSchema, formatToolSchema, type JsonSchema, type SchemaFormat } from './schema.js';
export { normalizeConfigKeys } from './config-aliases.js';
export { toJsonSafe, type JsonSafeOptions, type JsonSafeResult } from './json-safe.js';
export {
  ARGUMENT_BYTES,
  checkArgumentLimits,
  compileToolLimits,
  DEFAULT_ARGUMENT_LIMITS,
  DEFAULT_MAX_STRING_BYTES,
  type ArgumentLimits,
  type CompiledToolLimits,
  type ToolArgumentLimits,
} from './argument-limits.js';
export {
  DEFAULT_SETUP_TIMEOUT_MS,
  PluginRegistry,
  type DiscoverOptions,
  type DiscoveryReport,
  type DiscoveryStatus,
  type ExecuteOptions,
  type ExposeOptions,
  type PermissionDeniedResult,
  type PluginInfo,
  type PluginRegistryOptions,
  type RegistryStatus,
  type ToolInfo,
  type TrustStatus,
} from './registry.js';
export {
  conchConfigSchema,
  createRegistryFromConfig,
  DEFAULT_CONCH_CONFIG,
  loadConchConfig,
  parseConchConfig,
  type ConchConfig,
  type RegistryFromConfigOptions,
} from './config-file.js';
export { compileWaitFor, waitForPatternSchema } from './wait-for-pattern.js';
export {
  defaultTrustStorePath,
  insideWorkspace,
  TrustStore,
  UNTRUSTED_REASONS,
  type TrustPin,
  type TrustState,
  type TrustStoreOptions,
  type UntrustedItem,
  type UntrustedReason,
} from './trust-store.js';
export { checkConfigFile, pinConfigFile, type CheckedConfigFile } from './config-trust.js';
export type { TrustAcceptance } from './plugin-trust.js';
export {
  CONFIG_DIGEST_MAX_BYTES,
  digestFile,
  digestPackage,
  PACKAGE_DIGEST_LIMITS,
  type FileDigest,
  type PackageDigest,
} from './package-digest.js';
export { onHostExit, type HostExitPhase } from './host-exit.js';
