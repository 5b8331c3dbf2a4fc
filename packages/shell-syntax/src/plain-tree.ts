import type { Language, Tree, TreeCursor } from 'web-tree-sitter';

/**
 * One node of a tree-sitter tree, copied into plain JavaScript. Every property access on a
 * web-tree-sitter `Node` crosses into WASM (and `children` marshals a fresh object per child), so
 * the tree is read exactly once, with one `TreeCursor`, and everything after works on these.
 */
export interface PlainNode {
  type: string;
  named: boolean;
  /** The field this node fills in its parent (`body`, `name`, `operator`, …), or null. */
  field: string | null;
  /** UTF-16 offsets into the parsed text (web-tree-sitter parses JavaScript strings as UTF-16). */
  start: number;
  end: number;
  children: PlainNode[];
  /** An ERROR node or a MISSING node tree-sitter inserted to recover from a syntax error. */
  error?: 'error' | 'missing';
}

/** Per language: whether each node type id is named (one WASM call per type id, ever). */
const namedCache = new WeakMap<Language, boolean[]>();

/** tree-sitter's id for ERROR nodes (`ts_builtin_sym_error`, a uint16 -1). */
const ERROR_TYPE_ID = 0xffff;

/** Thrown by `readTree` when the tree nests deeper than `maxDepth` (chains do not count). */
export class NestingLimitError extends Error {
  constructor(readonly limit: number) {
    super(`the command nests more than ${limit} levels deep`);
  }
}

/**
 * Node types that chain statements left-recursively (`a && b && c` is `list(list(a, b), c)`,
 * `a | b | c` may nest the same way): a node of such a type that is the first child of a node of
 * the same type continues its parent's chain. It does not count as a level of nesting, and with
 * `flattenChains` its children are hung on the parent directly (`list(a, &&, b, &&, c)`), so a
 * chain of any length is a flat list for every reader after this one.
 */
const CHAIN_TYPES: ReadonlySet<string> = new Set(['list', 'pipeline']);

export interface ReadTreeOptions {
  /** Hang the children of a chain continuation on its parent (see CHAIN_TYPES). */
  flattenChains?: boolean;
  /** Nesting levels allowed (chain continuations do not count); deeper throws NestingLimitError. */
  maxDepth?: number;
}

/**
 * Copies `tree` into plain nodes with one pre-order cursor pass: per node its type id, start and
 * end (plus, only when the tree has errors, whether it is MISSING). Two reads are skipped because
 * each is a WASM call: anonymous nodes are tokens and have no children, so the cursor does not try
 * to descend into them; and a child's field is read only when its parent's type is in
 * `fieldParents` (all fields when it is omitted). Iterative, so a deeply nested command cannot
 * overflow the stack here; with `maxDepth` it also refuses one nested deeper than the readers
 * after it (all recursive over the nesting, never over a chain) are built for.
 */
export function readTree(
  tree: Tree,
  fieldParents?: ReadonlySet<string>,
  options: ReadTreeOptions = {},
): PlainNode {
  const language = tree.language;
  let named = namedCache.get(language);
  if (!named) namedCache.set(language, (named = []));
  const types = language.types;
  const fields = language.fields;
  const mayHaveErrors = tree.rootNode.hasError;
  const maxDepth = options.maxDepth ?? Infinity;
  const flatten = options.flattenChains ?? false;
  const cursor = tree.walk();
  try {
    const root = current(cursor, null, types, named, language, mayHaveErrors);
    // Per cursor level, from the root to the node under the cursor: the plain node that receives
    // the children of that level (a flattened chain continuation gives its parent), whether the
    // cursor's node there is named (only named nodes have children), and its nesting level.
    const receivers: PlainNode[] = [root];
    const namedAt: boolean[] = [root.named];
    const levels: number[] = [0];
    for (;;) {
      // Pre-order: the first child, else the next sibling of the nearest node that has one.
      if (!(namedAt[namedAt.length - 1]! && cursor.gotoFirstChild())) {
        for (;;) {
          if (receivers.length === 1) return root;
          receivers.pop();
          namedAt.pop();
          levels.pop();
          if (cursor.gotoNextSibling()) break;
          cursor.gotoParent();
        }
      }
      const parent = receivers[receivers.length - 1]!;
      let field: string | null = null;
      if (!fieldParents || fieldParents.has(parent.type)) {
        const id = cursor.currentFieldId;
        if (id) field = fields[id] ?? null;
      }
      const node = current(cursor, field, types, named, language, mayHaveErrors);
      const continues =
        CHAIN_TYPES.has(node.type) && node.type === parent.type && parent.children.length === 0;
      const level = levels[levels.length - 1]! + (continues ? 0 : 1);
      if (level > maxDepth) throw new NestingLimitError(maxDepth);
      if (continues && flatten) receivers.push(parent);
      else {
        parent.children.push(node);
        receivers.push(node);
      }
      namedAt.push(node.named);
      levels.push(level);
    }
  } finally {
    cursor.delete();
  }
}

function current(
  cursor: TreeCursor,
  field: string | null,
  types: readonly string[],
  named: boolean[],
  language: Language,
  mayHaveErrors: boolean,
): PlainNode {
  const id = cursor.nodeTypeId;
  let isNamed = named[id];
  if (isNamed === undefined) named[id] = isNamed = id === ERROR_TYPE_ID || language.nodeTypeIsNamed(id);
  const node: PlainNode = {
    type: types[id] ?? 'ERROR',
    named: isNamed,
    field,
    start: cursor.startIndex,
    end: cursor.endIndex,
    children: [],
  };
  if (mayHaveErrors) {
    if (id === ERROR_TYPE_ID) node.error = 'error';
    else if (cursor.nodeIsMissing) node.error = 'missing';
  }
  return node;
}
