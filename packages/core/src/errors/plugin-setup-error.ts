import { ConchError } from './conch-error.js';

/**
 * A plugin's `setup` failed while it was being exposed: it threw or rejected (`PLUGIN_SETUP_FAILED`,
 * the original as `cause`), or did not settle within the registry's `setupTimeoutMs`
 * (`PLUGIN_SETUP_TIMEOUT`). A ConchError the setup threw that does not name the plugin is wrapped
 * with its own `code` kept, so hosts matching on codes still match. The plugin is not exposed.
 */
export class PluginSetupError extends ConchError {
  readonly pluginName: string;

  constructor(pluginName: string, options: { code?: string; message: string; cause?: unknown }) {
    super({ code: options.code ?? 'PLUGIN_SETUP_FAILED', message: options.message, cause: options.cause });
    this.name = 'PluginSetupError';
    this.pluginName = pluginName;
  }

  /** The error a setup threw (or rejected with), as the error `expose()` rejects with. */
  static from(pluginName: string, error: unknown): ConchError {
    const named = `'${pluginName}'`;
    if (ConchError.isInstance(error)) {
      // conch's own errors raised through the plugin's context already name it (DUPLICATE_SERVICE).
      if (error.message.includes(named)) return error;
      return new PluginSetupError(pluginName, {
        code: error.code,
        message: `Plugin ${named} setup failed: ${error.message}`,
        cause: error,
      });
    }
    const detail =
      error instanceof Error
        ? `${error.name && error.name !== 'Error' ? `${error.name}: ` : ''}${error.message}`
        : `it threw a non-Error value: ${safeString(error)}`;
    return new PluginSetupError(pluginName, {
      message: `Plugin ${named} setup failed: ${detail}. The plugin was not exposed; the registry and its other plugins keep working`,
      cause: error,
    });
  }
}

function safeString(value: unknown): string {
  try {
    return typeof value === 'string' ? JSON.stringify(value) : String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}
