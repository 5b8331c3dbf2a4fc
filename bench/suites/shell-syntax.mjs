// Parse time of a typical command with @conch/shell-syntax (tree-sitter-bash in WASM, read once into
// the typed tree, the flat view derived from it), each against a primitive measured alternately in
// the same run: the spawn of the cheapest command a parse decides about (node:child_process spawn of
// `true` to its exit: the parse is paid per command, so it should vanish beside running one; a tenth
// of it leaves room for a spawn as fast as a fast machine's), and
// tree-sitter's own parse of the same text (the floor under our parse). The naive whitespace split
// (`command.split(/\s+/)`) a regex-based tool would do is named as information.
import { loadShellParser } from '@conch/shell-syntax';
import { alternate, alternateBlocks, median, rawRun, time, timedBlock } from '../lib.mjs';
import { rawTreeSitter } from './helpers/raw-tree-sitter.mjs';

/** The command of a typical permission decision. */
const TYPICAL = 'git diff --stat HEAD~1 -- src/ && grep -rn "TODO" src | head -n 20';

export default async function () {
  const parser = await loadShellParser();
  const raw = await rawTreeSitter();
  if (!parser.parse(TYPICAL).syntax) throw new Error('the typical command did not parse');
  // In alternating blocks (100 parses, then 10 spawns), not call by call: a parse right after a
  // spawn meets the spawn's aftermath (its child reaped, its streams closed, caches cold) and would
  // measure that instead.
  const blocks = await alternateBlocks(
    {
      parse: timedBlock(() => parser.parse(TYPICAL)),
      spawn: (n) => time(() => rawRun('true', []), { runs: Math.ceil(n / 10), warmup: 0 }),
    },
    { block: 100, rounds: 10 },
  );
  const spawn = { conch: median(blocks.parse), baseline: median(blocks.spawn) };
  const ts = await alternate(
    () => parser.parse(TYPICAL),
    () => raw(TYPICAL),
    { runs: 3000, warmup: 300 },
  );
  const split = median(await time(() => TYPICAL.split(/\s+/), { runs: 3000, warmup: 300 }));
  return [
    {
      name: `shell-syntax parse of a typical command vs a raw spawn of \`true\` to its exit (median; split(/\\s+/) ${(split * 1000).toFixed(2)} µs)`,
      conch: spawn.conch,
      baseline: spawn.baseline,
      unit: 'ms',
      ratio: spawn.conch / spawn.baseline,
      goal: 'ratio <= 0.1',
      pass: spawn.conch / spawn.baseline <= 0.1,
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
