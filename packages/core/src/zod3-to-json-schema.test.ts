// A zod 3 tool schema keeps converting without zod-to-json-schema: the same JSON Schema it produced, and a named error for kinds it does not cover.
import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { afterEach, describe, expect, test } from 'vitest';
import { z as z3 } from 'zod/v3';
import { definePlugin, type ToolDefinition } from './define.js';
import { ConchError } from './errors/conch-error.js';
import { PluginRegistry } from './registry.js';
import { toJsonSchema } from './schema.js';
import { zod3Schemas } from './test-support/zod3-schemas.js';

/** What zod-to-json-schema 3.25.2 produced for zod3Schemas, captured before it was removed. */
const captured = JSON.parse(
  readFileSync(new URL('./test-support/zod3-json-schemas.json', import.meta.url), 'utf8'),
) as Record<string, Record<string, unknown>>;

const convert = (schema: z3.ZodTypeAny) => toJsonSchema(schema as never);

function thrown(fn: () => unknown): ConchError {
  try {
    fn();
  } catch (error) {
    if (ConchError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a throw');
}

const ZOD4_HINT = "use zod 4 (import from 'zod' 4.x or 'zod/v4')";

describe('zod 3 schemas convert as zod-to-json-schema converted them', () => {
  test('every captured schema has a case and every case a capture', () => {
    expect(Object.keys(zod3Schemas).sort()).toEqual(Object.keys(captured).sort());
  });

  const ajv = new Ajv({ strict: false });
  test.each(Object.keys(zod3Schemas))('%s', (name) => {
    const json = convert(zod3Schemas[name]!());
    expect(json).toStrictEqual(captured[name]);
    // Same keys in the same order: what a client prints or hashes does not change either.
    expect(JSON.stringify(json)).toBe(JSON.stringify(captured[name]));
    expect(ajv.validateSchema(json)).toBe(true);
  });
});

describe('zod 3 schemas validate what the zod schema accepts', () => {
  const ajv = new Ajv({ strict: false, validateFormats: false });
  test.each([
    ['echo', { text: 'hi' }, true],
    ['echo', { text: 'hi', times: 2 }, true],
    ['echo', { text: 'hi', times: 0 }, false],
    ['echo', { text: 'hi', extra: 1 }, false],
    ['cli_like', { command: 'ls', timeout: 600, sandbox: 'off' }, true],
    ['cli_like', { command: '' }, false],
    ['cli_like', { command: 'ls', timeout: 0 }, false],
    ['cli_like', { command: 'ls', sandbox: 'maybe' }, false],
    [
      'unions',
      {
        stringOrNumber: 1,
        withNull: null,
        repeated: 'a',
        checked: 'x',
        literals: null,
        literalsDescribed: 'b',
        enums: 'c',
        mixed: { path: '/' },
        or: ['a'],
        tagged: { type: 'text', text: 't' },
      },
      true,
    ],
    [
      'unions',
      {
        stringOrNumber: true,
        withNull: null,
        repeated: 'a',
        checked: 'x',
        literals: 'a',
        literalsDescribed: 'b',
        enums: 'c',
        mixed: 'x',
        or: 'a',
        tagged: { type: 'text', text: 't' },
      },
      false,
    ],
    [
      'records',
      {
        env: { A: 'b' },
        counts: { n: 1 },
        keyed: { AB_C: 'x' },
        byEnum: { a: true },
        objects: {},
        anyValue: { x: [1] },
      },
      true,
    ],
    [
      'records',
      {
        env: { A: 'b' },
        counts: { n: 1 },
        keyed: { lower: 'x' },
        byEnum: { a: true },
        objects: {},
        anyValue: {},
      },
      false,
    ],
    [
      'records',
      { env: { A: 'b' }, counts: { n: 1 }, keyed: {}, byEnum: { c: true }, objects: {}, anyValue: {} },
      false,
    ],
  ] as const)('%s accepts %j: %s', (name, value, valid) => {
    const schema = zod3Schemas[name]!();
    expect(schema.safeParse(value).success).toBe(valid);
    expect(ajv.validate(convert(schema), value)).toBe(valid);
  });
});

describe('fresh zod 3 schemas', () => {
  test('a nested tool input with every supported kind', () => {
    const schema = z3
      .object({
        query: z3.string().min(1).describe('what to search for'),
        filters: z3
          .object({
            since: z3.string().datetime().optional(),
            kinds: z3.array(z3.enum(['file', 'dir'])).nonempty(),
            depth: z3.number().int().nonnegative().nullable(),
            labels: z3.record(z3.string(), z3.union([z3.string(), z3.boolean()])),
            exact: z3.literal(true).default(true),
          })
          .strict()
          .optional(),
      })
      .strict();
    expect(convert(schema)).toStrictEqual({
      type: 'object',
      properties: {
        query: { type: 'string', minLength: 1, description: 'what to search for' },
        filters: {
          type: 'object',
          properties: {
            since: { type: 'string', format: 'date-time' },
            kinds: { type: 'array', items: { type: 'string', enum: ['file', 'dir'] }, minItems: 1 },
            depth: { anyOf: [{ type: 'integer', minimum: 0 }, { type: 'null' }] },
            labels: { type: 'object', additionalProperties: { type: ['string', 'boolean'] } },
            exact: { type: 'boolean', const: true, default: true },
          },
          required: ['kinds', 'depth', 'labels'],
          additionalProperties: false,
        },
      },
      required: ['query'],
      additionalProperties: false,
    });
  });

  test('a refined top-level object, a passthrough object and a described array of objects', () => {
    const schema = z3
      .object({
        items: z3
          .array(z3.object({ id: z3.string().uuid(), meta: z3.object({}).passthrough() }))
          .max(10)
          .describe('at most ten'),
      })
      .refine((value) => value.items.length > 0, 'needs an item');
    expect(convert(schema)).toStrictEqual({
      type: 'object',
      properties: {
        items: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              id: { type: 'string', format: 'uuid' },
              meta: { type: 'object', properties: {}, additionalProperties: true },
            },
            required: ['id', 'meta'],
            additionalProperties: false,
          },
          maxItems: 10,
          description: 'at most ten',
        },
      },
      required: ['items'],
      additionalProperties: false,
    });
  });

  test('a null literal is the null type (zod-to-json-schema said object)', () => {
    expect(convert(z3.object({ none: z3.literal(null) })).properties).toStrictEqual({
      none: { type: 'null' },
    });
  });

  test('startsWith / endsWith / includes escape regex syntax only, valid with the u flag', () => {
    const json = convert(
      z3.object({
        a: z3.string().startsWith('a.b-w'),
        b: z3.string().endsWith('(x)?'),
        c: z3.string().includes('1+1=2 /'),
      }),
    );
    const properties = json.properties as Record<string, { pattern: string }>;
    expect(properties.a?.pattern).toBe('^a\\.b-w');
    expect(properties.b?.pattern).toBe('\\(x\\)\\?$');
    expect(properties.c?.pattern).toBe('1\\+1=2 \\/');
    const ajv = new Ajv({ strict: false, unicodeRegExp: true });
    const validate = ajv.compile(json);
    expect(validate({ a: 'a.b-wow', b: 'y(x)?', c: '1+1=2 / yes' })).toBe(true);
    expect(validate({ a: 'axb-w', b: 'y(x)?', c: '1+1=2 / yes' })).toBe(false);
  });

  test('a property called __proto__ is a property', () => {
    const json = convert(z3.object({ ['__proto__']: z3.string() }));
    expect(Object.keys(json.properties as object)).toEqual(['__proto__']);
    expect(json.required).toEqual(['__proto__']);
  });

  test('the same sub-schema used twice is inlined twice', () => {
    const id = z3.string().uuid().describe('an id');
    const json = convert(z3.object({ a: id, b: z3.array(id) }));
    expect(json.properties).toStrictEqual({
      a: { type: 'string', format: 'uuid', description: 'an id' },
      b: { type: 'array', items: { type: 'string', format: 'uuid', description: 'an id' } },
    });
  });
});

