// Registry overhead: execute() of a trivial tool against the same call through a hand-rolled
// executor that does the per-call work execute promises with node's own primitives (call id,
// AbortController, events, zod validation, the awaited call: helpers/inc-registry.mjs), measured
// alternately. Both are in-process JavaScript, so their ratio holds on a fast and on a slow
// machine, where a goal in microseconds would judge the CPU.
import { alternate, median, time } from '../lib.mjs';
import { handRolledExecute, inc, incRegistry, incSchema } from './helpers/inc-registry.mjs';

export default async function () {
  const registry = await incRegistry();
  try {
    const args = { n: 1 };
    const { conch, baseline } = await alternate(
      () => registry.execute('inc', args),
      () => handRolledExecute(args),
      { runs: 3000, warmup: 300 },
    );
    const parse = median(await time(async () => inc(incSchema.parse(args)), { runs: 2000, warmup: 200 }));
    return [
      {
        name: `registry.execute of a trivial tool (median; baseline: a hand-rolled executor doing the same per-call work; its zod parse + call alone ${(parse * 1000).toFixed(2)} µs)`,
        conch,
        baseline,
        unit: 'ms',
        ratio: conch / baseline,
        goal: 'ratio <= 6',
        pass: conch / baseline <= 6,
      },
    ];
  } finally {
    await registry.dispose();
  }
}
