import { ConchError } from './conch-error.js';

export class NoSuchToolError extends ConchError {
  readonly toolName: string;
  readonly availableTools: readonly string[];

  constructor(toolName: string, availableTools: readonly string[]) {
    super({
      code: 'NO_SUCH_TOOL',
      message: `Unknown tool ${shownName(toolName)}. Exposed tools: ${availableTools.length ? availableTools.join(', ') : '(none: expose a plugin with registry.exposeTool(name, config))'}.`,
    });
    this.name = 'NoSuchToolError';
    this.toolName = toolName;
    this.availableTools = availableTools;
  }
}

/** Tool names have at most 64 characters: a longer one is named by its start and its length. */
function shownName(name: string): string {
  const text = String(name);
  return text.length > 80 ? `'${text.slice(0, 64)}…' (a name of ${text.length} characters)` : `'${text}'`;
}