describe('zod 3 kinds it does not convert are named errors', () => {
  test.each([
    ['a date', z3.object({ when: z3.date() }), "field 'when' is a zod 3 ZodDate"],
    ['a bigint', z3.object({ size: z3.bigint() }), "field 'size' is a zod 3 ZodBigInt"],
    [
      'a tuple',
      z3.object({ pair: z3.tuple([z3.string(), z3.number()]) }),
      "field 'pair' is a zod 3 ZodTuple",
    ],
    [
      'an intersection',
      z3.object({ both: z3.object({ a: z3.string() }).and(z3.object({ b: z3.string() })) }),
      "field 'both' is a zod 3 ZodIntersection",
    ],
    ['a pipe', z3.object({ n: z3.string().pipe(z3.coerce.number()) }), "field 'n' is a zod 3 ZodPipeline"],
    ['a map', z3.object({ m: z3.map(z3.string(), z3.string()) }), "field 'm' is a zod 3 ZodMap"],
    ['a set', z3.object({ s: z3.set(z3.string()) }), "field 's' is a zod 3 ZodSet"],
    ['a function', z3.object({ f: z3.function() }), "field 'f' is a zod 3 ZodFunction"],
    [
      'a nested date',
      z3.object({ a: z3.object({ b: z3.date().optional() }) }),
      "field 'a.b' is a zod 3 ZodDate",
    ],
    ['an array item', z3.object({ list: z3.array(z3.date()) }), "field 'list.*' is a zod 3 ZodDate"],
    ['a record value', z3.object({ env: z3.record(z3.bigint()) }), "field 'env.*' is a zod 3 ZodBigInt"],
    [
      'a union option',
      z3.object({ at: z3.union([z3.string(), z3.date()]) }),
      "field 'at' is a zod 3 ZodDate",
    ],
    [
      'a string check without a JSON Schema format',
      z3.object({ id: z3.string().cuid() }),
      "field 'id' is a zod 3 ZodString with the check .cuid()",
    ],
    ['a bigint literal', z3.object({ n: z3.literal(1n) }), "field 'n' is a zod 3 ZodLiteral of a bigint"],
    ['a top-level date', z3.date(), 'the schema is a zod 3 ZodDate'],
  ])('%s', (_label, schema, message) => {
    const error = thrown(() => convert(schema));
    expect(error.code).toBe('INVALID_TOOL_DEFINITION');
    expect(error.message).toContain(message);
    expect(error.message).toContain(ZOD4_HINT);
  });

  test('a recursive (lazy) schema is refused, not looped over', () => {
    type Node = { name: string; children: Node[] };
    const node: z3.ZodType<Node> = z3.lazy(() => z3.object({ name: z3.string(), children: z3.array(node) }));
    const error = thrown(() => convert(z3.object({ root: node })));
    expect(error.message).toContain("field 'root' is a zod 3 ZodLazy");
  });

  test('a schema that contains itself is refused, not looped over', () => {
    const shape: Record<string, unknown> = {};
    const self = z3.object(shape as never);
    shape.self = self;
    const error = thrown(() => convert(self));
    expect(error.message).toContain("field 'self' is a zod 3 ZodObject that contains itself");
  });

  test('a top-level zod 3 non-object keeps the old message', () => {
    expect(thrown(() => convert(z3.string())).message).toContain(
      'a tool\'s inputSchema must describe an object; it describes "string"',
    );
  });

  test('something that is neither zod 4 nor zod 3 is named', () => {
    const error = thrown(() => toJsonSchema({ safeParse: () => ({ success: true }) } as never));
    expect(error.code).toBe('INVALID_TOOL_DEFINITION');
    expect(error.message).toContain('must be a zod schema');
  });
});

