import { ConchError } from './conch-error.js';
import { formatIssues, type ValidationIssue } from './validation-issue.js';

export class InvalidArgumentsError extends ConchError {
  readonly toolName: string;
  readonly issues: readonly ValidationIssue[];

  constructor(toolName: string, issues: readonly ValidationIssue[], cause?: unknown) {
    super({
      code: 'INVALID_ARGUMENTS',
      message: `Invalid arguments for tool '${toolName}':\n  ${formatIssues(issues)}`,
      cause,
    });
    this.name = 'InvalidArgumentsError';
    this.toolName = toolName;
    this.issues = issues;
  }
}
