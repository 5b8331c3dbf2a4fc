// The sandbox's cost per command, measured on the process manager alone (no gate, no cli): `true`
// in the workspace-write sandbox against the same spawn unsandboxed, and with the network proxy on
// (its bridge in the supervisor, proxy variables in the environment) against no network. The
// namespaces and the bridge are set up once per sandbox, so a command should cost what an
// unsandboxed one does.
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findBwrap, ProcessManager } from '@conch/process';
import { alternate, median } from '../lib.mjs';
import { buildCHelper } from './helpers/cc.mjs';

export default async function () {
  if (!findBwrap())
    return [{ name: 'sandbox: rows skipped (no bwrap)', conch: NaN, baseline: NaN, unit: '', ratio: NaN }];
  const ws = mkdtempSync(join(tmpdir(), 'conch-bench-sandbox-'));
  // One manager per sandbox shape: a manager keeps one sandbox of a kind at a time (a new shape
  // replaces an idle one), so alternating shapes in one manager would measure sandbox starts.
  const managers = [0, 1, 2].map(
    () => new ProcessManager({ cwd: ws, network: { decide: async () => ({ allowed: false }) } }),
  );
  // The same sandbox without the path guard (bubblewrap's mounts alone): what a sandboxed command
  // cost before the guard, the baseline of the guard's row.
  const unguarded = new ProcessManager({ cwd: ws, guard: false });
  managers.push(unguarded);
  // The same sandbox with every resource limit off (no rlimits, no pid_max, no process watch,
  // tmpfs at the kernel's size): what a sandboxed command cost before the limits.
  const unlimited = new ProcessManager({ cwd: ws });
  managers.push(unlimited);
  const noLimits = { tmpfsBytes: 0, memoryBytes: 0, processes: 0, idleMs: 0 };
  const base = { kind: 'workspace-write', writableRoots: [ws], readOnlyPaths: [] };
  const run = (sandbox) => {
    const manager = managers[!sandbox ? 0 : sandbox.network === 'proxy' ? 2 : 1];
    return manager.spawn('true', [], sandbox ? { sandbox } : {}).result;
  };
  try {
    for (const s of [undefined, base, { ...base, network: 'proxy' }]) {
      const r = await run(s);
      if (r.exitCode !== 0)
        throw new Error(`true failed in ${JSON.stringify(s)}: ${JSON.stringify(r.spawnError)}`);
    }
    const boxed = await alternate(
      () => run(base),
      () => run(undefined),
    );
    const net = await alternate(
      () => run({ ...base, network: 'proxy' }),
      () => run(base),
    );
    const guarded = (await managers[1].status()).guard;
    const plain = (file, args) => unguarded.spawn(file, args, { sandbox: base }).result;
    const boxedRun = (file, args) => managers[1].spawn(file, args, { sandbox: base }).result;
    await plain('true', []);
    const guard = await alternate(
      () => boxedRun('true', []),
      () => plain('true', []),
    );
    // The default limits (resource-limits.ts) are set up once per sandbox: a command should cost
    // what it did without them.
    const bare = (file, args) =>
      unlimited.spawn(file, args, { sandbox: { ...base, resources: noLimits } }).result;
    await bare('true', []);
    const limited = await alternate(
      () => boxedRun('true', []),
      () => bare('true', []),
    );
    const limits = (await managers[1].status()).limits;
    // node's start opens a few dozen files (its own and the addon's), each judged by the guard.
    const nodeStart = await alternate(
      () => boxedRun(process.execPath, ['-e', '0']),
      () => plain(process.execPath, ['-e', '0']),
      { runs: 40, warmup: 3 },
    );
    // One guarded open against the kernel's own (a C loop, so nothing else is counted): what the
    // guard adds to every open, twice to a dynamically linked program's start. The binary is put in
    // the workspace (the sandbox's /tmp is its own).
    const openRow = await guardedOpen(
      ws,
      (file, args) => boxedRun(file, args),
      (file, args) => managers[0].spawn(file, args).result,
    );
    return [
      openRow,
      {
        name: 'sandbox: `true` in the workspace-write sandbox vs unsandboxed, process manager (median of 300)',
        conch: boxed.conch,
        baseline: boxed.baseline,
        unit: 'ms',
        ratio: boxed.conch / boxed.baseline,
        goal: 'ratio <= 1.2',
        pass: boxed.conch / boxed.baseline <= 1.2,
      },
      {
        name: 'sandbox: `true` with the network proxy on vs no network (median of 300)',
        conch: net.conch,
        baseline: net.baseline,
        unit: 'ms',
        ratio: net.conch / net.baseline,
        goal: 'ratio <= 1.2',
        pass: net.conch / net.baseline <= 1.2,
      },
      {
        name: `sandbox: \`true\` under the path guard vs the same sandbox without it (mounts alone; guard ${guarded.active ? 'active' : `not active: ${guarded.reason}`}), median of 300`,
        conch: guard.conch,
        baseline: guard.baseline,
        unit: 'ms',
        ratio: guard.conch / guard.baseline,
        goal: 'ratio <= 1.2',
        pass: guarded.active && guard.conch / guard.baseline <= 1.2,
      },
      {
        name: `sandbox: \`true\` with the default resource limits (${limits.mechanism}: memory ${limits.memory.enforcedBy}, processes ${limits.processes.enforcedBy}, tmpfs ${limits.tmpfs.sized ? 'sized' : 'unsized'}) vs the same sandbox with every limit off, median of 300`,
        conch: limited.conch,
        baseline: limited.baseline,
        unit: 'ms',
        ratio: limited.conch / limited.baseline,
        goal: 'ratio <= 1.2',
        pass: limited.conch / limited.baseline <= 1.2,
      },
      {
        name: 'sandbox: `node -e 0` under the path guard vs without it (every open judged; median of 40)',
        conch: nodeStart.conch,
        baseline: nodeStart.baseline,
        unit: 'ms',
        ratio: nodeStart.conch / nodeStart.baseline,
        goal: 'info',
        pass: true,
      },
    ];
  } finally {
    await Promise.all(managers.map((m) => m.dispose()));
    rmSync(ws, { recursive: true, force: true });
  }
}

/** The guarded-open row: the median of 5 runs of 5,000 opens of /etc/ld.so.cache each way. */
async function guardedOpen(ws, inside, outside) {
  const name =
    "sandbox: one open() under the path guard vs outside (C loop of 5,000 opens of /etc/ld.so.cache, median of 5 runs; a dynamic program's start makes two)";
  const helper = buildCHelper('open-loop');
  if (!helper.path)
    return { name: `${name}: skipped (${helper.reason})`, conch: NaN, baseline: NaN, unit: '', ratio: NaN };
  const binary = join(ws, 'open-loop');
  copyFileSync(helper.path, binary);
  const times = { inside: [], outside: [] };
  for (let i = 0; i < 5; i++) {
    for (const [where, run] of [
      ['inside', inside],
      ['outside', outside],
    ]) {
      const r = await run(binary, ['5000', '/etc/ld.so.cache']);
      const us = Number(r.stdout.head.trim());
      if (r.exitCode !== 0 || !Number.isFinite(us))
        throw new Error(`open-loop failed ${where}: ${r.stderr.head}`);
      times[where].push(us);
    }
  }
  const conch = median(times.inside);
  const baseline = median(times.outside);
  return { name, conch, baseline, unit: 'µs', ratio: conch / baseline, goal: 'info', pass: true };
}
