import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { PluginRegistry, TOKENS, type Logger, type PermissionGate, type ToolResult } from '@conch/core';
import { trashPlugin } from '@conch/trash';
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
  registry.register(trashPlugin);
  const allowAll: PermissionGate = { check: async () => ({ outcome: 'allow', reason: 'test' }) };
  registry.container.register(TOKENS.PermissionGate, { useValue: options.gate ?? allowAll });
  // The trash the sessions' rm moves files into: private to the test.
  registry.exposeSync('trash', { dir: join(root, 'trash') });
  registry.exposeSync('terminal', config);
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
