// Registry overhead: execute() of a trivial tool vs calling the function directly.
import { inc as fn, incRegistry } from './helpers/inc-registry.mjs';

export default async function ({ median, time }) {
  const registry = await incRegistry();
  const conch = median(await time(() => registry.execute('inc', { n: 1 }), { runs: 2000, warmup: 200 }));
  const baseline = median(await time(async () => fn({ n: 1 }), { runs: 2000, warmup: 200 }));
  await registry.dispose();
  return [
    {
      name: 'registry.execute overhead (median)',
      conch,
      baseline,
      unit: 'ms',
      ratio: conch / baseline,
      goal: 'conch < 0.05 ms',
      pass: conch < 0.05,
    },
  ];
}
