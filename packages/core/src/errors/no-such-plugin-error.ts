import { ConchError } from './conch-error.js';

export class NoSuchPluginError extends ConchError {
  readonly pluginName: string;
  readonly availablePlugins: readonly string[];

  constructor(pluginName: string, availablePlugins: readonly string[]) {
    super({
      code: 'NO_SUCH_PLUGIN',
      message:
        `Unknown plugin '${pluginName}'. Known plugins: ${availablePlugins.length ? availablePlugins.join(', ') : '(none)'}. ` +
        `Did you call registry.discover() or pass the plugin in { plugins: [...] }?`,
    });
    this.name = 'NoSuchPluginError';
    this.pluginName = pluginName;
    this.availablePlugins = availablePlugins;
  }
}
