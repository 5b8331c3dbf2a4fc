import type { ValidationIssue } from './errors/validation-issue.js';

/**
 * The limits arguments are checked against before their schema sees them, and before any tool
 * works on them. zod validates recursively, so arguments nested 100,000 deep overflowed the stack
 * ('Maximum call stack size exceeded') instead of failing validation; a 1.5 MB path reached the
 * file tools, whose error answer echoed it eight times. This check is iterative, stops at the first
 * value past a limit, names its field, and never echoes the value: a string is described by its
 * size alone.
 */
export interface ArgumentLimits {
  /** Levels of nesting (objects and arrays) allowed. */
  maxDepth: number;
  /** Values (objects, arrays, primitives) allowed in total. */
  maxValues: number;
  /**
   * Bytes (UTF-8) a string argument may hold, unless its tool declares its own limit for the field
   * (`ToolDefinition.argumentLimits`). Default 64 KiB.
   */
  maxStringBytes: number;
  /** Bytes (UTF-8) an object key (an argument's name, a record's key) may hold. Default 4 KiB. */
  maxKeyBytes: number;
}

/** 64 KiB: an argument, not a payload; a tool that takes a payload declares its field. */
export const DEFAULT_MAX_STRING_BYTES = 64 * 1024;

export const DEFAULT_ARGUMENT_LIMITS: ArgumentLimits = {
  maxDepth: 64,
  maxValues: 100_000,
  maxStringBytes: DEFAULT_MAX_STRING_BYTES,
  maxKeyBytes: 4096,
};

/**
 * Byte limits a tool declares for its own string arguments (`defineTool({ argumentLimits })`),
 * where a value bigger than the registry's `maxStringBytes` is legitimate (a file's content) or
 * where a smaller one is all that makes sense (a path: 4096 bytes, Linux's PATH_MAX).
 */
export interface ToolArgumentLimits {
  /** Bytes any string field of this tool may hold unless `fields` names it. Default: the registry's `maxStringBytes`. */
  maxStringBytes?: number;
  /**
   * Bytes (UTF-8) by field path: `content`, `env.*` (every value of a record), `args.*` (every
   * element of an array); `*` stands for one key or index.
   */
  fields?: Readonly<Record<string, number>>;
}

/** Common limits tools declare (bytes). */
export const ARGUMENT_BYTES = {
  /** A path: Linux's PATH_MAX. A longer one cannot name a file. */
  path: 4096,
  /** One argument or environment string of a program: Linux's MAX_ARG_STRLEN (128 KiB). */
  argv: 128 * 1024,
  /** An id (task, session, trash entry). */
  id: 256,
  /** A pattern (regular expression, glob). */
  pattern: 4096,
} as const;

/** A tool's limits, compiled once at expose time. */
export interface CompiledToolLimits {
  maxStringBytes: number;
  fields: readonly { segments: readonly string[]; bytes: number }[];
  /** The smallest limit that can apply to any string of this tool. */
  floor: number;
}

/** Checks a tool's declared limits (positive integers, non-empty paths); throws a message naming the bad one. */
export function compileToolLimits(
  declared: ToolArgumentLimits | undefined,
  limits: ArgumentLimits,
): CompiledToolLimits {
  const positive = (value: unknown, what: string): number => {
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1)
      throw new Error(`${what}: expected a positive integer (bytes); given ${String(value)}`);
    return value;
  };
  const maxStringBytes =
    declared?.maxStringBytes === undefined
      ? limits.maxStringBytes
      : positive(declared.maxStringBytes, 'argumentLimits.maxStringBytes');
  const fields: { segments: string[]; bytes: number }[] = [];
  for (const [path, bytes] of Object.entries(declared?.fields ?? {})) {
    if (path === '' || path.split('.').some((s) => s === ''))
      throw new Error(`argumentLimits.fields: expected dotted field paths; given '${path}'`);
    fields.push({ segments: path.split('.'), bytes: positive(bytes, `argumentLimits.fields.${path}`) });
  }
  const floor = Math.min(maxStringBytes, ...fields.map((f) => f.bytes));
  return { maxStringBytes, fields, floor };
}

interface Node {
  value: unknown;
  depth: number;
  parent: Node | undefined;
  key: string;
}

/** A key as a field path shows it: at most 40 characters. */
function shownKey(key: string): string {
  return key.length > 40 ? `${key.slice(0, 39)}…` : key;
}

function keysOf(node: Node): string[] {
  const keys: string[] = [];
  for (let n: Node | undefined = node; n?.parent; n = n.parent) keys.push(n.key);
  return keys.reverse();
}

