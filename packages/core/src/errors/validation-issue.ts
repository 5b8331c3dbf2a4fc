import type { z } from 'zod';

export interface ValidationIssue {
  /** Dotted path of the offending field, e.g. `maxOutputChars` or `rules.allow.0`. */
  path: string;
  /** What was expected, in words. */
  expected: string;
  /** What was given, rendered for humans. */
  received: string;
}

export function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing (undefined)';
  if (typeof value === 'string')
    return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value);
  if (typeof value === 'function') return 'a function';
  try {
    const json = JSON.stringify(value);
    return json.length > 80 ? `${json.slice(0, 77)}...` : json;
  } catch {
    return String(value);
  }
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let current = input;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

/** Turns zod issues into field / expected / received triples that read well in one line. */
export function toValidationIssues(error: z.ZodError, input: unknown): ValidationIssue[] {
  return error.issues.map((issue) => {
    const path = issue.path.map(String).join('.') || '(root)';
    if (issue.code === 'unrecognized_keys') {
      return {
        path: [...issue.path.map(String), ...issue.keys].join('.') || '(root)',
        expected: `no such key (unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.join(', ')})`,
        received: describeValue(valueAt(input, [...issue.path, issue.keys[0] ?? ''])),
      };
    }
    return { path, expected: issue.message, received: describeValue(valueAt(input, issue.path)) };
  });
}

export function formatIssues(issues: readonly ValidationIssue[]): string {
  return issues.map((i) => `${i.path}: ${i.expected}; received ${i.received}`).join('\n  ');
}
