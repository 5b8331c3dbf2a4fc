import { ConchError } from './errors/conch-error.js';
import { z } from 'zod';
import { isZod3Schema, zod3ToJsonSchema } from './zod3-to-json-schema.js';

export type JsonSchema = Record<string, unknown>;
export type SchemaFormat = 'openai' | 'anthropic' | 'json-schema';

/**
 * Converts a tool's zod schema to a plain JSON Schema object (draft-07, inlined, no $schema).
 * zod 4 schemas go through zod's own converter; zod 3 schemas (`zod/v3`, or the zod 3.x package)
 * through conch's small converter of the kinds tool inputs use (zod3-to-json-schema.ts: the
 * zod-to-json-schema package it replaces is deprecated), which names the field of any other kind.
 */
export function toJsonSchema(schema: z.ZodType): JsonSchema {
  let json: JsonSchema;
  if ('_zod' in schema) {
    json = z.toJSONSchema(schema, { target: 'draft-7', io: 'input', unrepresentable: 'any' }) as JsonSchema;
  } else if (isZod3Schema(schema)) {
    json = zod3ToJsonSchema(schema);
  } else {
    throw new ConchError({
      code: 'INVALID_TOOL_DEFINITION',
      message: "a tool's inputSchema must be a zod schema (zod 4 from 'zod', or zod 3 from 'zod/v3')",
    });
  }
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
