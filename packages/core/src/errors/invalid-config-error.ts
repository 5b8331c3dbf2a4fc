import { ConchError } from './conch-error.js';
import { formatIssues, type ValidationIssue } from './validation-issue.js';

export class InvalidConfigError extends ConchError {
  readonly pluginName: string;
  readonly issues: readonly ValidationIssue[];

  constructor(pluginName: string, issues: readonly ValidationIssue[], cause?: unknown) {
    super({
      code: 'INVALID_CONFIG',
      message: `Invalid config for plugin '${pluginName}':\n  ${formatIssues(issues)}`,
      cause,
    });
    this.name = 'InvalidConfigError';
    this.pluginName = pluginName;
    this.issues = issues;
  }
}
