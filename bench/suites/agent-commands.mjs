// How often the gate prompts a human on 900 real agent commands (bench/agent-commands: public
// trajectories of seven agents), with the default config and no approver. A command the sandbox
// will refuse (it needs the network or writes outside the workspace) costs at most one escalation
// prompt later (`sandbox: false` + justification), so the row counts those too.
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export default async function () {
  const out = execFileSync(process.execPath, [join(here, '..', 'agent-commands', 'measure.mjs'), '--json'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
    maxBuffer: 64 * 1024 * 1024,
  });
  const m = JSON.parse(out);
  const c = m.byClass;
  const leaving = c.network.allowed + c.outside.allowed;
  const effective = ((c.total.prompts + leaving) / m.commands) * 100;
  return [
    {
      name: `agent commands: gate prompts per 100 (${m.commands} real commands, default config, no approver)`,
      conch: m.promptsPer100,
      baseline: null,
      unit: '/100',
      ratio: null,
      goal: 'info (was 43/100 before the sandbox)',
      pass: true,
    },
    {
      name: 'agent commands: prompts + escalations the sandbox will cause (network, writes outside) per 100',
      conch: effective,
      baseline: null,
      unit: '/100',
      ratio: null,
      goal: '<= 9',
      pass: effective <= 9,
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
