// Parse time of a typical command with @conch/shell-syntax (tree-sitter-bash in WASM, read once into
// the typed tree, the flat view derived from it) against tree-sitter's own parse of the same text,
// and against the naive whitespace split (`command.split(/\s+/)`) a regex-based tool would do.
import { createRequire } from 'node:module';
import { loadShellParser } from '@conch/shell-syntax';
import { alternate } from '../lib.mjs';

/** The command of a typical permission decision. */
const TYPICAL = 'git diff --stat HEAD~1 -- src/ && grep -rn "TODO" src | head -n 20';

/** tree-sitter-bash through web-tree-sitter with nothing on top: the floor under our parse. */
async function rawTreeSitter() {
  const require = createRequire(import.meta.resolve('@conch/shell-syntax'));
  const { Language, Parser } = await import(require.resolve('web-tree-sitter'));
  await Parser.init();
  const parser = new Parser();
  parser.setLanguage(await Language.load(require.resolve('tree-sitter-bash/tree-sitter-bash.wasm')));
  return (source) => parser.parse(source).delete();
}

export default async function () {
  const parser = await loadShellParser();
  const raw = await rawTreeSitter();
  if (!parser.parse(TYPICAL).syntax) throw new Error('the typical command did not parse');
  const runs = { runs: 3000, warmup: 300 };
  const split = await alternate(
    () => parser.parse(TYPICAL),
    () => TYPICAL.split(/\s+/),
    runs,
  );
  const ts = await alternate(
    () => parser.parse(TYPICAL),
    () => raw(TYPICAL),
    runs,
  );
  return [
    {
      name: 'shell-syntax parse of a typical command (median; baseline: split(/\\s+/))',
      conch: split.conch,
      baseline: split.baseline,
      unit: 'ms',
      ratio: split.conch / split.baseline,
      goal: 'conch <= 0.15 ms',
      pass: split.conch <= 0.15,
    },
    {
      name: 'shell-syntax parse vs tree-sitter parse alone (median; the cost of the typed tree)',
      conch: ts.conch,
      baseline: ts.baseline,
      unit: 'ms',
      ratio: ts.conch / ts.baseline,
      goal: 'ratio <= 3',
      pass: ts.conch / ts.baseline <= 3,
    },
  ];
}
