import { z } from 'zod';

/** One step of a command template: a shell command line with placeholders. */
export const commandStepSchema = z.strictObject({
  command: z
    .string()
    .refine((s) => s.trim().length > 0, 'a non-empty shell command')
    .describe(
      'shell command; UTCP_ARG_<name>_UTCP_END takes argument <name>, $CMD_<i>_OUTPUT step i’s output',
    ),
  append_to_final_output: z
    .boolean()
    .nullish()
    .describe("include this step's stdout in the result; default true for the last step, false otherwise"),
});

export type CommandStep = z.input<typeof commandStepSchema>;

const TOOL_NAME = /^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/;

const annotationsSchema = z.strictObject({
  title: z.string().optional(),
  readOnlyHint: z.boolean().optional(),
  destructiveHint: z.boolean().optional(),
  idempotentHint: z.boolean().optional(),
  openWorldHint: z.boolean().optional(),
});

/** The fields of a command template besides its input schema (shared by the TS and JSON forms). */
export const templateFieldsSchema = z.strictObject({
  name: z.string().regex(TOOL_NAME, 'a tool name matching ^[a-zA-Z][a-zA-Z0-9_-]{0,63}$'),
  description: z.string(),
  commands: z.array(commandStepSchema).min(1, 'at least one command step'),
  env_vars: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name'), z.string())
    .nullish()
    .describe('environment of the steps; values may use ${HOST_VAR} (from the plugin config `variables`)'),
  working_dir: z.string().nullish().describe("directory the steps start in, relative to the registry's cwd"),
  annotations: annotationsSchema.optional(),
  timeout: z.number().positive().optional().describe('seconds before the whole script is stopped'),
  continue_on_error: z
    .boolean()
    .optional()
    .describe('run later steps after a step exits non-zero (UTCP behaviour); default false: stop there'),
});

export type TemplateFields = z.input<typeof templateFieldsSchema>;

const jsonSchemaObject = z.looseObject({}).describe('a JSON Schema object');

/** A UTCP `cli` call template (UTCP 1.x), plus conch's optional `timeout` and `continue_on_error`. */
export const utcpCliCallTemplateSchema = z.looseObject({
  call_template_type: z.literal('cli'),
  name: z.string().nullish(),
  commands: z.array(commandStepSchema).min(1, 'at least one command step'),
  env_vars: templateFieldsSchema.shape.env_vars,
  working_dir: z.string().nullish(),
  auth: z.null().optional(),
  timeout: templateFieldsSchema.shape.timeout,
  continue_on_error: templateFieldsSchema.shape.continue_on_error,
});

/** A tool of a UTCP manual; its call template is checked separately (only `cli` is runnable here). */
export const utcpToolSchema = z.looseObject({
  name: z.string().min(1),
  description: z.string().default(''),
  inputs: jsonSchemaObject.default({ type: 'object', properties: {} }),
  outputs: z.unknown().optional(),
  tags: z.array(z.string()).optional(),
  annotations: annotationsSchema.optional(),
  tool_call_template: z.looseObject({ call_template_type: z.string() }),
});

/** A UTCP manual (`{ utcp_version, manual_version, info?, tools }`). Unknown top-level keys are kept. */
export const utcpManualSchema = z.looseObject({
  utcp_version: z.string().optional(),
  manual_version: z.string().optional(),
  info: z.looseObject({ title: z.string().optional(), version: z.string().optional() }).optional(),
  tools: z.array(z.unknown()),
});

export type UtcpManual = z.input<typeof utcpManualSchema>;
