import type { UntrustedItem } from '../trust-store.js';
import { ConchError } from './conch-error.js';

/**
 * A plugin a config names is unknown while discovery left plugin packages unloaded because they are
 * new or changed since conch last ran in the workspace: the plugin is most likely one of them.
 */
export class UntrustedPluginError extends ConchError {
  readonly pluginName: string;
  readonly untrusted: readonly UntrustedItem[];

  constructor(pluginName: string, untrusted: readonly UntrustedItem[], cause?: unknown) {
    const list = untrusted
      .map((item) => `${item.package ?? item.path} (${item.path}): ${item.reason}`)
      .join('; ');
    super({
      code: 'PLUGIN_UNTRUSTED',
      message:
        `Unknown plugin '${pluginName}': discovery did not load ${untrusted.length} plugin ` +
        `package${untrusted.length === 1 ? '' : 's'} a sandboxed command may have written: ${list}. ` +
        `Review ${untrusted.length === 1 ? 'it' : 'them'}; if yours, accept ` +
        `(conch-mcp: --trust; a host: registry.trust()).`,
      cause,
    });
    this.name = 'UntrustedPluginError';
    this.pluginName = pluginName;
    this.untrusted = untrusted;
  }
}
