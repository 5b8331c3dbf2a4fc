// Invariant: the one cursor pass copies the tree-sitter tree exactly as the Node API shows it (types, named-ness, fields, offsets, errors), and reading fields only under FIELD_PARENTS converts to the same syntax tree.
import { Language, Parser, type Node, type Tree } from 'web-tree-sitter';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BASH_GRAMMAR_WASM } from './parser.js';
import { NestingLimitError, readTree, type PlainNode } from './plain-tree.js';
import { FIELD_PARENTS, SyntaxConverter } from './syntax-tree.js';
import { SAMPLES } from './test-support/samples.js';

let parser: Parser;
const trees: Tree[] = [];
beforeAll(async () => {
  await Parser.init();
  const language = await Language.load(BASH_GRAMMAR_WASM);
  parser = new Parser();
  parser.setLanguage(language);
});
afterAll(() => {
  for (const t of trees) t.delete();
  parser.delete();
});

function parse(source: string): Tree {
  const tree = parser.parse(source)!;
  trees.push(tree);
  return tree;
}

/** The same copy through the Node API, one node at a time: the slow oracle. */
function reference(node: Node, field: string | null): PlainNode {
  const out: PlainNode = {
    type: node.type,
    named: node.isNamed,
    field,
    start: node.startIndex,
    end: node.endIndex,
    children: node.children.map((child, i) => reference(child!, node.fieldNameForChild(i))),
  };
  if (node.isError) out.error = 'error';
  else if (node.isMissing) out.error = 'missing';
  return out;
}

// Odd and broken input too: errors, MISSING tokens, deep nesting, multi-byte text.
const EXTRA = [
  '',
  'echo "open',
  'if true; then',
  'a &&',
  'echo $(ls',
  'ls )',
  '{rm,-rf,x}',
  'echo é 日本 😀 "ü" > ñ',
  `echo ${'$('.repeat(40)}x${')'.repeat(40)}`,
  'case x in (a) ls;& b) pwd;;& esac',
];

describe('readTree', () => {
  it.each([...SAMPLES, ...EXTRA])('copies %j exactly', (source) => {
    const tree = parse(source);
    expect(readTree(tree)).toEqual(reference(tree.rootNode, null));
  });

  it.each([...SAMPLES, ...EXTRA])(
    '%j converts the same with fields read only under FIELD_PARENTS',
    (source) => {
      const tree = parse(source);
      const all = new SyntaxConverter(source).convert(readTree(tree));
      expect(new SyntaxConverter(source).convert(readTree(tree, FIELD_PARENTS))).toEqual(all);
    },
  );

  it.each([
    ...SAMPLES,
    ...EXTRA,
    'a && b || c && d',
    'a | b && c | d || e',
    'a && b > f && c',
    'cat <<E && a || b\nx\nE',
  ])('%j converts the same with chains flattened', (source) => {
    const tree = parse(source);
    const all = new SyntaxConverter(source).convert(readTree(tree));
    expect(
      new SyntaxConverter(source).convert(readTree(tree, FIELD_PARENTS, { flattenChains: true })),
    ).toEqual(all);
  });

  it('hangs a chain of any length on one node, and counts only real nesting against maxDepth', () => {
    const chain = parse(Array(3_000).fill('a').join(' && '));
    const flat = readTree(chain, FIELD_PARENTS, { flattenChains: true, maxDepth: 8 });
    expect(flat.children[0]!.type).toBe('list');
    expect(flat.children[0]!.children).toHaveLength(2 * 3_000 - 1);
    // Unflattened, the same chain is as deep as it is long, but still within 8 levels of nesting.
    expect(() => readTree(chain, undefined, { maxDepth: 8 })).not.toThrow();
    const nested = parse(`echo ${'$('.repeat(10)}x${')'.repeat(10)}`);
    expect(() => readTree(nested, undefined, { maxDepth: 8 })).toThrow(NestingLimitError);
  });

  it('skips field reads outside FIELD_PARENTS (the saving is real)', () => {
    const tree = parse('git diff --stat HEAD~1 -- src/ && grep -rn "TODO" src | head -n 20');
    const fields = (n: PlainNode): number =>
      (n.field ? 1 : 0) + n.children.reduce((s, c) => s + fields(c), 0);
    expect(fields(readTree(tree))).toBeGreaterThan(0);
    expect(fields(readTree(tree, FIELD_PARENTS))).toBe(0);
  });
});
