import { ConchError } from './errors/conch-error.js';
import { createRequire } from 'node:module';
import { z } from 'zod';
import type * as ZodToJsonSchema from 'zod-to-json-schema';

const require = createRequire(import.meta.url);
/**
 * zod-to-json-schema (about 40 modules, ~40 ms of CPU at import) only converts zod 3 schemas:
 * loaded the first time one is converted, not with @conch/core.
 */
let zodToJsonSchema: typeof ZodToJsonSchema.zodToJsonSchema | undefined;

export type JsonSchema = Record<string, unknown>;
export type SchemaFormat = 'openai' | 'anthropic' | 'json-schema';

/**
 * Converts a tool's zod schema to a plain JSON Schema object (draft-07, inlined, no $schema).
 * zod 4 schemas go through zod's own converter (zod-to-json-schema only understands zod 3 and
 * returns an empty schema for zod 4); zod 3 schemas (`zod/v3`) go through zod-to-json-schema.
 */
export function toJsonSchema(schema: z.ZodType): JsonSchema {
  const json = (
    '_zod' in schema
      ? z.toJSONSchema(schema, { target: 'draft-7', io: 'input', unrepresentable: 'any' })
      : (zodToJsonSchema ??= (require('zod-to-json-schema') as typeof ZodToJsonSchema).zodToJsonSchema)(
          schema as never,
          { target: 'jsonSchema7', $refStrategy: 'none' },
        )
  ) as JsonSchema;
  const { $schema: _ignored, ...rest } = json;
  if (rest.type !== 'object') {
    throw new ConchError({
      code: 'INVALID_TOOL_DEFINITION',
      message: `a tool's inputSchema must describe an object; it describes ${JSON.stringify(rest.type)}`,
    });
  }
  return rest;
}

export interface ToolSchemaEntry {
  name: string;
  description: string;
  inputSchema: JsonSchema;
}

export function formatToolSchema(entry: ToolSchemaEntry, format: SchemaFormat): Record<string, unknown> {
  switch (format) {
    case 'openai':
      return {
        type: 'function',
        function: { name: entry.name, description: entry.description, parameters: entry.inputSchema },
      };
    case 'anthropic':
      return { name: entry.name, description: entry.description, input_schema: entry.inputSchema };
    case 'json-schema':
      return { name: entry.name, description: entry.description, inputSchema: entry.inputSchema };
  }
}
