import type { ValidationIssue } from './errors/validation-issue.js';

/**
 * The shape limits arguments are checked against before their schema sees them. zod validates
 * recursively, so arguments nested 100,000 deep overflowed the stack ('Maximum call stack size
 * exceeded') instead of failing validation; this check is iterative and stops at the first value
 * past a limit, naming its field.
 */
export interface ArgumentLimits {
  /** Levels of nesting (objects and arrays) allowed. */
  maxDepth: number;
  /** Values (objects, arrays, primitives) allowed in total. */
  maxValues: number;
}

export const DEFAULT_ARGUMENT_LIMITS: ArgumentLimits = { maxDepth: 64, maxValues: 100_000 };

interface Node {
  value: unknown;
  depth: number;
  parent: Node | undefined;
  key: string;
}

function fieldOf(node: Node): string {
  const keys: string[] = [];
  for (let n: Node | undefined = node; n?.parent; n = n.parent) keys.push(n.key);
  if (keys.length === 0) return '(root)';
  keys.reverse();
  return keys.length > 12 ? `${keys.slice(0, 6).join('.')}.….${keys.slice(-3).join('.')}` : keys.join('.');
}

/** The first limit `args` goes past, as a validation issue naming the field; undefined when within. */
export function checkArgumentLimits(args: unknown, limits: ArgumentLimits): ValidationIssue | undefined {
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
