import 'reflect-metadata';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { PluginRegistry, TOKENS, type Logger, type PermissionGate, type ToolResult } from '@conch/core';
import { terminalPlugin } from '../plugin.js';
import type { TerminalConfigInput } from '../config.js';

export interface Harness {
  registry: PluginRegistry;
  root: string;
  call(args: Record<string, unknown>, options?: { signal?: AbortSignal }): Promise<ToolResult>;
  dispose(): Promise<void>;
}

/** A registry with the terminal plugin and an allow-all permission gate, in a private temp root. */
export function createHarness(
  config: TerminalConfigInput = {},
  options: { gate?: PermissionGate; logger?: Logger } = {},
): Harness {
  const root = mkdtempSync(join(tmpdir(), 'conch-terminal-test-'));
  const registry = new PluginRegistry({
    cwd: root,
    tempRoot: root,
    logger: options.logger ?? pino({ level: 'silent' }),
  });
  registry.register(terminalPlugin);
  const allowAll: PermissionGate = { check: async () => ({ outcome: 'allow', reason: 'test' }) };
  registry.container.register(TOKENS.PermissionGate, { useValue: options.gate ?? allowAll });
  registry.exposeTool('terminal', config);
  return {
    registry,
    root,
    call: (args, options) => registry.execute('terminal', args, options),
    async dispose() {
      await registry.dispose();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Polls `fn` until it returns a truthy value (or throws after `timeoutMs`). */
export async function waitFor<T>(
  fn: () => T | Promise<T>,
  timeoutMs = 20_000,
  what = 'condition',
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Whether a pid is alive and not a zombie. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** Live pids whose command line contains `needle` (for leak checks). */
export function pidsWithCmdline(needle: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, 'latin1').replace(/\0/g, ' ');
      if (cmd.includes(needle) && alive(Number(name))) out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}
