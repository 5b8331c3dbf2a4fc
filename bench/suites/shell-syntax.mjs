// Parse time of a typical command with @conch/shell-syntax (tree-sitter-bash, WASM) vs the naive
// whitespace split (`command.split(/\s+/)`) a regex-based tool would do instead.
import { loadShellParser } from '@conch/shell-syntax';

const TYPICAL = 'git diff --stat HEAD~1 -- src/ && npm test -- --run 2>&1 | tail -n 20';

export default async function ({ median, time }) {
  const parser = await loadShellParser();
  const runs = { runs: 3000, warmup: 300 };
  const conch = median(await time(() => parser.parse(TYPICAL), runs));
  const baseline = median(await time(() => TYPICAL.split(/\s+/), runs));
  return [
    {
      name: 'shell-syntax parse of a typical command (median; baseline: split(/\\s+/))',
      conch,
      baseline,
      unit: 'ms',
      ratio: conch / baseline,
      goal: 'conch < 0.2 ms',
      pass: conch < 0.2,
    },
  ];
}
