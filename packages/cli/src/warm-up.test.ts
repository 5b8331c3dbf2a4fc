// Invariant: exposing cli warms up in the background — the bash parser loads and the process
// supervisor of the sandbox the gate runs commands in starts without any call, so the first call
// does not wait for them — and a dispose at any point of the warm-up leaves no process behind.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PluginRegistry, TOKENS } from '@conch/core';
import { findBwrap, findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { waitFor } from '@conch/test-support';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cliPlugin, WARM_UP_DELAY_MS } from './plugin.js';
import type { CliWarmUpState } from './plugin.js';
import { cookiePrefix, makeRegistry, sandboxedGate } from './test-support/registry.js';

let dir: string;
const registries: PluginRegistry[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-cli-warm-'));
});
afterEach(async () => {
  for (const r of registries.splice(0)) await r.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/** Every live process of a manager: its commands (cookie) and its supervisors (argv names the prefix). */
function processesOf(prefix: string): number[] {
  const supervisors = readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(prefix);
      } catch {
        return false;
      }
    });
  return [...new Set([...findCookiePids({ prefix }), ...supervisors])].filter((pid) => pidAlive(pid));
}

/** Until the warm-up has started what it starts (WARM_UP_DELAY_MS after expose). */
const warmedUp = (registry: PluginRegistry) =>
  waitFor(async () => (await warmState(registry)).supervisor !== 'pending', { what: 'the warm-up to run' });

async function warmState(registry: PluginRegistry): Promise<CliWarmUpState> {
  return ((await registry.status()) as unknown as { cli: { warmUp: CliWarmUpState } }).cli.warmUp;
}

describe('warm at expose', () => {
  it('the parser loads and the supervisor starts after expose, with no call; the first call uses them', async () => {
    const registry = makeRegistry(dir);
    registries.push(registry);
    const manager = registry.resolve<ProcessManager>(TOKENS.ProcessManager);
    // Started shortly after expose (a gate exposed right after cli is seen), never during it.
    expect(manager.supervisorPids()).toEqual([]);
    await warmedUp(registry);
    await waitFor(async () => (await warmState(registry)).parser === 'ready', { what: 'the parser to load' });
    // Started: 'starting' while its node, bubblewrap and the guard start, then 'running'.
    const supervisorState = async () =>
      ((await registry.status()) as unknown as { processes: { supervisor: string } }).processes.supervisor;
    expect(['starting', 'running']).toContain(await supervisorState());
    await waitFor(async () => (await supervisorState()) === 'running', { what: 'the supervisor to answer' });
    expect((await warmState(registry)).supervisor).toBe('started');
    const warmed = manager.supervisorPids();
    expect(warmed.length).toBeGreaterThan(0);
    const r = (await registry.execute('cli_based_tool', { command: 'echo $PPID' })) as Record<
      string,
      unknown
    >;
    expect(r.returncode).toBe(0);
    // The command ran in the supervisor warm-up started: no second one was started for it.
    expect(manager.supervisorPids()).toEqual(expect.arrayContaining(warmed));
    expect(r.stdout).not.toBe(`${process.pid}\n`);
  });

  it.skipIf(!findBwrap())('with a sandboxing gate, the sandboxed supervisor is the one warmed', async () => {
    const registry = new PluginRegistry({ cwd: dir, plugins: [cliPlugin] });
    registries.push(registry);
    registry.container.register(TOKENS.PermissionGate, { useValue: sandboxedGate(dir) });
    registry.exposeSync('cli', { background: false, safeRm: false });
    await warmedUp(registry);
    const manager = registry.resolve<ProcessManager>(TOKENS.ProcessManager);
    const warmed = manager.supervisorPids();
    // bwrap and the node inside it (once it is ready).
    expect(warmed.length).toBeGreaterThan(0);
    const r = (await registry.execute('cli_based_tool', {
      command: 'touch made-inside && echo ok',
    })) as Record<string, unknown>;
    expect(r).toMatchObject({ returncode: 0, sandbox: 'workspace-write' });
    expect(manager.supervisorPids()).toEqual(expect.arrayContaining([warmed[0]]));
  });

  it('without a permission gate nothing is started', async () => {
    const registry = new PluginRegistry({ cwd: dir, plugins: [cliPlugin] });
    registries.push(registry);
    registry.exposeSync('cli', { background: false, safeRm: false });
    await warmedUp(registry);
    expect((await warmState(registry)).supervisor).toBe('skipped');
    expect(registry.resolve<ProcessManager>(TOKENS.ProcessManager).supervisorPids()).toEqual([]);
  });

  it('a dispose right after expose leaves no process (the warm-up never starts)', async () => {
    const registry = makeRegistry(dir);
    const prefix = cookiePrefix(registry);
    await registry.dispose();
    await new Promise((resolve) => setTimeout(resolve, WARM_UP_DELAY_MS + 100));
    expect(processesOf(prefix)).toEqual([]);
  });

  it('a dispose while the warmed supervisor is still starting kills it', async () => {
    for (const gate of [undefined, ...(findBwrap() ? [sandboxedGate(dir)] : [])]) {
      const registry = gate ? new PluginRegistry({ cwd: dir, plugins: [cliPlugin] }) : makeRegistry(dir);
      if (gate) {
        registry.container.register(TOKENS.PermissionGate, { useValue: gate });
        registry.exposeSync('cli', { background: false, safeRm: false });
      }
      const prefix = cookiePrefix(registry);
      const manager = registry.resolve<ProcessManager>(TOKENS.ProcessManager);
      // Disposed the moment the warm-up has asked for the supervisor (started, not yet ready).
      await waitFor(() => manager.supervisorPids().length > 0, {
        what: 'the warm-up to start a supervisor',
        intervalMs: 1,
      });
      expect(processesOf(prefix).length).toBeGreaterThan(0);
      await registry.dispose();
      expect(processesOf(prefix)).toEqual([]);
    }
  });
});
