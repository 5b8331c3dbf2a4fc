import { ConchError } from './errors/conch-error.js';

/**
 * Converts a zod 3 schema (`zod/v3`, or the zod 3.x package) to JSON Schema (draft-07, inlined).
 *
 * Why conch has its own: zod-to-json-schema, which did this before, is deprecated upstream (its
 * author: zod 4 converts natively, with `z.toJSONSchema`), and zod 4's converter does not read zod 3
 * schemas. Tool inputs use a small set of kinds, so this covers those — objects, strings, numbers,
 * booleans, null, enums (and native enums), arrays, optional / nullable / default, literals,
 * unions (and discriminated unions), records, descriptions, plus the wrappers that do not change
 * the input (refine / transform / preprocess, brand, readonly, catch) and any / unknown — and
 * reproduces zod-to-json-schema 3.25's output for them (target jsonSchema7, $refStrategy none), so
 * MCP clients see the same JSON Schema as before. Three deliberate differences: a `null` literal
 * is `{ type: 'null' }` (it was `{ type: 'object' }`), and `startsWith` / `endsWith` / `includes`
 * escape only regex syntax characters (it escaped every non-alphanumeric, which is invalid under
 * the `u` flag, and also `w` / `W`, which turned them into `\w` / `\W`); an object property whose
 * kind has no JSON form (function, void, symbol) is an error, where it was silently left out.
 * Anything else — dates, bigints, tuples, intersections, lazy (recursive) schemas, pipes, maps,
 * sets, string formats without a JSON Schema `format` — is a ConchError naming the field and the
 * zod 3 kind, pointing at zod 4, which converts all of them.
 *
 * It reads only the schemas' `_def` (and `isOptional()`, as zod-to-json-schema did): nothing of
 * zod 3 is imported, so this module costs nothing to load.
 */
export function zod3ToJsonSchema(schema: unknown): Record<string, unknown> {
  return convert(schema, { path: '', property: false, ancestors: new Set() });
}

/** A zod 3 schema: its `_def` names its kind in `typeName` (zod 4 keeps its definition in `_zod`). */
export function isZod3Schema(value: unknown): boolean {
  const def = defOf(value);
  return def !== undefined && typeof def.typeName === 'string';
}

type Json = Record<string, unknown>;
type Def = Record<string, unknown> & { typeName?: unknown; description?: unknown };
interface Check {
  kind?: unknown;
  value?: unknown;
  inclusive?: unknown;
  regex?: unknown;
  version?: unknown;
}

interface At {
  /** The field, dotted as argument limits name them: `env.*` is a record's values, `args.*` an array's items. */
  path: string;
  /** Directly at an object property: an optional there is plain (the property is left out of `required`). */
  property: boolean;
  /** Definitions being converted above this one: a schema that contains itself is refused, not looped over. */
  ancestors: Set<object>;
}

const ZOD4_HINT = "use zod 4 (import from 'zod' 4.x or 'zod/v4'), which conch converts natively";

function unsupported(at: At, what: string): never {
  const where = at.path === '' ? 'the schema' : `field '${at.path}'`;
  throw new ConchError({
    code: 'INVALID_TOOL_DEFINITION',
    message: `${where} is a zod 3 ${what}, which conch does not convert to JSON Schema: ${ZOD4_HINT}`,
  });
}

function defOf(value: unknown): Def | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const def = (value as { _def?: unknown })._def;
  return typeof def === 'object' && def !== null ? (def as Def) : undefined;
}

function kindOf(value: unknown): string | undefined {
  const typeName = defOf(value)?.typeName;
  return typeof typeName === 'string' ? typeName : undefined;
}

function checksOf(def: Def): Check[] {
  return Array.isArray(def.checks) ? (def.checks as Check[]) : [];
}

function inner(at: At, segment?: string): At {
  if (segment === undefined) return { ...at, property: false };
  return {
    path: at.path === '' ? segment : `${at.path}.${segment}`,
    property: false,
    ancestors: at.ancestors,
  };
}

