import type { AndOr, Statement } from './syntax-types.js';

/**
 * An and-or list read left to right without recursion: `a && b || c` is the typed tree
 * `and-or(and-or(a, &&, b), ||, c)`, nested as deep as the list is long, so a reader that recursed
 * into `left` would overflow its stack on a few thousand `&&`. `items` are the operands in order,
 * `operators[i]` joins `items[i]` and `items[i + 1]`, and `nodes` are the and-or nodes of the left
 * spine, innermost first (each may carry redirects of its own). An item may still be an and-or on
 * the right: a long run of one operator grouped as a balanced tree by the converter, or what
 * follows a here-document's start (`cat <<E && a || b`); neither is deep.
 */
export function andOrChain(st: AndOr): { items: Statement[]; operators: ('&&' | '||')[]; nodes: AndOr[] } {
  const spine: AndOr[] = [];
  let left: Statement = st;
  while (left.kind === 'and-or') {
    spine.push(left);
    left = left.left;
  }
  spine.reverse();
  const items: Statement[] = [left];
  const operators: ('&&' | '||')[] = [];
  for (const node of spine) {
    operators.push(node.operator);
    items.push(node.right);
  }
  return { items, operators, nodes: spine };
}
