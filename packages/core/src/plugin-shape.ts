import { z } from 'zod';
import type { PluginDefinition, ToolDefinition } from './define.js';
import { isToken, type Token } from './token.js';

const zodLike = z.custom<z.ZodType>(
  (value) =>
    typeof value === 'object' && value !== null && typeof (value as z.ZodType).safeParse === 'function',
  { message: 'expected a zod schema (an object with safeParse)' },
);

const tokenLike = z.custom<Token<unknown>>(isToken, {
  message: "expected a token (token<T>('conch.<area>.<Name>'))",
});

export const TOOL_NAME_PATTERN = /^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/;
export const PLUGIN_NAME_PATTERN = /^[a-z][a-z0-9-]{0,63}$/;

export const toolShape = z.object({
  name: z.string().regex(TOOL_NAME_PATTERN, 'expected a tool name matching ^[a-zA-Z][a-zA-Z0-9_-]{0,63}$'),
  description: z.string().min(1, 'expected a non-empty description'),
  inputSchema: zodLike,
  execute: z.custom<ToolDefinition['execute']>((v) => typeof v === 'function', {
    message: 'expected a function',
  }),
  permission: z.custom((v) => typeof v === 'function', { message: 'expected a function' }).optional(),
  onExpose: z.custom((v) => typeof v === 'function', { message: 'expected a function' }).optional(),
});

export const pluginShape = z.object({
  name: z.string().regex(PLUGIN_NAME_PATTERN, 'expected a plugin name matching ^[a-z][a-z0-9-]{0,63}$'),
  version: z.string().min(1, 'expected a version string'),
  configSchema: zodLike.optional(),
  setup: z.custom((v) => typeof v === 'function', { message: 'expected a function' }).optional(),
  tools: z
    .union([
      z.array(toolShape),
      z.custom<(...a: unknown[]) => unknown>((v) => typeof v === 'function', {
        message: 'expected an array of tools or a function returning one',
      }),
    ])
    .optional(),
  provides: z.array(tokenLike).optional(),
  needs: z
    .record(
      z.string(),
      z.union([tokenLike, z.object({ token: tokenLike, optional: z.boolean().optional() })]),
      {
        message: 'expected { name: TOKEN | { token: TOKEN, optional?: boolean } }',
      },
    )
    .optional(),
  register: z.custom((v) => typeof v === 'function', { message: 'expected a function' }).optional(),
  dispose: z.custom((v) => typeof v === 'function', { message: 'expected a function' }).optional(),
});

const withSetup = pluginShape.refine((p) => p.setup !== undefined || p.tools !== undefined, {
  message: 'expected setup(ctx) => { tools } (or the deprecated tools)',
  path: ['setup'],
});

export type ShapeCheck = { ok: true; plugin: PluginDefinition } | { ok: false; detail: string };

/** Checks that a value is a plugin definition, naming the first bad field. */
export function checkPluginShape(value: unknown): ShapeCheck {
  const parsed = withSetup.safeParse(value);
  if (parsed.success) return { ok: true, plugin: value as PluginDefinition };
  const issue = parsed.error.issues[0];
  const path = issue?.path.map(String).join('.') || '(root)';
  return { ok: false, detail: `${path}: ${issue?.message ?? 'invalid'}` };
}