/** Sets a key of a JSON object, `__proto__` included (a property may be called anything). */
function put(target: Json, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function convert(schema: unknown, at: At): Json {
  const def = defOf(schema);
  const kind = kindOf(schema);
  if (def === undefined || kind === undefined) {
    throw new ConchError({
      code: 'INVALID_TOOL_DEFINITION',
      message: `${at.path === '' ? 'the schema' : `field '${at.path}'`} is not a zod schema: ${ZOD4_HINT}`,
    });
  }
  if (at.ancestors.has(def)) unsupported(at, `${kind} that contains itself`);
  at.ancestors.add(def);
  let json: Json;
  try {
    json = convertKind(def, kind, at);
  } finally {
    at.ancestors.delete(def);
  }
  if (typeof def.description === 'string' && def.description !== '') json.description = def.description;
  return json;
}

function convertKind(def: Def, kind: string, at: At): Json {
  switch (kind) {
    case 'ZodObject':
      return convertObject(def, at);
    case 'ZodString':
      return convertString(def, at);
    case 'ZodNumber':
      return convertNumber(def, at);
    case 'ZodBoolean':
      return { type: 'boolean' };
    case 'ZodNull':
      return { type: 'null' };
    case 'ZodAny':
    case 'ZodUnknown':
      return {};
    case 'ZodEnum':
      return { type: 'string', enum: Array.from(def.values as Iterable<unknown>) };
    case 'ZodNativeEnum':
      return convertNativeEnum(def);
    case 'ZodArray':
      return convertArray(def, at);
    case 'ZodOptional':
      // At a property the key is simply left out of `required`; elsewhere (an array's items, a
      // record's values) zod-to-json-schema said "absent or the inner schema".
      return at.property
        ? convert(def.innerType, at)
        : { anyOf: [{ not: {} }, convert(def.innerType, inner(at))] };
    case 'ZodNullable':
      return convertNullable(def, at);
    case 'ZodDefault':
      return {
        ...convert(def.innerType, at),
        default:
          typeof def.defaultValue === 'function' ? (def.defaultValue as () => unknown)() : def.defaultValue,
      };
    case 'ZodLiteral':
      return convertLiteral(def, at);
    case 'ZodUnion':
    case 'ZodDiscriminatedUnion':
      return convertUnion(def, at);
    case 'ZodRecord':
      return convertRecord(def, at);
    // Wrappers that leave the input as it is: the JSON Schema is the inner schema's (the input
    // side of a transform or preprocess, as zod-to-json-schema's default effectStrategy).
    case 'ZodEffects':
      return convert(def.schema, at);
    case 'ZodBranded':
      return convert(def.type, at);
    case 'ZodReadonly':
    case 'ZodCatch':
      return convert(def.innerType, at);
    default:
      return unsupported(at, kind);
  }
}

function isOptional(schema: unknown): boolean {
  const check = (schema as { isOptional?: unknown }).isOptional;
  if (typeof check !== 'function') return false;
  try {
    return (check as () => boolean).call(schema);
  } catch {
    return true; // as zod-to-json-schema: a refinement that throws on `undefined`
  }
}

function convertObject(def: Def, at: At): Json {
  const shape = typeof def.shape === 'function' ? (def.shape as () => unknown)() : def.shape;
  const properties: Json = {};
  const required: string[] = [];
  for (const [key, child] of Object.entries((shape ?? {}) as Record<string, unknown>)) {
    if (defOf(child) === undefined) continue;
    put(properties, key, convert(child, { ...inner(at, key), property: true }));
    if (!isOptional(child)) required.push(key);
  }
  const json: Json = { type: 'object', properties };
  if (required.length > 0) json.required = required;
  if (def.catchall !== undefined && kindOf(def.catchall) !== 'ZodNever') {
    json.additionalProperties = convert(def.catchall, inner(at, '*'));
  } else {
    // strict and strip (zod 3's default) both say no other keys; passthrough allows them.
    json.additionalProperties = def.unknownKeys === 'passthrough';
  }
  return json;
}

/** Escapes the characters that mean something in a regular expression (valid with and without `u`). */
function escapeRegex(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
}

const STRING_FORMATS: Record<string, string> = {
  email: 'email',
  url: 'uri',
  uuid: 'uuid',
  datetime: 'date-time',
  date: 'date',
  time: 'time',
  duration: 'duration',
};

function convertString(def: Def, at: At): Json {
  const json: Json = { type: 'string' };
  // A second format joins the first in an anyOf, a second pattern in an allOf (as zod-to-json-schema).
  const addFormat = (format: string) => {
    const anyOf = json.anyOf as Json[] | undefined;
    if (json.format === undefined && anyOf === undefined) {
      json.format = format;
      return;
    }
    const list = anyOf ?? [];
    if (json.format !== undefined) {
      list.push({ format: json.format });
      delete json.format;
    }
    list.push({ format });
    json.anyOf = list;
  };
  const addPattern = (pattern: string) => {
    const allOf = json.allOf as Json[] | undefined;
    if (json.pattern === undefined && allOf === undefined) {
      json.pattern = pattern;
      return;
    }
    const list = allOf ?? [];
    if (json.pattern !== undefined) {
      list.push({ pattern: json.pattern });
      delete json.pattern;
    }
    list.push({ pattern });
    json.allOf = list;
  };
  const atLeast = (value: unknown) => {
    json.minLength = typeof json.minLength === 'number' ? Math.max(json.minLength, value as number) : value;
  };
  const atMost = (value: unknown) => {
    json.maxLength = typeof json.maxLength === 'number' ? Math.min(json.maxLength, value as number) : value;
  };
  for (const check of checksOf(def)) {
    const kind = String(check.kind);
    switch (kind) {
      case 'min':
        atLeast(check.value);
        break;
      case 'max':
        atMost(check.value);
        break;
      case 'length':
        atLeast(check.value);
        atMost(check.value);
        break;
      case 'email':
      case 'url':
      case 'uuid':
      case 'datetime':
      case 'date':
      case 'time':
      case 'duration':
        addFormat(STRING_FORMATS[kind]!);
        break;
      case 'ip':
        if (check.version !== 'v6') addFormat('ipv4');
        if (check.version !== 'v4') addFormat('ipv6');
        break;
      case 'base64':
        json.contentEncoding = 'base64';
        break;
      case 'regex':
        addPattern((check.regex as RegExp).source);
        break;
      case 'startsWith':
        addPattern(`^${escapeRegex(String(check.value))}`);
        break;
      case 'endsWith':
        addPattern(`${escapeRegex(String(check.value))}$`);
        break;
      case 'includes':
        addPattern(escapeRegex(String(check.value)));
        break;
      case 'trim':
      case 'toLowerCase':
      case 'toUpperCase':
        break; // transforms: any string is accepted
      default:
        // cuid, cuid2, ulid, nanoid, emoji, jwt, cidr, base64url: zod's own patterns, not copied here.
        unsupported(at, `ZodString with the check .${kind}()`);
    }
  }
  return json;
}

function convertNumber(def: Def, at: At): Json {
  const json: Json = { type: 'number' };
  for (const check of checksOf(def)) {
    switch (check.kind) {
      case 'int':
        json.type = 'integer';
        break;
      case 'min':
        json[check.inclusive ? 'minimum' : 'exclusiveMinimum'] = check.value;
        break;
      case 'max':
        json[check.inclusive ? 'maximum' : 'exclusiveMaximum'] = check.value;
        break;
      case 'multipleOf':
        json.multipleOf = check.value;
        break;
      case 'finite':
        break; // JSON has no infinities
      default:
        unsupported(at, `ZodNumber with the check ${JSON.stringify(check.kind)}`);
    }
  }
  return json;
}

function convertNativeEnum(def: Def): Json {
  const object = def.values as Record<string, unknown>;
  // A numeric TypeScript enum maps values back to names too: keep only the name -> value side.
  const values = Object.keys(object)
    .filter((key) => typeof object[object[key] as string] !== 'number')
    .map((key) => object[key]);
  const types = Array.from(new Set(values.map((value) => typeof value)));
  return {
    type: types.length === 1 ? (types[0] === 'string' ? 'string' : 'number') : ['string', 'number'],
    enum: values,
  };
}

function convertArray(def: Def, at: At): Json {
  const json: Json = { type: 'array' };
  if (defOf(def.type) !== undefined && kindOf(def.type) !== 'ZodAny') {
    json.items = convert(def.type, inner(at, '*'));
  }
  const bound = (value: unknown) => (value as { value?: unknown } | null | undefined)?.value;
  if (def.minLength) json.minItems = bound(def.minLength);
  if (def.maxLength) json.maxItems = bound(def.maxLength);
  if (def.exactLength) {
    json.minItems = bound(def.exactLength);
    json.maxItems = bound(def.exactLength);
  }
  return json;
}

/** zod kinds that are one JSON type each: unions and nullables of them (without checks) become a type list. */
const PRIMITIVE_TYPES: Record<string, string> = {
  ZodString: 'string',
  ZodNumber: 'number',
  ZodBoolean: 'boolean',
  ZodNull: 'null',
};

function primitiveType(schema: unknown): string | undefined {
  const def = defOf(schema);
  const kind = kindOf(schema);
  if (def === undefined || kind === undefined || checksOf(def).length > 0) return undefined;
  return PRIMITIVE_TYPES[kind];
}

function convertNullable(def: Def, at: At): Json {
  const type = primitiveType(def.innerType);
  if (type !== undefined) return { type: [type, 'null'] };
  return { anyOf: [convert(def.innerType, inner(at)), { type: 'null' }] };
}

function literalType(value: unknown): string | undefined {
  if (value === null) return 'null';
  const type = typeof value;
  return type === 'string' || type === 'number' || type === 'boolean' ? type : undefined;
}

function convertLiteral(def: Def, at: At): Json {
  const type = literalType(def.value);
  if (type === undefined) unsupported(at, `ZodLiteral of a ${typeof def.value}`);
  return type === 'null' ? { type } : { type, const: def.value };
}

function convertUnion(def: Def, at: At): Json {
  const options: unknown[] =
    def.options instanceof Map
      ? Array.from(def.options.values())
      : Array.from(def.options as Iterable<unknown>);
  const unique = <T>(list: T[]) => list.filter((value, index) => list.indexOf(value) === index);
  const squash = (types: string[]) => (types.length > 1 ? types : types[0]);

  const types = options.map(primitiveType);
  if (types.every((type) => type !== undefined)) return { type: squash(unique(types as string[])) };

  if (options.every((option) => kindOf(option) === 'ZodLiteral' && !defOf(option)!.description)) {
    const values = options.map((option) => defOf(option)!.value);
    const literalTypes = values.map(literalType);
    if (literalTypes.every((type) => type !== undefined)) {
      return { type: squash(unique(literalTypes as string[])), enum: unique(values) };
    }
  } else if (options.every((option) => kindOf(option) === 'ZodEnum')) {
    return {
      type: 'string',
      enum: unique(options.flatMap((option) => Array.from(defOf(option)!.values as Iterable<unknown>))),
    };
  }
  return { anyOf: options.map((option) => convert(option, inner(at))) };
}

function convertRecord(def: Def, at: At): Json {
  const json: Json = { type: 'object', additionalProperties: convert(def.valueType, inner(at, '*')) };
  const keyDef = defOf(def.keyType);
  const keyKind = kindOf(def.keyType);
  if (keyDef !== undefined && keyKind === 'ZodString' && checksOf(keyDef).length > 0) {
    const { type: _string, ...propertyNames } = convertString(keyDef, inner(at, '(key)'));
    json.propertyNames = propertyNames;
  } else if (keyDef !== undefined && keyKind === 'ZodEnum') {
    json.propertyNames = { enum: Array.from(keyDef.values as Iterable<unknown>) };
  }
  return json;
}
