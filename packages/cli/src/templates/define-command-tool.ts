import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  BACKGROUND_SERVICE,
  type JsonSchema,
  toJsonSchema,
  toValidationIssues,
  type ToolCallContext,
  type ToolDefinition,
  type ToolResult,
  removeSync,
} from '@conch/core';
import { z } from 'zod';
import { compileTemplate, TEMPLATE_DIR_VARIABLE } from './compile-template.js';
import { resolveEnvVars } from './host-variables.js';
import { InvalidTemplateError } from './invalid-template-error.js';
import { templateFieldsSchema, type TemplateFields } from './template-schema.js';

/** A tool declared as data: steps of shell commands with argument placeholders. */
export interface CommandTemplate extends TemplateFields {
  /** zod schema of the arguments, or a JSON Schema object (as in a UTCP manual's `inputs`). */
  inputSchema: z.ZodType | JsonSchema;
}

/** What a template asks the process layer to run (the cli plugin's runner does it). */
export interface TemplateRunRequest {
  /** The composed script; arguments appear only as `"${CONCH_ARG_<name>}"` references. */
  command: string;
  cwd: string;
  /** Added to the process environment: resolved `env_vars` and the argument variables. Never log. */
  env: Record<string, string>;
  timeoutSec?: number;
  /** How task lists and events show the call: the steps with the arguments inlined (quoted). */
  label: string;
}

export type TemplateRunner = (ctx: ToolCallContext, request: TemplateRunRequest) => Promise<ToolResult>;

/** Plugin config keys a template tool reads (see `templatePluginConfigSchema`). */
interface TemplateConfig {
  variables?: Record<string, string>;
  variablesFromEnv?: readonly string[];
}

/** The host variables a call may use: the named host environment variables, then `variables`. */
function hostVariables(config: TemplateConfig | undefined): Record<string, string> {
  const fromEnv: Record<string, string> = {};
  for (const name of config?.variablesFromEnv ?? []) {
    const value = process.env[name];
    if (value !== undefined) fromEnv[name] = value;
  }
  return { ...fromEnv, ...config?.variables };
}

/**
 * Turns a command template into a tool. Arguments are validated by the input schema, then reach
 * the shell only through environment variables (`CONCH_ARG_<name>`), so `x; touch /tmp/pwned`,
 * `$(...)` or a newline stay literal text. The permission gate sees the steps with each argument
 * as a shell-quoted literal (equivalent to what runs, readable by a human).
 */
export function createCommandTool(template: CommandTemplate, runner: TemplateRunner): ToolDefinition {
  const label = typeof template?.name === 'string' ? template.name : '(unnamed)';
  const { inputSchema, ...rest } = template ?? ({} as CommandTemplate);
  const fields = templateFieldsSchema.safeParse(rest);
  if (!fields.success)
    throw new InvalidTemplateError(label, toValidationIssues(fields.error, rest), fields.error);
  const spec = fields.data;
  const schema = toZod(label, inputSchema);
  let json: JsonSchema;
  try {
    json = toJsonSchema(schema);
  } catch (error) {
    throw new InvalidTemplateError(label, [
      { path: 'inputSchema', expected: 'a schema of an object', received: (error as Error).message },
    ]);
  }
  const properties =
    json.properties && typeof json.properties === 'object' ? Object.keys(json.properties) : [];
  const compiled = compileTemplate(spec.name, spec.commands, {
    continueOnError: spec.continue_on_error ?? false,
    ...(json.properties && typeof json.properties === 'object' ? { knownArguments: properties } : {}),
  });

  return {
    name: spec.name,
    description: spec.description,
    inputSchema: schema,
    ...(spec.annotations ? { annotations: spec.annotations } : {}),
    permission: (args: Record<string, unknown>, ctx: ToolCallContext) => ({
      kind: 'command',
      tool: spec.name,
      command: compiled.display(args),
      cwd: resolve(ctx.env.cwd, spec.working_dir ?? '.'),
    }),
    async execute(args: Record<string, unknown>, ctx: ToolCallContext<TemplateConfig>) {
      const resolved = resolveEnvVars(spec.env_vars, hostVariables(ctx.config), args);
      if (resolved.missing.length > 0) {
        const list = resolved.missing.map((m) => `env_vars.${m.variable} uses ${m.reference}`).join(', ');
        return {
          error: `${list}, which the host did not supply: add ${resolved.missing.map((m) => m.reference.slice(2, -1)).join(', ')} to plugins.${ctx.pluginName}.variables (or name it in variablesFromEnv)`,
          returncode: -1,
        };
      }
      const argEnv = compiled.argumentEnv(args);
      for (const [variable, value] of Object.entries(argEnv)) {
        if (value.includes('\0')) {
          return {
            error: `argument for ${variable} contains a NUL byte, which cannot be passed to a command`,
            returncode: -1,
          };
        }
      }
      const env: Record<string, string> = { ...resolved.env, ...argEnv };
      let dir: string | undefined;
      if (compiled.needsDir) {
        dir = join(ctx.env.tempDir(), `template-${ctx.callId.replace(/[^A-Za-z0-9_-]/g, '_')}`);
        mkdirSync(dir, { recursive: true });
        env[TEMPLATE_DIR_VARIABLE] = dir;
      }
      const request: TemplateRunRequest = {
        command: compiled.script,
        label: compiled.display(args),
        cwd: resolve(ctx.env.cwd, spec.working_dir ?? '.'),
        env,
        ...(spec.timeout === undefined ? {} : { timeoutSec: spec.timeout }),
      };
      let result: ToolResult;
      try {
        result = await runner(ctx, request);
      } catch (error) {
        if (dir) removeDir(dir);
        throw error;
      }
      if (dir) {
        // The run continues as a task (backgrounded), or what it left running does (leftovers).
        const taskId = result.background_task_id ?? result.left_running_task_id;
        if (typeof taskId === 'string') removeWhenTaskEnds(ctx, taskId, dir);
        else removeDir(dir);
      }
      return result;
    },
  };
}

function removeDir(dir: string): void {
  removeSync(dir, { recursive: true, force: true });
}

/**
 * A backgrounded script still needs its directory: remove it when the task ends. (It lives in the
 * registry's temp dir, which dispose removes anyway.)
 */
function removeWhenTaskEnds(ctx: ToolCallContext, taskId: string, dir: string): void {
  const background = ctx.resolveOptional(BACKGROUND_SERVICE);
  if (!background) return;
  void background.whenFinished(taskId).then(() => removeDir(dir));
}

function toZod(tool: string, schema: unknown): z.ZodType {
  if (schema && typeof schema === 'object' && '_zod' in schema) return schema as z.ZodType;
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) {
    throw new InvalidTemplateError(tool, [
      {
        path: 'inputSchema',
        expected: 'a zod schema or a JSON Schema object',
        received: JSON.stringify(schema) ?? 'nothing',
      },
    ]);
  }
  try {
    return z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
  } catch (error) {
    throw new InvalidTemplateError(tool, [
      { path: 'inputSchema', expected: 'a JSON Schema zod can read', received: (error as Error).message },
    ]);
  }
}
