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
export { compileHostPattern, PACKAGE_REGISTRIES, type HostPattern } from './network-rules.js';
export { HIDDEN_ENV, KEPT_ENV, SECRET_HOME_PATHS } from './kernel-policy.js';
