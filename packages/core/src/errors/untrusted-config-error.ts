import type { UntrustedItem } from '../trust-store.js';
import { ConchError } from './conch-error.js';

/**
 * A config file that is new, changed or removed since conch last ran in the workspace holding it:
 * a sandboxed command there may have written it, so conch does not run with it until a human
 * accepts it.
 */
export class UntrustedConfigError extends ConchError {
  readonly file: string;
  readonly reason: UntrustedItem['reason'];
  readonly workspace: string;

  constructor(item: UntrustedItem, workspace: string) {
    super({
      code: 'CONFIG_UNTRUSTED',
      message:
        `The config file ${item.path} is ${item.reason} (${workspace}); a sandboxed command may have ` +
        `written it, so conch does not run with it. Review it; if it is yours, accept it ` +
        `(conch-mcp: --trust; a host: checkConfigFile(file, { accept: true })).`,
    });
    this.name = 'UntrustedConfigError';
    this.file = item.path;
    this.reason = item.reason;
    this.workspace = workspace;
  }
}
