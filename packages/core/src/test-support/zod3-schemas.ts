// zod 3 (`zod/v3`) tool input schemas whose JSON Schema was captured from zod-to-json-schema 3.25.2
// (target jsonSchema7, $refStrategy none, $schema removed) before conch dropped it: see
// zod3-json-schemas.json and zod3-to-json-schema.test.ts.
import { z } from 'zod/v3';

enum Colour {
  Red = 'red',
  Green = 'green',
}
enum Level {
  Low,
  High,
}

export const zod3Schemas: Record<string, () => z.ZodTypeAny> = {
  // The schemas of the existing core tests, written in zod 3.
  echo: () =>
    z
      .object({
        text: z.string().describe('what to repeat'),
        times: z.number().int().min(1).default(1),
      })
      .strict(),
  sleep: () => z.object({ ms: z.number().int().min(0) }).strict(),
  run_thing: () => z.object({ command: z.string() }).strict(),
  put: () =>
    z
      .object({
        path: z.string().optional(),
        content: z.string().optional(),
        note: z.string().optional(),
        env: z.record(z.string(), z.string()).optional(),
        args: z.array(z.string()).optional(),
      })
      .strict(),
  fails_loudly: () => z.object({ text: z.string(), how: z.enum(['result', 'throw']) }).strict(),
  describe_call: () =>
    z.object({ command: z.string(), background: z.boolean().default(false), count: z.number().optional() }),
  empty: () => z.object({}),
  empty_strict: () => z.object({}).strict(),
  shell: () =>
    z
      .object({
        command: z.string(),
        session_id: z.number().optional(),
        timeout: z.number().optional(),
      })
      .strict(),

  // A tool like cli_based_tool.
  cli_like: () =>
    z
      .object({
        command: z.string().min(1).describe('the command line to run'),
        args: z.array(z.string()).optional().describe('argv after the command'),
        cwd: z.string().optional(),
        timeout: z.number().int().positive().max(600).optional().describe('seconds'),
        background: z.boolean().optional(),
        sandbox: z.enum(['on', 'off']).default('on'),
        justification: z.string().max(500).optional(),
      })
      .strict()
      .describe('Runs a command'),

  strings: () =>
    z.object({
      bounded: z.string().min(2).max(10),
      exact: z.string().length(4),
      tightened: z.string().min(2).min(3).max(9).max(8),
      pattern: z.string().regex(/^[a-z]+$/i),
      email: z.string().email(),
      url: z.string().url(),
      uuid: z.string().uuid(),
      when: z.string().datetime(),
      day: z.string().date(),
      clock: z.string().time(),
      span: z.string().duration(),
      ip: z.string().ip(),
      ip4: z.string().ip({ version: 'v4' }),
      b64: z.string().base64(),
      prefixed: z.string().startsWith('abc'),
      suffixed: z.string().endsWith('xyz'),
      middle: z.string().includes('mid'),
      twoPatterns: z.string().regex(/^a/).startsWith('ab'),
      twoFormats: z.string().email().url(),
      cleaned: z.string().trim().toLowerCase().toUpperCase(),
    }),
  numbers: () =>
    z.object({
      plain: z.number(),
      int: z.number().int(),
      gt: z.number().gt(0),
      gte: z.number().gte(0),
      lt: z.number().lt(10),
      lte: z.number().lte(10),
      positive: z.number().positive(),
      nonnegative: z.number().nonnegative(),
      negative: z.number().negative(),
      nonpositive: z.number().nonpositive(),
      step: z.number().multipleOf(5),
      finite: z.number().finite(),
      safe: z.number().safe(),
      port: z.number().int().min(1).max(65535),
    }),
  booleans: () =>
    z.object({ flag: z.boolean(), maybe: z.boolean().optional(), on: z.boolean().default(true) }),
  enums: () =>
    z.object({
      mode: z.enum(['fast', 'slow']),
      colour: z.nativeEnum(Colour),
      level: z.nativeEnum(Level),
      mixed: z.nativeEnum({ A: 'a', B: 1 } as const),
    }),
  arrays: () =>
    z.object({
      words: z.array(z.string()),
      ranged: z.array(z.number()).min(1).max(3),
      exact: z.array(z.string()).length(2),
      nonempty: z.array(z.string()).nonempty(),
      anything: z.array(z.any()),
      unknowns: z.array(z.unknown()),
      objects: z.array(z.object({ id: z.number().int(), label: z.string().optional() })),
      nested: z.array(z.array(z.boolean())),
      maybeItems: z.array(z.string().optional()),
    }),
  optional_nullable: () =>
    z.object({
      optional: z.string().optional(),
      nullable: z.string().nullable(),
      nullableNumber: z.number().nullable(),
      nullableBoolean: z.boolean().nullable(),
      nullableChecked: z.number().int().nullable(),
      nullableObject: z.object({ a: z.string() }).nullable(),
      nullableEnum: z.enum(['a', 'b']).nullable(),
      nullish: z.string().nullish(),
      optionalNullable: z.number().min(1).nullable().optional(),
      nullableOptional: z.string().optional().nullable(),
      nullableArray: z.array(z.string()).nullable(),
      null: z.null(),
      optionalInRecord: z.record(z.string().optional()),
    }),
  defaults: () =>
    z.object({
      count: z.number().int().default(3),
      names: z.array(z.string()).default([]),
      mode: z.enum(['a', 'b']).default('a'),
      nothing: z.string().nullable().default(null),
      options: z.object({ deep: z.boolean() }).default({ deep: false }),
      described: z.string().default('x').describe('has a default'),
      describedInner: z.string().describe('inner').default('y'),
      optionalDefault: z.string().optional().default('z'),
    }),
  literals: () =>
    z.object({
      kind: z.literal('file'),
      version: z.literal(2),
      yes: z.literal(true),
      described: z.literal('x').describe('a literal'),
    }),
  unions: () =>
    z.object({
      stringOrNumber: z.union([z.string(), z.number()]),
      withNull: z.union([z.string(), z.null()]),
      repeated: z.union([z.string(), z.string()]),
      checked: z.union([z.string().min(1), z.number()]),
      literals: z.union([z.literal('a'), z.literal('b'), z.literal(1), z.literal(null)]),
      literalsDescribed: z.union([z.literal('a').describe('first'), z.literal('b')]),
      enums: z.union([z.enum(['a', 'b']), z.enum(['b', 'c'])]),
      mixed: z.union([z.string(), z.object({ path: z.string() })]),
      or: z.string().or(z.array(z.string())),
      tagged: z.discriminatedUnion('type', [
        z.object({ type: z.literal('text'), text: z.string() }),
        z.object({ type: z.literal('image'), url: z.string().url() }),
      ]),
    }),
  records: () =>
    z.object({
      env: z.record(z.string()),
      counts: z.record(z.string(), z.number().int()),
      keyed: z.record(
        z
          .string()
          .min(1)
          .regex(/^[A-Z_]+$/),
        z.string(),
      ),
      byEnum: z.record(z.enum(['a', 'b']), z.boolean()),
      objects: z.record(z.object({ on: z.boolean() })),
      anyValue: z.record(z.any()),
    }),
  descriptions: () =>
    z
      .object({
        optionalThenDescribe: z.string().optional().describe('after optional'),
        describeThenOptional: z.string().describe('before optional').optional(),
        nested: z
          .object({
            inner: z.number().describe('inner number'),
          })
          .describe('a nested object'),
        items: z.array(z.string().describe('one item')).describe('the items'),
        choice: z.enum(['x', 'y']).describe('pick one'),
        union: z.union([z.string(), z.number()]).describe('string or number'),
        record: z.record(z.string().describe('a value')).describe('a map'),
      })
      .describe('the tool input'),
  object_modes: () =>
    z.object({
      strip: z.object({ a: z.string() }),
      strict: z.object({ a: z.string() }).strict(),
      passthrough: z.object({ a: z.string() }).passthrough(),
      catchall: z.object({ a: z.string() }).catchall(z.number()),
      partial: z.object({ a: z.string(), b: z.number() }).partial(),
      required: z.object({ a: z.string().optional() }).required(),
      extended: z.object({ a: z.string() }).extend({ b: z.boolean() }),
      picked: z.object({ a: z.string(), b: z.number() }).pick({ a: true }),
    }),
  effects: () =>
    z
      .object({
        refined: z.string().refine((s) => s.length > 0, 'not empty'),
        superRefined: z.number().superRefine(() => undefined),
        transformed: z.string().transform((s) => s.length),
        preprocessed: z.preprocess((v) => String(v), z.string()),
        optionalRefined: z
          .string()
          .refine(() => true)
          .optional(),
      })
      .refine(() => true, 'whole object'),
  wrappers: () =>
    z.object({
      branded: z.string().brand<'Id'>(),
      readonly: z.array(z.string()).readonly(),
      caught: z.number().catch(0),
      any: z.any(),
      unknown: z.unknown(),
      anyDescribed: z.any().describe('anything'),
    }),
  reused: () => {
    const name = z.string().min(1);
    const point = z.object({ x: z.number(), y: z.number() });
    return z.object({ from: name, to: name, a: point, b: point, path: z.array(point) });
  },
};
