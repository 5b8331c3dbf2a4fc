import { ConchError } from './conch-error.js';

/**
 * A plugin declared a required service (`needs`) that no exposed plugin provides and that the
 * registry could not get by exposing a known plugin declaring it in `provides`.
 */
export class MissingDependencyError extends ConchError {
  readonly pluginName: string;
  /** The token's name, e.g. `conch.background.BackgroundService`. */
  readonly token: string;
  /** Known plugins that declare they provide the token (none when no known plugin does). */
  readonly candidates: readonly string[];

  constructor(pluginName: string, tokenName: string, candidates: readonly string[], reason?: string) {
    const could = candidates.length
      ? `Known plugins that provide it: ${candidates.map((c) => `'${c}'`).join(', ')}${reason ? ` (${reason})` : ''}; expose one first with registry.exposeTool(name, config).`
      : `No known plugin declares it in \`provides\`; register or discover a plugin that provides it, or declare the need { token, optional: true }.`;
    super({
      code: 'MISSING_DEPENDENCY',
      message: `Plugin '${pluginName}' needs the service '${tokenName}', which no exposed plugin provides. ${could}`,
    });
    this.name = 'MissingDependencyError';
    this.pluginName = pluginName;
    this.token = tokenName;
    this.candidates = candidates;
  }
}
