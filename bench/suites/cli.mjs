// cli_based_tool end to end (registry.execute -> permission gate -> plan -> supervisor spawn ->
// capture -> result), against a raw node:child_process spawn of the same command; and the kernel
// wall's cost: `true` in the default workspace-write sandbox against the same call with no sandbox,
// and (sandbox 'off') an allowed read-only command in the read-only sandbox against no wall. Each
// goal row times registries that have made JIT_WARMUP_CALLS calls (lib.mjs: a fresh process keeps
// compiling what a call runs for its first few thousand); the sandbox row before the warm-up is an
// information row beside it.
import 'reflect-metadata';
import { PluginRegistry } from '@conch/core';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { permissionPlugin } from '@conch/permission';
import { findBwrap } from '@conch/process';
import { alternate, JIT_WARMUP_CALLS, rawRun, warmUp } from '../lib.mjs';

async function registryWith(permission) {
  const registry = new PluginRegistry({ plugins: [permissionPlugin, cliPlugin, backgroundPlugin] });
  await registry.expose('permission', permission);
  await registry.expose('cli', {});
  return registry;
}

async function check(registry, command, mode) {
  const r = await registry.execute('cli_based_tool', { command });
  if (r.returncode !== 0 || r.mode !== mode) throw new Error(`unexpected result ${JSON.stringify(r)}`);
}

export default async function () {
  const rows = [];
  const sandboxed = await registryWith({});
  const walled = await registryWith({ sandbox: 'off' });
  const open = await registryWith({ sandbox: 'off', kernelWall: false });
  try {
    await check(open, 'true', 'direct');
    const call = (registry) => () => registry.execute('cli_based_tool', { command: 'true' });
    // A fresh host's first calls (information): the sandbox row's alternation before the warm-up.
    let fresh;
    if (findBwrap()) {
      await check(sandboxed, 'true', 'direct');
      fresh = await alternate(call(sandboxed), call(open));
    }
    await warmUp([call(sandboxed), call(walled), call(open)]);
    const { conch: c, baseline: b } = await alternate(call(open), () => rawRun('true', []));
    rows.push({
      name: 'cli: cli_based_tool direct `true` with the permission gate, no wall (median of 300; baseline: raw spawn)',
      conch: c,
      baseline: b,
      unit: 'ms',
      ratio: c / b,
      goal: 'ratio <= 2.0',
      pass: c / b <= 2,
    });
    if (findBwrap()) {
      const { conch: s, baseline: u } = await alternate(call(sandboxed), call(open));
      rows.push({
        name: `cli: \`true\` in the workspace-write sandbox (the default) vs no sandbox (median of 300, after ${JIT_WARMUP_CALLS} calls of each registry)`,
        conch: s,
        baseline: u,
        unit: 'ms',
        ratio: s / u,
        goal: 'ratio <= 1.2',
        pass: s / u <= 1.2,
      });
      rows.push({
        name: "cli: the same, fresh registries' calls 21-320 (median of 300, before the warm-up: V8 still compiles the code a call runs)",
        conch: fresh.conch,
        baseline: fresh.baseline,
        unit: 'ms',
        ratio: fresh.conch / fresh.baseline,
        goal: 'info (a fresh host)',
        pass: true,
      });
      await check(walled, 'ls -la', 'direct');
      await check(open, 'ls -la', 'direct');
      const { conch: w, baseline: o } = await alternate(
        () => walled.execute('cli_based_tool', { command: 'ls -la' }),
        () => open.execute('cli_based_tool', { command: 'ls -la' }),
      );
      rows.push({
        name: "cli: sandbox 'off': allowed read-only `ls -la` in the read-only sandbox vs the wall off (median of 300)",
        conch: w,
        baseline: o,
        unit: 'ms',
        ratio: w / o,
        goal: 'ratio <= 1.2',
        pass: w / o <= 1.2,
      });
    } else {
      rows.push({
        name: 'cli: kernel wall row skipped (no bwrap)',
        conch: NaN,
        baseline: NaN,
        unit: '',
        ratio: NaN,
      });
    }
    return rows;
  } finally {
    await Promise.all([sandboxed.dispose(), walled.dispose(), open.dispose()]);
  }
}
