import { ConchError } from './conch-error.js';

export class DuplicateToolError extends ConchError {
  readonly toolName: string;
  readonly existingPlugin: string;
  readonly newPlugin: string;

  constructor(toolName: string, existingPlugin: string, newPlugin: string) {
    super({
      code: 'DUPLICATE_TOOL',
      message: `Tool '${toolName}' from plugin '${newPlugin}' is already provided by plugin '${existingPlugin}'. Tool names must be unique; rename one.`,
    });
    this.name = 'DuplicateToolError';
    this.toolName = toolName;
    this.existingPlugin = existingPlugin;
    this.newPlugin = newPlugin;
  }
}
