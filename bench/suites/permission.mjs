// Permission decision time with @conch/permission (parse + per-command policy) vs the naive regex
// deny-list string-matching tools use (`/\b(sudo|rm -rf)\b/.test(command)`), for a typical command
// and for a 1 MB command, which must fail closed quickly.
import 'reflect-metadata';
import { PermissionEngine, permissionConfigSchema } from '@conch/permission';
import { loadShellParser } from '@conch/shell-syntax';

const TYPICAL = 'git diff --stat HEAD~1 -- src/ && grep -rn "TODO" src | head -n 20';
const NAIVE = /\b(sudo|su|doas|rm\s+-rf|curl[^|]*\|\s*(ba)?sh)\b/;

export default async function ({ median, time }) {
  const parser = await loadShellParser();
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
  const typical = median(
    await time(() => engine.check(request(TYPICAL), { callId: String(id++) }), { runs: 2000, warmup: 200 }),
  );
  const typicalBase = median(await time(() => NAIVE.test(TYPICAL), { runs: 2000, warmup: 200 }));
  const inSandbox = {};
  for (const command of [TYPICAL, 'rm -rf build dist', 'npm test && git add -A && git commit -m wip']) {
    inSandbox[command] = median(
      await time(() => sandboxed.check(request(command), { callId: String(id++) }), {
        runs: 2000,
        warmup: 200,
      }),
    );
  }
  const huge = `echo ${'a'.repeat(1024 * 1024)} && sudo true`;
  let outcome;
  const hugeTimes = await time(
    async () => {
      outcome = (await engine.check(request(huge), { callId: String(id++) })).outcome;
    },
    { runs: 20, warmup: 2 },
  );
  const hugeConch = median(hugeTimes);
  const hugeBase = median(await time(() => NAIVE.test(huge), { runs: 20, warmup: 2 }));
  return [
    {
      name: 'permission decision, typical command (median; baseline: regex deny-list)',
      conch: typical,
      baseline: typicalBase,
      unit: 'ms',
      ratio: typical / typicalBase,
      goal: 'conch < 0.5 ms',
      pass: typical < 0.5,
    },
    ...Object.entries(inSandbox).map(([command, ms]) => ({
      name: `permission decision in the workspace-write sandbox: \`${command}\` (median)`,
      conch: ms,
      baseline: typicalBase,
      unit: 'ms',
      ratio: ms / typicalBase,
      goal: 'conch <= 0.5 ms',
      pass: ms <= 0.5,
    })),
    {
      name: `permission decision, 1 MB command (median, fails closed: ${outcome}; baseline: regex deny-list)`,
      conch: hugeConch,
      baseline: hugeBase,
      unit: 'ms',
      ratio: hugeConch / hugeBase,
      goal: 'conch < 100 ms, denied',
      pass: hugeConch < 100 && outcome === 'deny',
    },
  ];
}
