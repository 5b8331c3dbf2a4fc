import { ConchError } from './conch-error.js';

/** The caller's AbortSignal fired before or during a tool call. */
export class AbortedError extends ConchError {
  constructor(what: string, cause?: unknown) {
    super({ code: 'ABORTED', message: `${what} was aborted`, cause });
    this.name = 'AbortedError';
  }
}

/** The registry was used after dispose(). */
export class RegistryDisposedError extends ConchError {
  constructor(operation: string) {
    super({
      code: 'REGISTRY_DISPOSED',
      message: `Cannot ${operation}: this PluginRegistry has been disposed. Create a new PluginRegistry.`,
    });
    this.name = 'RegistryDisposedError';
  }
}

/** A tool needs a permission decision but no gate is configured. */
export class PermissionGateMissingError extends ConchError {
  constructor(toolName: string) {
    super({
      code: 'PERMISSION_GATE_MISSING',
      message:
        `Tool '${toolName}' runs commands and needs a permission decision, but no permission gate is configured. ` +
        `Expose one with registry.exposeTool('permission', { rules: { allow: ['git status'] }, approve }) ` +
        `or, to allow everything but the built-in safety denials, registry.exposeTool('permission', { mode: 'acceptAll' }).`,
    });
    this.name = 'PermissionGateMissingError';
  }
}

/** A plugin was exposed twice. */
export class PluginAlreadyExposedError extends ConchError {
  constructor(pluginName: string) {
    super({
      code: 'PLUGIN_ALREADY_EXPOSED',
      message: `Plugin '${pluginName}' is already exposed on this registry. Expose each plugin once; to change config, create a new registry.`,
    });
    this.name = 'PluginAlreadyExposedError';
  }
}

/** A plugin definition handed to the registry does not have the required shape. */
export class InvalidPluginError extends ConchError {
  constructor(detail: string) {
    super({ code: 'INVALID_PLUGIN', message: `Invalid plugin definition: ${detail}` });
    this.name = 'InvalidPluginError';
  }
}
