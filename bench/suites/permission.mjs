// Permission decision time with @conch/permission (parse + per-command policy), each against the
// same work done raw in the same run, so the pass column holds on a fast and on a slow machine:
// - a typical command, and three in the workspace-write sandbox, against one raw tree-sitter parse
//   of the same text (helpers/raw-tree-sitter.mjs: what knowing a command's intent costs at the
//   least), alternating; the naive regex deny-list string-matching tools use
//   (`/\b(sudo|rm -rf)\b/.test(command)`) is named as information;
// - a 1 MB command, which must fail closed quickly, against JSON.parse of the tool call's arguments
//   that carry it: the host reads those 1 MB once just to receive the call, and refusing it should
//   cost about as much as reading it (a spawn, or a pipe through `cat`, would add process costs
//   that differ from machine to machine far more than the CPU's).
import 'reflect-metadata';
import { PermissionEngine, permissionConfigSchema } from '@conch/permission';
import { loadShellParser } from '@conch/shell-syntax';
import { alternate, median, time } from '../lib.mjs';
import { rawTreeSitter } from './helpers/raw-tree-sitter.mjs';

const TYPICAL = 'git diff --stat HEAD~1 -- src/ && grep -rn "TODO" src | head -n 20';
const NAIVE = /\b(sudo|su|doas|rm\s+-rf|curl[^|]*\|\s*(ba)?sh)\b/;
const us = (ms) => `${(ms * 1000).toFixed(1)} µs`;

export default async function () {
  const parser = await loadShellParser();
  const raw = await rawTreeSitter();
  const engine = new PermissionEngine({
    parser,
    config: permissionConfigSchema.parse({}),
    cwd: process.cwd(),
  });
  const sandboxed = new PermissionEngine({
    parser,
    config: permissionConfigSchema.parse({}),
    cwd: process.cwd(),
    sandbox: 'workspace-write',
  });
  const request = (command) => ({ kind: 'command', tool: 'bench', command, cwd: process.cwd() });
  let id = 0;
  const runs = { runs: 2000, warmup: 200 };
  const decide = async (gate, command) => {
    const decided = await alternate(
      () => gate.check(request(command), { callId: String(id++) }),
      () => raw(command),
      runs,
    );
    const regex = median(await time(() => NAIVE.test(command), runs));
    return { ...decided, regex };
  };
  const typical = await decide(engine, TYPICAL);
  const inSandbox = {};
  for (const command of [TYPICAL, 'rm -rf build dist', 'npm test && git add -A && git commit -m wip']) {
    inSandbox[command] = await decide(sandboxed, command);
  }
  const huge = `echo ${'a'.repeat(1024 * 1024)} && sudo true`;
  const hugeCall = JSON.stringify({ command: huge });
  let outcome;
  const hugeRuns = { runs: 20, warmup: 2 };
  const hugeDecided = await alternate(
    async () => {
      outcome = (await engine.check(request(huge), { callId: String(id++) })).outcome;
    },
    async () => JSON.parse(hugeCall),
    hugeRuns,
  );
  const hugeRegex = median(await time(() => NAIVE.test(huge), hugeRuns));
  // A decision costs a parse and the policy on top; 40 raw parses leave room for the policy's
  // path lookups (a few syscalls, slow on a VM) without letting a regression through.
  const parseRow = (name, d) => ({
    name: `${name} (median; baseline: a raw tree-sitter parse of it; regex deny-list ${us(d.regex)})`,
    conch: d.conch,
    baseline: d.baseline,
    unit: 'ms',
    ratio: d.conch / d.baseline,
    goal: 'ratio <= 40',
    pass: d.conch / d.baseline <= 40,
  });
  return [
    parseRow('permission decision, typical command', typical),
    ...Object.entries(inSandbox).map(([command, d]) =>
      parseRow(`permission decision in the workspace-write sandbox: \`${command}\``, d),
    ),
    {
      name: `permission decision, 1 MB command (median, fails closed: ${outcome}; baseline: JSON.parse of the tool call carrying it; regex deny-list ${hugeRegex.toFixed(2)} ms)`,
      conch: hugeDecided.conch,
      baseline: hugeDecided.baseline,
      unit: 'ms',
      ratio: hugeDecided.conch / hugeDecided.baseline,
      goal: 'ratio <= 2, denied',
      pass: hugeDecided.conch / hugeDecided.baseline <= 2 && outcome === 'deny',
    },
  ];
}
