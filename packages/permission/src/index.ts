import './events.js';
export { permissionPlugin, permissionReady, getPermissionEngine, PERMISSION_ENGINE } from './plugin.js';
export { PermissionEngine, type AuditEntry, type PermissionEngineOptions, type RuleProblem } from './gate.js';
export type { Analysis, Part, Verdict } from './analyze.js';
export {
  permissionConfigSchema,
  type PermissionConfig,
  type PermissionConfigInput,
  type RuleInput,
  type SafetyRuleId,
} from './config.js';
export { approvalDisplay, escapeHidden, MAX_DISPLAY_CHARS, requestLine } from './display.js';
export { permissionPlugin as default } from './plugin.js';
export { protectedPathReason, type ProtectedPathOptions } from './protected-write.js';
// The sandbox's policy lives in @conch/sandbox; these names are exported here as before.
export {
  compileHostPattern,
  HIDDEN_ENV,
  KEPT_ENV,
  PACKAGE_REGISTRIES,
  SECRET_HOME_PATHS,
  type HostPattern,
} from '@conch/sandbox';
