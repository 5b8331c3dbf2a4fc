// Invariant: the permission config's `resources` reach the sandbox through the kernel policy
// (one policy object while the policy is unchanged), and a bad value is refused naming its field.
import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InvalidConfigError, PluginRegistry } from '@conch/core';
import { defaultSandboxResources } from '@conch/sandbox';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { toSandboxResources } from './config.js';
import { getPermissionEngine, permissionPlugin } from './plugin.js';

const MiB = 1024 * 1024;
let ws: string;
const registries: PluginRegistry[] = [];
beforeEach(() => {
  ws = mkdtempSync(join(tmpdir(), 'conch-resources-'));
});
afterEach(async () => {
  for (const r of registries.splice(0)) await r.dispose();
  rmSync(ws, { recursive: true, force: true });
});

function expose(config: Record<string, unknown>) {
  const registry = new PluginRegistry({ cwd: ws, plugins: [permissionPlugin] });
  registries.push(registry);
  registry.exposeSync('permission', { sandbox: 'workspace-write', ...config });
  return registry;
}

describe('permission config resources', () => {
  it('reaches the kernel policy, the same object while the policy is', () => {
    const engine = getPermissionEngine(
      expose({ resources: { tmpfs: '64MiB', memory: '2GiB', processes: 512, idleSeconds: 60 } }),
    )!;
    const policy = engine.kernelPolicy()!;
    expect(policy.resources).toEqual({
      tmpfsBytes: 64 * MiB,
      memoryBytes: 2048 * MiB,
      processes: 512,
      idleMs: 60_000,
    });
    expect(engine.kernelPolicy()).toBe(policy);
  });

  it('turns limits off with false, and leaves the rest at the defaults', () => {
    expect(toSandboxResources({ memory: false, processes: false, idleSeconds: false })).toEqual({
      ...defaultSandboxResources(),
      memoryBytes: 0,
      processes: 0,
      idleMs: 0,
    });
  });

  it('without resources, leaves the policy to the sandbox defaults', () => {
    expect(getPermissionEngine(expose({}))!.kernelPolicy()!.resources).toBeUndefined();
  });

  it.each([
    [{ memory: '10MiB' }, /resources\.memory/],
    [{ memory: 'a lot' }, /resources\.memory/],
    [{ tmpfs: -3 }, /resources\.tmpfs/],
    [{ processes: 8 }, /resources\.processes/],
    [{ idleSeconds: 0 }, /resources\.idleSeconds/],
    [{ cpu: 2 }, /resources/],
  ])('refuses %j naming the field', (resources, field) => {
    let error: unknown;
    try {
      expose({ resources });
    } catch (e) {
      error = e;
    }
    expect(InvalidConfigError.isInstance(error)).toBe(true);
    expect(String((error as Error).message)).toMatch(field);
  });
});
