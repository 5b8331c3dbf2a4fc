import { ConchError, formatIssues, type ValidationIssue } from '@conch/core';

/** A command template (or a UTCP manual) that cannot become a tool: names the tool and the field. */
export class InvalidTemplateError extends ConchError {
  /** The tool name, or where in a manual (`tools.2`) when the name is unknown. */
  readonly tool: string;
  readonly issues: readonly ValidationIssue[];

  constructor(tool: string, issues: readonly ValidationIssue[], cause?: unknown) {
    super({
      code: 'INVALID_TEMPLATE',
      message: `Invalid command template '${tool}':\n  ${formatIssues(issues)}`,
      cause,
    });
    this.name = 'InvalidTemplateError';
    this.tool = tool;
    this.issues = issues;
  }
}
