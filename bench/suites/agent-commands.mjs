// How often a human is asked on 900 real agent commands (bench/agent-commands: public trajectories
// of seven agents), with no approver: the gate's own prompts, plus what the sandbox turns into a
// question later — one escalation per command that writes outside the workspace, and one network
// question per destination off the allow-list per trajectory (answered 'always', it is not asked
// again). Measured with the library's default config (no destination allowed) and with conch-mcp's
// (the package registries and code hosts allowed).
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

function measure(extra) {
  const out = execFileSync(
    process.execPath,
    [join(here, '..', 'agent-commands', 'measure.mjs'), '--json', ...extra],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 * 1024 * 1024 },
  );
  return JSON.parse(out);
}

export default async function () {
  const library = measure([]);
  const mcp = measure(['--registries']);
  const c = library.byClass;
  return [
    {
      name: `agent commands: gate prompts per 100 (${library.commands} real commands, default config, no approver)`,
      conch: library.promptsPer100,
      baseline: null,
      unit: '/100',
      ratio: null,
      goal: 'info (was 43/100 before the sandbox)',
      pass: true,
    },
    {
      name: 'agent commands: questions per 100, library default (gate + escalations + network questions)',
      conch: library.effectivePromptsPer100,
      baseline: null,
      unit: '/100',
      ratio: null,
      goal: '<= 9',
      pass: library.effectivePromptsPer100 <= 9,
    },
    {
      name: "agent commands: questions per 100, conch-mcp's default config (package registries allowed)",
      conch: mcp.effectivePromptsPer100,
      baseline: null,
      unit: '/100',
      ratio: null,
      goal: '<= 2',
      pass: mcp.effectivePromptsPer100 <= 2,
    },
    {
      name: 'agent commands: reads allowed without a prompt',
      conch: (c.read.allowed / c.read.total) * 100,
      baseline: null,
      unit: '%',
      ratio: null,
      goal: '100%',
      pass: c.read.allowed === c.read.total,
    },
  ];
}
