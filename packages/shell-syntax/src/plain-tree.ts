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

/**
 * Copies `tree` into plain nodes with one pre-order cursor pass: per node its type id, start and
 * end (plus, only when the tree has errors, whether it is MISSING). Two reads are skipped because
 * each is a WASM call: anonymous nodes are tokens and have no children, so the cursor does not try
 * to descend into them; and a child's field is read only when its parent's type is in
 * `fieldParents` (all fields when it is omitted). Iterative, so a deeply nested command cannot
 * overflow the stack here.
 */
export function readTree(tree: Tree, fieldParents?: ReadonlySet<string>): PlainNode {
  const language = tree.language;
  let named = namedCache.get(language);
  if (!named) namedCache.set(language, (named = []));
  const types = language.types;
  const fields = language.fields;
  const mayHaveErrors = tree.rootNode.hasError;
  const cursor = tree.walk();
  try {
    const root = current(cursor, null, types, named, language, mayHaveErrors);
    // The nodes from the root to the one under the cursor.
    const path: PlainNode[] = [root];
    for (;;) {
      // Pre-order: the first child, else the next sibling of the nearest node that has one.
      if (!(path[path.length - 1]!.named && cursor.gotoFirstChild())) {
        for (;;) {
          if (path.length === 1) return root;
          path.pop();
          if (cursor.gotoNextSibling()) break;
          cursor.gotoParent();
        }
      }
      const parent = path[path.length - 1]!;
      let field: string | null = null;
      if (!fieldParents || fieldParents.has(parent.type)) {
        const id = cursor.currentFieldId;
        if (id) field = fields[id] ?? null;
      }
      const node = current(cursor, field, types, named, language, mayHaveErrors);
      parent.children.push(node);
      path.push(node);
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
