import type { z } from 'zod';

export interface ValidationIssue {
  /** Dotted path of the offending field, e.g. `maxOutputChars` or `rules.allow.0`. */
  path: string;
  /** What was expected, in words. */
  expected: string;
  /** What was given, rendered for humans. */
  received: string;
}

/** How a received value is shown in an issue: at most about 80 characters of it, never the whole. */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing (undefined)';
  if (typeof value === 'string')
    return value.length > 80
      ? `${JSON.stringify(`${value.slice(0, 77)}...`)} (${value.length} characters)`
      : JSON.stringify(value);
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'object' && value !== null) {
    // Never serialize a large object whole to show 80 characters of it.
    let size: number;
    try {
      size = Array.isArray(value) ? value.length : Object.keys(value).length;
    } catch {
      return 'an object that cannot be read';
    }
    if (size > 20) return Array.isArray(value) ? `an array of ${size} elements` : `an object of ${size} keys`;
  }
  try {
    const json = JSON.stringify(value);
    if (json === undefined) return String(value);
    return json.length > 80 ? `${json.slice(0, 77)}...` : json;
  } catch {
    return typeof value === 'object' ? 'an object JSON cannot show' : String(value).slice(0, 80);
  }
}

/** How much of a schema's message an issue keeps (a custom refinement may quote the value). */
const EXPECTED_MAX = 1000;
/** How many of zod's issues are turned into ours. */
const ISSUES_MAX = 1000;

function bounded(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** A path segment as an issue shows it: at most 40 characters. */
function segment(key: PropertyKey): string {
  return bounded(String(key), 40);
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let current = input;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

export interface ValidationIssueOptions {
  /** The schema that produced the error: unknown keys get a "did you mean" from its keys. */
  schema?: z.ZodType;
  /** Keys may be given in snake_case too (plugin config): suggestions name both spellings. */
  snakeCaseAliases?: boolean;
}

/** Turns zod issues into field / expected / received triples that read well in one line. */
export function toValidationIssues(
  error: z.ZodError,
  input: unknown,
  options: ValidationIssueOptions = {},
): ValidationIssue[] {
  return error.issues.slice(0, ISSUES_MAX).flatMap((issue): ValidationIssue[] => {
    const path = issue.path.map(segment).join('.') || '(root)';
    if (issue.code === 'unrecognized_keys') {
      const known = options.schema ? objectKeysAt(options.schema, issue.path) : [];
      return issue.keys.slice(0, ISSUES_MAX).map((key) => {
        const suggestion =
          key.length > 64 ? undefined : suggestKey(key, known, options.snakeCaseAliases === true);
        return {
          path: [...issue.path.map(segment), segment(key)].join('.'),
          expected: `no such key (unknown field ${segment(key)})${suggestion ? `; did you mean ${suggestion}?` : ''}`,
          received: describeValue(valueAt(input, [...issue.path, key])),
        };
      });
    }
    return [
      {
        path,
        expected: bounded(issue.message, EXPECTED_MAX),
        received: describeValue(valueAt(input, issue.path)),
      },
    ];
  });
}

/** The keys of the object schema at `path` inside `schema` (wrappers unwrapped); [] when none. */
function objectKeysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let current: unknown = schema;
  for (let depth = 0; depth <= path.length; depth++) {
    // Unwrap optional / nullable / default / pipe / readonly … (bounded: schemas may be recursive).
    for (let i = 0; i < 16; i++) {
      const def = defOf(current);
      if (!def) return [];
      const inner = def.innerType ?? (def.type === 'pipe' ? def.in : undefined);
      if (inner === undefined) break;
      current = inner;
    }
    const def = defOf(current);
    if (!def) return [];
    if (depth === path.length) {
      return def.type === 'object' && def.shape && typeof def.shape === 'object'
        ? Object.keys(def.shape)
        : [];
    }
    const key = path[depth];
    if (def.type === 'object' && def.shape && typeof def.shape === 'object' && typeof key === 'string') {
      current = (def.shape as Record<string, unknown>)[key];
    } else if (def.type === 'array' && typeof key === 'number') {
      current = def.element;
    } else if (def.type === 'record') {
      current = def.valueType;
    } else {
      return [];
    }
  }
  return [];
}

interface SchemaDef {
  type?: string;
  shape?: unknown;
  innerType?: unknown;
  in?: unknown;
  element?: unknown;
  valueType?: unknown;
}

function defOf(schema: unknown): SchemaDef | undefined {
  if (typeof schema !== 'object' || schema === null) return undefined;
  const def = (schema as { _zod?: { def?: unknown } })._zod?.def;
  return typeof def === 'object' && def !== null ? (def as SchemaDef) : undefined;
}

function squash(key: string): string {
  return key.toLowerCase().replace(/[_-]/g, '');
}

function toSnakeCase(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** `'maxOutputChars'` (or `'maxOutputChars' / 'max_output_chars'`) for a near-miss key, if any. */
export function suggestKey(
  given: string,
  known: readonly string[],
  snakeCaseAliases = false,
): string | undefined {
  const wanted = squash(given);
  if (!wanted) return undefined;
  const bound = wanted.length <= 4 ? 1 : wanted.length <= 8 ? 2 : 3;
  let best: { key: string; distance: number }[] = [];
  for (const key of known) {
    const distance = editDistance(wanted, squash(key), bound);
    if (distance > bound) continue;
    if (best.length === 0 || distance < best[0]!.distance) best = [{ key, distance }];
    else if (distance === best[0]!.distance) best.push({ key, distance });
  }
  if (best.length === 0) return undefined;
  return best
    .slice(0, 2)
    .map(({ key }) => {
      const snake = toSnakeCase(key);
      return snakeCaseAliases && snake !== key ? `'${key}' / '${snake}'` : `'${key}'`;
    })
    .join(' or ');
}

/** Levenshtein distance, giving up (returning bound + 1) once it exceeds `bound`. */
function editDistance(a: string, b: string, bound: number): number {
  if (Math.abs(a.length - b.length) > bound) return bound + 1;
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      const value = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + cost);
      row.push(value);
      rowMin = Math.min(rowMin, value);
    }
    if (rowMin > bound) return bound + 1;
    previous = row;
  }
  return previous[b.length]!;
}

/** How many issues an error's message lists (the rest are counted). */
const FORMATTED_ISSUES_MAX = 20;

export function formatIssues(issues: readonly ValidationIssue[]): string {
  const lines = issues
    .slice(0, FORMATTED_ISSUES_MAX)
    .map((i) => `${i.path}: ${i.expected}; received ${i.received}`);
  if (issues.length > FORMATTED_ISSUES_MAX) lines.push(`… and ${issues.length - FORMATTED_ISSUES_MAX} more`);
  return lines.join('\n  ');
}
