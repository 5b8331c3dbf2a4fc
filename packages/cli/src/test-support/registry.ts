// Test helpers: a registry with cli (+ background) and an allow-all permission gate. Polling is
// @conch/test-support's waitFor.
import { backgroundPlugin } from '@conch/background';
import {
  definePlugin,
  PERMISSION_GATE,
  PluginRegistry,
  TOKENS,
  type KernelPolicy,
  type PermissionGate,
  type PluginDefinition,
  type ToolResult,
} from '@conch/core';
import { findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { z } from 'zod';
import { cliPlugin } from '../plugin.js';

export function makeRegistry(
  cwd: string,
  config: Record<string, unknown> = {},
  options: { background?: boolean; extra?: PluginDefinition[] } = {},
): PluginRegistry {
  const plugins: PluginDefinition[] = [
    cliPlugin,
    ...(options.background === false ? [] : [backgroundPlugin]),
  ];
  const registry = new PluginRegistry({ cwd, plugins: [...plugins, ...(options.extra ?? [])] });
  registry.container.register(TOKENS.PermissionGate, {
    useValue: { check: () => Promise.resolve({ outcome: 'allow' as const, reason: 'test' }) },
  });
  registry.exposeSync('cli', config);
  return registry;
}

/** A plugin named 'test-gate' that provides `gate` as the permission gate (expose it to use it). */
export function gatePlugin(gate: PermissionGate): PluginDefinition {
  return definePlugin({
    name: 'test-gate',
    version: '0.0.0',
    configSchema: z.strictObject({}),
    setup(ctx) {
      ctx.provide(PERMISSION_GATE, gate);
      return {};
    },
  });
}

/**
 * A gate that allows every command and runs it in the workspace-write sandbox, like
 * @conch/permission's default: `cwd` writable, nothing else, and what `policy` adds (resource
 * limits, more roots).
 */
export function sandboxedGate(cwd: string, policy: Partial<KernelPolicy> = {}): PermissionGate {
  const whole: KernelPolicy = {
    mode: 'workspace-write',
    writableRoots: [cwd],
    readOnlyPaths: [],
    pinnedPaths: [],
    env: {},
    ...policy,
  };
  return {
    check: async () => ({ outcome: 'allow', reason: 'test', sandbox: 'workspace-write' }),
    kernelPolicy: () => whole,
  };
}

/** A registry (cli, + background unless `background: false`) whose gate is sandboxedGate's. */
export async function sandboxedRegistry(
  cwd: string,
  options: { config?: Record<string, unknown>; background?: boolean; policy?: Partial<KernelPolicy> } = {},
): Promise<PluginRegistry> {
  const gate = sandboxedGate(cwd, options.policy);
  const registry = new PluginRegistry({
    cwd,
    plugins: [cliPlugin, ...(options.background === false ? [] : [backgroundPlugin]), gatePlugin(gate)],
  });
  await registry.expose('test-gate', {});
  await registry.expose('cli', options.config ?? {});
  return registry;
}

export function cookiePrefix(registry: PluginRegistry): string {
  return registry.resolve<ProcessManager>(TOKENS.ProcessManager).cookiePrefix;
}

export function survivors(prefix: string): number[] {
  return findCookiePids({ prefix }).filter((pid) => pidAlive(pid));
}

export type Result = ToolResult & Record<string, any>;