describe('a zod 3 tool through the registry', () => {
  const registries: PluginRegistry[] = [];
  afterEach(async () => {
    await Promise.all(registries.splice(0).map((r) => r.dispose()));
  });
  const pluginWith = (tool: Record<string, unknown>) =>
    definePlugin({
      name: 'legacy',
      version: '1.0.0',
      setup: () => ({ tools: [tool as unknown as ToolDefinition] }),
    });

  test('exposes, lists the converted schema and executes with zod 3 validation', async () => {
    const registry = new PluginRegistry({
      plugins: [
        pluginWith({
          name: 'greet',
          description: 'greets',
          inputSchema: z3.object({ name: z3.string().min(1), loud: z3.boolean().default(false) }).strict(),
          execute: (args: { name: string; loud: boolean }) => ({
            text: args.loud ? `HELLO ${args.name.toUpperCase()}` : `hello ${args.name}`,
          }),
        }),
      ],
    });
    registries.push(registry);
    await registry.exposeTool('legacy');
    expect(registry.toolSchemas('anthropic')).toStrictEqual([
      {
        name: 'greet',
        description: 'greets',
        input_schema: {
          type: 'object',
          properties: { name: { type: 'string', minLength: 1 }, loud: { type: 'boolean', default: false } },
          required: ['name'],
          additionalProperties: false,
        },
      },
    ]);
    expect(await registry.execute('greet', { name: 'ada' })).toMatchObject({ text: 'hello ada' });
    const error = await registry.execute('greet', { name: '' }).then(
      () => undefined,
      (e: unknown) => e as ConchError,
    );
    expect(error?.code).toBe('INVALID_ARGUMENTS');
    expect(error?.message).toContain('name');
  });

  test('an unsupported zod 3 kind fails expose naming the plugin, the tool, the field and the fix', async () => {
    const registry = new PluginRegistry({
      plugins: [
        pluginWith({
          name: 'schedule',
          description: 'schedules',
          inputSchema: z3.object({ at: z3.date() }),
          execute: () => ({}),
        }),
      ],
    });
    registries.push(registry);
    const error = await registry.exposeTool('legacy').then(
      () => undefined,
      (e: unknown) => e as ConchError,
    );
    expect(error?.code).toBe('INVALID_PLUGIN');
    expect(error?.message).toContain("plugin 'legacy' tool 'schedule'");
    expect(error?.message).toContain("field 'at' is a zod 3 ZodDate");
    expect(error?.message).toContain(ZOD4_HINT);
    expect(registry.isExposed('legacy')).toBe(false);
  });
});
