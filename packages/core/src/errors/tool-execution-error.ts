import { ConchError } from './conch-error.js';

/** A tool (or its permission hook) threw something that is not a ConchError: a plugin bug. */
export class ToolExecutionError extends ConchError {
  readonly toolName: string;

  constructor(toolName: string, cause: unknown) {
    super({
      code: 'TOOL_FAILED',
      message: `Tool '${toolName}' failed: ${cause instanceof Error ? cause.message : String(cause)}`,
      cause,
    });
    this.name = 'ToolExecutionError';
    this.toolName = toolName;
  }
}
