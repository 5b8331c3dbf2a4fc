import { ConchError } from './conch-error.js';

export class NoSuchToolError extends ConchError {
  readonly toolName: string;
  readonly availableTools: readonly string[];

  constructor(toolName: string, availableTools: readonly string[]) {
    super({
      code: 'NO_SUCH_TOOL',
      message: `Unknown tool '${toolName}'. Exposed tools: ${availableTools.length ? availableTools.join(', ') : '(none: expose a plugin with registry.exposeTool(name, config))'}.`,
    });
    this.name = 'NoSuchToolError';
    this.toolName = toolName;
    this.availableTools = availableTools;
  }
}
