export { describeReceived } from './describe-received.js';
export { findBwrap, forgetBwrap } from './find-bwrap.js';
export { compileHostPattern, PACKAGE_REGISTRIES, type HostPattern } from './host-patterns.js';
export { InvalidSpawnOptionError } from './invalid-spawn-option-error.js';
export {
  defaultSandboxCacheDir,
  HIDDEN_ENV,
  KEPT_ENV,
  KernelPolicyBuilder,
  SECRET_HOME_PATHS,
  SYSTEM_SECRET_PATHS,
  sandboxEnv,
  type KernelPolicyOptions,
  type SandboxMode,
  type SandboxPaths,
} from './kernel-policy.js';
export {
  MAX_PROXY_CONNECTIONS,
  NetworkProxy,
  normalizeHost,
  type BlockedConnection,
  type ConnectionVerdict,
  type Destination,
  type NetworkProxyOptions,
} from './network-proxy.js';
export {
  inContainer,
  needsUserNamespace,
  probeSandbox,
  probeSandboxSync,
  settledSandboxStatus,
  type SandboxStatus,
} from './probe.js';
export {
  envFilter,
  installRoot,
  isIsolated,
  isRequired,
  NO_SANDBOX,
  normalizeSandboxProfile,
  profileFor,
  PROXY_PORT,
  PROXY_SOCKET_IN_SANDBOX,
  ENGINE_DIR_IN_SANDBOX,
  proxyEnv,
  makeWritableRoot,
  sandboxArgs,
  sandboxKey,
  type PolicyForProfile,
  type SandboxArgs,
  type SandboxKind,
  type SandboxProfile,
  type WorkspaceWriteProfile,
} from './profile.js';
export {
  ENV_FILE,
  ENV_TEMPLATE,
  ENV_TEMPLATE_NAMES,
  HG_PROTECTED,
  isEnvSecretName,
  isToolConfigFileName,
  RC_FILES,
  SYSTEM_RC,
  SYSTEM_RC_DIRS,
  TOOL_CONFIG_DIRS,
  TOOL_CONFIG_FILES,
  TOOL_CONFIG_SUFFIXES,
} from './protected-names.js';
export {
  encodeGuardRules,
  GUARD_BINARY,
  executableGuard,
  GUARD_VAR,
  guardAvailability,
  GuardEventReader,
  guardRulesFor,
  isConfigEntryPath,
  mergeGuardRules,
  type GuardAvailability,
  type GuardEvent,
  type GuardOp,
  type GuardRules,
} from './guard.js';
export {
  changesHistory,
  gitConfigPlants,
  historyPlants,
  inspectPlants,
  PLANT_CLASSES,
  PLANT_WATCH_NAMES,
  workTreeOf,
  type Plant,
  type PlantKind,
} from './plants.js';
export { configValues, parseGitConfig, type ConfigEntry } from './git-config-grammar.js';
export { GUARD_DIR_NAMES, GUARD_FILE_NAMES } from './protected-names.js';
export {
  GIT_HOOK_NAMES,
  hookDelegates,
  LEFTHOOK_CONFIGS,
  type HookDelegates,
  type HookManagerIo,
} from './hook-managers.js';
export { joinSockets, startBridge } from './bridge.js';
export {
  allowListDecider,
  compileHostPatterns,
  internalAddress,
  internalRefusal,
  ownAddress,
  loopbackPorts,
} from './network-allow-list.js';
export {
  Sandbox,
  SandboxUnavailableError,
  type SandboxEvents,
  type SandboxOptions,
  type SandboxRefusal,
  type SandboxRunOptions,
  type SandboxRunResult,
} from './sandbox.js';
export { looksLikeCredential } from './env-values.js';
export {
  HOME_READABLE,
  HOME_SANITIZED,
  HOME_SANITIZED_DIRS,
  readIndexBlobs,
  sanitizeConfig,
  TOOLCHAIN_ROOT_VARS,
  toolchainPaths,
  trackedUnchanged,
  type HomeEntry,
  type SanitizeKind,
} from './home-view.js';
export {
  allocationFailure,
  cgroupCounters,
  cgroupDirOf,
  defaultSandboxResources,
  forgetLimitSupport,
  limitSupport,
  limitWrap,
  MIN_MEMORY_BYTES,
  MIN_PROCESSES,
  normalizeSandboxResources,
  parseByteSize,
  PID_RESERVED,
  resourcesOf,
  systemOomKills,
  tmpfsSizing,
  type LimitSupport,
  type LimitWrap,
  type SandboxResources,
} from './resource-limits.js';
export {
  EngineProxy,
  type EngineProxyOptions,
  type EngineProxyStartOptions,
  type EngineRefusal,
} from './engine/engine-proxy.js';
export {
  composeProjectNames,
  defaultEnginePolicy,
  enginePolicySchema,
  parseEnginePolicy,
  type EnginePolicy,
  type EnginePolicyInput,
} from './engine/engine-policy-config.js';
export {
  COMPOSE_PROJECT_LABEL,
  SESSION_LABEL as ENGINE_SESSION_LABEL,
  type EngineRule,
  type PolicyRefusal as EnginePolicyRefusal,
} from './engine/engine-policy.js';
export {
  ENGINE_SOCKET_IN_SANDBOX,
  engineAvailable,
  engineSandboxEnv,
  engineSocketCandidates,
  type EngineAvailability,
} from './engine/engine-socket.js';
export {
  CA_BUNDLE_IN_SANDBOX,
  CREDENTIAL_INJECTOR,
  CredentialInjector,
  SYSTEM_CA_FILES,
  type CredentialInjectorOptions,
  type CredentialTunnel,
  type InterceptUpstream,
} from './credentials/credential-injector.js';
export {
  CA_ENV_NAMES,
  CREDENTIAL_SCHEMES,
  normalizeCredentials,
  parseCredentialHost,
  type Credential,
  type CredentialConfig,
  type CredentialHost,
  type CredentialScheme,
} from './credentials/credential-config.js';
export { InvalidCredentialConfigError } from './credentials/invalid-credential-config-error.js';
export { SessionCa, type IssuedLeaf, type SessionCaOptions } from './credentials/session-ca.js';
