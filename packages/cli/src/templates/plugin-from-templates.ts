import { fileURLToPath } from 'node:url';
import {
  ConchError,
  type PluginDefinition,
  readRegularFileSync,
  toValidationIssues,
  type ValidationIssue,
} from '@conch/core';
import { ensureProcessManager } from '@conch/process';
import { z } from 'zod';
import { cliConfigSchema } from '../config.js';
import { type CommandTemplate, createCommandTool, type TemplateRunner } from './define-command-tool.js';
import { InvalidTemplateError } from './invalid-template-error.js';
import { utcpCliCallTemplateSchema, utcpManualSchema, utcpToolSchema } from './template-schema.js';

/** Config of a plugin built from templates. */
export const templatePluginConfigSchema = z.strictObject({
  variables: z
    .record(z.string(), z.string())
    .default({})
    .describe('values for ${NAME} references in the templates’ env_vars (secrets stay out of logs)'),
  variablesFromEnv: z
    .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name'))
    .default([])
    .describe('host environment variables the templates may use as ${NAME} (explicit: nothing else leaks)'),
  cli: cliConfigSchema
    .optional()
    .describe('cli settings for running the templates (output cap, background threshold, extraPaths, ...)'),
});

export type TemplatePluginConfig = z.output<typeof templatePluginConfigSchema>;

export interface TemplatePluginOptions {
  name: string;
  version: string;
  description?: string;
  tools: readonly CommandTemplate[];
  systemInstructions?: string;
}

/** Builds a plugin whose tools are command templates (checked now, so a bad template fails at load). */
export function buildTemplatePlugin(
  options: TemplatePluginOptions,
  runner: TemplateRunner,
): PluginDefinition<TemplatePluginConfig> {
  const tools = options.tools.map((t) => createCommandTool(t, runner));
  return {
    name: options.name,
    version: options.version,
    ...(options.description === undefined ? {} : { description: options.description }),
    configSchema: templatePluginConfigSchema,
    setup(ctx) {
      // Templates run through the registry's process manager, like cli_based_tool.
      ensureProcessManager(ctx);
      return {
        tools,
        ...(options.systemInstructions === undefined ? {} : { instructions: options.systemInstructions }),
      };
    },
  };
}

export interface UtcpManualOptions {
  /** Plugin name; default: the manual's `info.title` as kebab-case. */
  name?: string;
  /** Plugin version; default: the manual's `info.version`, `manual_version`, or 0.0.0. */
  version?: string;
  description?: string;
  /** Skip tools whose call template is not `cli` instead of failing. Default false. */
  skipUnsupported?: boolean;
  systemInstructions?: string;
}

/** The command templates of a UTCP manual's `cli` tools, unchanged (the manual is JSON as published). */
export function templatesFromUtcpManual(
  manual: unknown,
  options: { skipUnsupported?: boolean } = {},
): CommandTemplate[] {
  const parsed = utcpManualSchema.safeParse(manual);
  if (!parsed.success) {
    throw new InvalidTemplateError('UTCP manual', toValidationIssues(parsed.error, manual), parsed.error);
  }
  const templates: CommandTemplate[] = [];
  parsed.data.tools.forEach((raw, index) => {
    const where = `tools.${index}`;
    const tool = utcpToolSchema.safeParse(raw);
    if (!tool.success)
      throw new InvalidTemplateError(where, prefix(where, toValidationIssues(tool.error, raw)));
    const type = tool.data.tool_call_template.call_template_type;
    if (type !== 'cli') {
      if (options.skipUnsupported) return;
      throw new InvalidTemplateError(tool.data.name, [
        {
          path: `${where}.tool_call_template.call_template_type`,
          expected: "'cli' (conch runs command templates only; pass skipUnsupported to skip others)",
          received: JSON.stringify(type),
        },
      ]);
    }
    const call = utcpCliCallTemplateSchema.safeParse(tool.data.tool_call_template);
    if (!call.success) {
      throw new InvalidTemplateError(
        tool.data.name,
        prefix(`${where}.tool_call_template`, toValidationIssues(call.error, tool.data.tool_call_template)),
      );
    }
    templates.push({
      name: tool.data.name,
      description: tool.data.description,
      inputSchema: tool.data.inputs,
      commands: call.data.commands,
      ...(call.data.env_vars ? { env_vars: call.data.env_vars } : {}),
      ...(call.data.working_dir ? { working_dir: call.data.working_dir } : {}),
      ...(tool.data.annotations ? { annotations: tool.data.annotations } : {}),
      ...(call.data.timeout === undefined ? {} : { timeout: call.data.timeout }),
      ...(call.data.continue_on_error === undefined
        ? {}
        : { continue_on_error: call.data.continue_on_error }),
    });
  });
  return templates;
}

/** A plugin from a UTCP manual object: each `cli` tool becomes a command-template tool. */
export function buildUtcpManualPlugin(
  manual: unknown,
  options: UtcpManualOptions,
  runner: TemplateRunner,
): PluginDefinition<TemplatePluginConfig> {
  const templates = templatesFromUtcpManual(manual, options);
  const info = (manual as { info?: { title?: unknown; version?: unknown }; manual_version?: unknown }) ?? {};
  const title = typeof info.info?.title === 'string' ? info.info.title : undefined;
  const name = options.name ?? (title ? kebab(title) : undefined);
  if (!name) {
    throw new InvalidTemplateError('UTCP manual', [
      {
        path: 'info.title',
        expected: 'a title to name the plugin (or pass options.name)',
        received: 'nothing',
      },
    ]);
  }
  const version =
    options.version ??
    (typeof info.info?.version === 'string' ? info.info.version : undefined) ??
    (typeof info.manual_version === 'string' ? info.manual_version : undefined) ??
    '0.0.0';
  return buildTemplatePlugin(
    {
      name,
      version,
      tools: templates,
      ...(options.description === undefined ? {} : { description: options.description }),
      ...(options.systemInstructions === undefined ? {} : { systemInstructions: options.systemInstructions }),
    },
    runner,
  );
}

/** Reads a UTCP manual JSON file (a path or a `file:` URL, e.g. `new URL('./manual.json', import.meta.url)`). */
export function readUtcpManual(file: string | URL): unknown {
  const path = file instanceof URL ? fileURLToPath(file) : file;
  try {
    return JSON.parse(readRegularFileSync(path, { maxBytes: 64 * 1024 * 1024, encoding: 'utf8' })) as unknown;
  } catch (error) {
    throw new ConchError({
      code: 'MANUAL_UNREADABLE',
      message: `Cannot read UTCP manual ${path}: ${(error as Error).message}`,
      cause: error,
    });
  }
}

function prefix(where: string, issues: ValidationIssue[]): ValidationIssue[] {
  return issues.map((i) => ({ ...i, path: i.path === '(root)' ? where : `${where}.${i.path}` }));
}

function kebab(title: string): string {
  return title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .replace(/^[^a-z]+/, '');
}
