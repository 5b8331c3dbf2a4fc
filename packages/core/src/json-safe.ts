/**
 * Tool results leave the registry as JSON (MCP, the AI SDK, logs, a host's UI), and
 * `JSON.stringify` throws on a BigInt or a cycle, silently drops a Map, a Set or an Error's message,
 * turns NaN into null, and overflows the stack on very deep nesting. `toJsonSafe` returns a value
 * JSON carries as it is, and names every change it made (path and what): the registry logs those
 * with the tool's and plugin's names. Iterative, so no input overflows the stack; a value that
 * needs no change is returned as it is (same object).
 */

export interface JsonSafeOptions {
  /** Nesting deeper than this is replaced by the string "[Too deep]". Default 500. */
  maxDepth?: number;
}

export interface JsonSafeResult {
  value: unknown;
  /** One line per change: `path: what` (`rows.2.id: BigInt -> string`). Empty when nothing changed. */
  changes: string[];
}

/** The replacements, as strings a reader recognises. */
export const CIRCULAR = '[Circular]';
export const TOO_DEEP = '[Too deep]';

const MAX_CHANGES = 20;

interface PathNode {
  parent: PathNode | undefined;
  key: string;
}

function pathOf(node: PathNode | undefined): string {
  const keys: string[] = [];
  for (let n = node; n; n = n.parent) keys.push(n.key);
  if (keys.length === 0) return '(root)';
  keys.reverse();
  return keys.length > 24 ? `${keys.slice(0, 10).join('.')}.….${keys.slice(-4).join('.')}` : keys.join('.');
}

type Classified =
  | { leaf: true; value: unknown; change?: string }
  | { leaf: false; source: object; keys: string[]; array: boolean; change?: string };

interface Frame {
  source: object;
  out: unknown[] | Record<string, unknown> | undefined;
  keys: string[];
  array: boolean;
  index: number;
  path: PathNode | undefined;
  depth: number;
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** What JSON would make of `value` (toJSON called once, as JSON does), with conversions named. */
function classify(
  value: unknown,
  key: string,
  ancestors: Set<object>,
  depth: number,
  max: number,
): Classified {
  let v = value;
  let change: string | undefined;
  if (typeof v === 'object' && v !== null && !(v instanceof Map) && !(v instanceof Set)) {
    const toJSON = (v as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function' && !(v instanceof Error)) {
      try {
        v = (toJSON as (key: string) => unknown).call(v, key);
      } catch (error) {
        return { leaf: true, value: `[Unserializable: ${describeError(error)}]`, change: 'toJSON() threw' };
      }
    }
  }
  if (typeof v === 'bigint') return { leaf: true, value: v.toString(), change: 'BigInt -> string' };
  if (typeof v === 'number' && !Number.isFinite(v))
    return { leaf: true, value: String(v), change: `${String(v)} -> string` };
  if (typeof v !== 'object' || v === null) return { leaf: true, value: v };
  if (ancestors.has(v)) return { leaf: true, value: CIRCULAR, change: `circular reference -> "${CIRCULAR}"` };
  if (depth > max)
    return { leaf: true, value: TOO_DEEP, change: `nested deeper than ${max} -> "${TOO_DEEP}"` };
  let source: object = v;
  if (v instanceof Map) {
    const entries: Record<string, unknown> = {};
    for (const [k, item] of v) entries[typeof k === 'string' ? k : String(k)] = item;
    source = entries;
    change = 'Map -> object';
  } else if (v instanceof Set) {
    source = [...v];
    change = 'Set -> array';
  } else if (v instanceof Error) {
    const fields: Record<string, unknown> = { name: v.name, message: v.message };
    const code = (v as { code?: unknown }).code;
    if (code !== undefined) fields.code = code;
    try {
      for (const k of Object.keys(v))
        if (!(k in fields)) fields[k] = (v as unknown as Record<string, unknown>)[k];
    } catch {
      // a throwing getter: name and message are enough
    }
    source = fields;
    change = 'Error -> { name, message }';
  }
  const array = Array.isArray(source);
  let keys: string[];
  try {
    keys = array ? [] : Object.keys(source);
  } catch (error) {
    return {
      leaf: true,
      value: `[Unreadable: ${describeError(error)}]`,
      change: 'its keys could not be read',
    };
  }
  return { leaf: false, source, keys, array, ...(change ? { change } : {}) };
}

/**
 * `value` as JSON can carry it: BigInt -> decimal string, a cycle -> "[Circular]", nesting beyond
 * `maxDepth` -> "[Too deep]", NaN / Infinity -> strings, Map -> object, Set -> array, Error ->
 * `{ name, message, code? }`, a throwing getter or toJSON -> "[Unreadable: …]" / "[Unserializable: …]".
 * Shared (non-cyclic) references stay shared.
 */
export function toJsonSafe(value: unknown, options: JsonSafeOptions = {}): JsonSafeResult {
  const max = options.maxDepth ?? 500;
  const first = walk(value, max, false);
  if (first.changes.length === 0) return { value, changes: [] };
  return walk(value, max, true);
}

function walk(value: unknown, max: number, build: boolean): JsonSafeResult {
  const changes: string[] = [];
  let more = 0;
  const note = (path: PathNode | undefined, what: string) => {
    if (changes.length < MAX_CHANGES) changes.push(`${pathOf(path)}: ${what}`);
    else more += 1;
  };
  const ancestors = new Set<object>();
  const top = classify(value, '', ancestors, 0, max);
  if (top.change) note(undefined, top.change);
  if (top.leaf) return finish(top.value);
  const open = (
    c: Extract<Classified, { leaf: false }>,
    path: PathNode | undefined,
    depth: number,
  ): Frame => {
    ancestors.add(c.source);
    return {
      source: c.source,
      out: build ? (c.array ? [] : {}) : undefined,
      keys: c.keys,
      array: c.array,
      index: 0,
      path,
      depth,
    };
  };
  const root = open(top, undefined, 0);
  const stack: Frame[] = [root];
  // The value each frame produced, set on its parent when it closes.
  const parentKey: string[] = [];
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!;
    const length = frame.array ? (frame.source as unknown[]).length : frame.keys.length;
    if (frame.index >= length) {
      stack.pop();
      ancestors.delete(frame.source);
      const key = parentKey.pop();
      const parent = stack[stack.length - 1];
      if (build && parent && key !== undefined) assign(parent, key, frame.out);
      continue;
    }
    const i = frame.index++;
    const key = frame.array ? String(i) : frame.keys[i]!;
    const path: PathNode = { parent: frame.path, key };
    let item: unknown;
    try {
      item = frame.array ? (frame.source as unknown[])[i] : (frame.source as Record<string, unknown>)[key];
    } catch (error) {
      note(path, 'its getter threw');
      if (build) assign(frame, key, `[Unreadable: ${describeError(error)}]`);
      continue;
    }
    const c = classify(item, key, ancestors, frame.depth + 1, max);
    if (c.change) note(path, c.change);
    if (c.leaf) {
      if (build) assign(frame, key, c.value);
      continue;
    }
    parentKey.push(key);
    stack.push(open(c, path, frame.depth + 1));
  }
  return finish(root.out);

  function finish(result: unknown): JsonSafeResult {
    if (more > 0) changes.push(`… and ${more} more`);
    return { value: build ? result : value, changes };
  }
}

function assign(frame: Frame, key: string, value: unknown): void {
  if (frame.array) (frame.out as unknown[]).push(value);
  else (frame.out as Record<string, unknown>)[key] = value;
}