function fieldOf(node: Node, extra?: string): string {
  const keys = keysOf(node).map(shownKey);
  if (extra !== undefined) keys.push(extra);
  if (keys.length === 0) return '(root)';
  return keys.length > 12 ? `${keys.slice(0, 6).join('.')}.….${keys.slice(-3).join('.')}` : keys.join('.');
}

/** UTF-8 bytes of `text`, or a number past `limit` found without encoding a huge string. */
function bytesPast(text: string, limit: number): number | undefined {
  // Every UTF-16 unit is 1 to 3 bytes in UTF-8 (a surrogate pair, two units, is 4).
  if (text.length * 3 <= limit) return undefined;
  const bytes = Buffer.byteLength(text, 'utf8');
  return bytes > limit ? bytes : undefined;
}

function limitOf(node: Node, tool: CompiledToolLimits): number {
  if (tool.fields.length === 0) return tool.maxStringBytes;
  const keys = keysOf(node);
  for (const field of tool.fields) {
    if (field.segments.length !== keys.length) continue;
    if (field.segments.every((s, i) => s === '*' || s === keys[i])) return field.bytes;
  }
  return tool.maxStringBytes;
}

function bytesText(bytes: number): string {
  return `${bytes} bytes`;
}

/**
 * The first limit `args` goes past, as a validation issue naming the field (and, for a string,
 * the limit and the size given, never the value); undefined when within. `tool` is the calling
 * tool's compiled limits (default: `limits.maxStringBytes` for every string).
 */
export function checkArgumentLimits(
  args: unknown,
  limits: ArgumentLimits,
  tool: CompiledToolLimits = {
    maxStringBytes: limits.maxStringBytes,
    fields: [],
    floor: limits.maxStringBytes,
  },
): ValidationIssue | undefined {
  const stack: Node[] = [{ value: args, depth: 0, parent: undefined, key: '' }];
  let values = 0;
  while (stack.length > 0) {
    const node = stack.pop()!;
    values += 1;
    if (values > limits.maxValues) {
      return {
        path: fieldOf(node),
        expected: `arguments of at most ${limits.maxValues} values in all (objects, arrays, strings, numbers …)`,
        received: `more than ${limits.maxValues} (the limit was passed at this field)`,
      };
    }
    const { value } = node;
    if (typeof value === 'string') {
      // Within the smallest limit of the tool: within whatever the field's limit is.
      const over = bytesPast(value, tool.floor);
      if (over === undefined) continue;
      const limit = limitOf(node, tool);
      if (over > limit) {
        return {
          path: fieldOf(node),
          expected: `a string of at most ${bytesText(limit)} (UTF-8)`,
          received: `a string of ${bytesText(over)}`,
        };
      }
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    if (node.depth >= limits.maxDepth) {
      return {
        path: fieldOf(node),
        expected: `at most ${limits.maxDepth} levels of nested objects and arrays`,
        received: `${Array.isArray(value) ? 'an array' : 'an object'} nested deeper than that (at level ${node.depth + 1})`,
      };
    }
    let keys: string[] | undefined;
    try {
      keys = Array.isArray(value) ? undefined : Object.keys(value);
    } catch {
      continue; // the schema reports what it cannot read
    }
    const count = keys ? keys.length : (value as unknown[]).length;
    // Every value waiting on the stack is counted once it is visited: refuse before pushing a level
    // that cannot fit (a 10-million-element array is never copied onto the stack).
    if (values + stack.length + count > limits.maxValues) {
      return {
        path: fieldOf(node),
        expected: `arguments of at most ${limits.maxValues} values in all (objects, arrays, strings, numbers …)`,
        received: `more than that (this field holds ${count} ${keys ? 'keys' : 'elements'})`,
      };
    }
    if (!keys) {
      const list = value as unknown[];
      for (let i = list.length - 1; i >= 0; i--) {
        stack.push({ value: list[i], depth: node.depth + 1, parent: node, key: String(i) });
      }
    } else {
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i]!;
        const over = bytesPast(key, limits.maxKeyBytes);
        if (over !== undefined) {
          return {
            path: fieldOf(node, `(a key of ${bytesText(over)})`),
            expected: `keys of at most ${bytesText(limits.maxKeyBytes)} (UTF-8)`,
            received: `a key of ${bytesText(over)}`,
          };
        }
        let item: unknown;
        try {
          item = (value as Record<string, unknown>)[key];
        } catch {
          continue;
        }
        stack.push({ value: item, depth: node.depth + 1, parent: node, key });
      }
    }
  }
  return undefined;
}
