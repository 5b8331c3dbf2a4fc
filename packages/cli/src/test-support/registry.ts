// Test helpers: a registry with cli (+ background) and an allow-all permission gate. Polling is
// @conch/test-support's waitFor.
import { backgroundPlugin } from '@conch/background';
import { PluginRegistry, TOKENS, type PluginDefinition, type ToolResult } from '@conch/core';
import { findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
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

export function cookiePrefix(registry: PluginRegistry): string {
  return registry.resolve<ProcessManager>(TOKENS.ProcessManager).cookiePrefix;
}

export function survivors(prefix: string): number[] {
  return findCookiePids({ prefix }).filter((pid) => pidAlive(pid));
}

export type Result = ToolResult & Record<string, any>;
