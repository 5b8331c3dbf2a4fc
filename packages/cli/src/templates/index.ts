import type { PluginDefinition, ToolDefinition } from '@conch/core';
import { ensureProcessManager } from '@conch/process';
import { cliTemplateRunner } from './cli-runner.js';
import { type CommandTemplate, createCommandTool } from './define-command-tool.js';
import {
  buildTemplatePlugin,
  buildUtcpManualPlugin,
  readUtcpManual,
  type TemplatePluginConfig,
  type TemplatePluginOptions,
  type UtcpManualOptions,
} from './plugin-from-templates.js';

/**
 * A tool declared as data: `{ name, description, inputSchema, commands: [{ command,
 * append_to_final_output? }], env_vars?, working_dir? }`. It runs through the cli runner, so it
 * gets the same process handling, permission gate (the gate sees the steps with arguments
 * quoted) and background handoff as cli_based_tool.
 */
export function defineCommandTool(template: CommandTemplate): ToolDefinition {
  return {
    ...createCommandTool(template, cliTemplateRunner),
    // Whatever plugin returns this tool, the registry's process manager runs it: started here, at
    // expose time, so a hand-written plugin needs neither ensureProcessManager nor the cli plugin.
    onExpose: (ctx) => void ensureProcessManager(ctx),
  };
}

/** A plugin whose tools are command templates; config `{ variables?, cli? }`. */
export function definePluginFromTemplates(
  options: TemplatePluginOptions,
): PluginDefinition<TemplatePluginConfig> {
  return buildTemplatePlugin(options, cliTemplateRunner);
}

/** A plugin from a UTCP manual object: its `cli` tools load unchanged. */
export function pluginFromUtcpManual(
  manual: unknown,
  options: UtcpManualOptions = {},
): PluginDefinition<TemplatePluginConfig> {
  return buildUtcpManualPlugin(manual, options, cliTemplateRunner);
}

/** A plugin from a UTCP manual file, e.g. `loadUtcpManualPlugin(new URL('./manual.json', import.meta.url))`. */
export function loadUtcpManualPlugin(
  file: string | URL,
  options: UtcpManualOptions = {},
): PluginDefinition<TemplatePluginConfig> {
  return pluginFromUtcpManual(readUtcpManual(file), options);
}

export {
  createCommandTool,
  type CommandTemplate,
  type TemplateRunner,
  type TemplateRunRequest,
} from './define-command-tool.js';
export {
  readUtcpManual,
  templatePluginConfigSchema,
  templatesFromUtcpManual,
  type TemplatePluginConfig,
  type TemplatePluginOptions,
  type UtcpManualOptions,
} from './plugin-from-templates.js';
export { InvalidTemplateError } from './invalid-template-error.js';
export {
  commandStepSchema,
  templateFieldsSchema,
  utcpCliCallTemplateSchema,
  utcpManualSchema,
  utcpToolSchema,
  type CommandStep,
  type TemplateFields,
  type UtcpManual,
} from './template-schema.js';
export { compileTemplate, type CompiledTemplate } from './compile-template.js';
