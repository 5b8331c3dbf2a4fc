import { ConchError } from './conch-error.js';

export type PluginLoadFailure = 'load-failed' | 'invalid-manifest' | 'duplicate-tool' | 'duplicate-plugin';

/** A discovered plugin that could not be loaded. Reported and skipped; the registry keeps going. */
export class PluginLoadError extends ConchError {
  readonly source: string;
  readonly failure: PluginLoadFailure;

  constructor(source: string, failure: PluginLoadFailure, detail: string, cause?: unknown) {
    super({
      code: `PLUGIN_${failure.toUpperCase().replace(/-/g, '_')}`,
      message: `Plugin at ${source} was skipped (${failure}): ${detail}`,
      cause,
    });
    this.name = 'PluginLoadError';
    this.source = source;
    this.failure = failure;
  }
}
