// A command template inside a plugin written by hand (definePlugin, not definePluginFromTemplates)
// runs without the cli plugin and without the author starting a process manager: the tool starts
// the registry's process manager when it is exposed.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { definePlugin, type PermissionRequest, PluginRegistry, TOKENS, type ToolResult } from '@conch/core';
import { findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { z } from 'zod';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { defineCommandTool } from './index.js';

type Result = ToolResult & Record<string, any>;

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-tpl-hand-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const notes = definePlugin({
  name: 'notes',
  version: '0.1.0',
  setup: () => ({
    tools: [
      defineCommandTool({
        name: 'count_words',
        description: 'Counts the words of a text.',
        inputSchema: z.object({ text: z.string() }),
        commands: [{ command: 'printf %s UTCP_ARG_text_UTCP_END | wc -w' }],
      }),
      {
        name: 'plain_tool',
        description: 'A tool without a command.',
        inputSchema: z.object({}),
        execute: () => ({ ok: true }),
      },
    ],
  }),
});

async function registryWith(...plugins: Parameters<typeof definePlugin>[0][]) {
  const registry = new PluginRegistry({ cwd: dir, plugins: [...plugins.map((p) => definePlugin(p))] });
  const asked: PermissionRequest[] = [];
  registry.container.register(TOKENS.PermissionGate, {
    useValue: {
      check: (request: PermissionRequest) => {
        asked.push(request);
        return Promise.resolve({ outcome: 'allow' as const, reason: 'test' });
      },
    },
  });
  return { registry, asked };
}

test('runs in a hand-written plugin with no cli plugin exposed, arguments staying data', async () => {
  const { registry, asked } = await registryWith(notes);
  await registry.expose('notes');
  expect(registry.isExposed('cli')).toBe(false);
  const manager = registry.resolve<ProcessManager>(TOKENS.ProcessManager);
  expect(manager).toBeDefined();
  const marker = join(dir, 'pwned');
  const result = (await registry.execute('count_words', {
    text: `one two three; touch ${marker} $(touch ${marker})`,
  })) as Result;
  expect(result.error_code).toBeUndefined();
  expect(String(result.stdout).trim()).toBe('7');
  expect(existsSync(marker)).toBe(false);
  expect(asked.map((a) => a.kind)).toEqual(['command']);
  const prefix = manager.cookiePrefix;
  await registry.dispose();
  expect(findCookiePids({ prefix }).filter((pid) => pidAlive(pid))).toEqual([]);
});

test('two plugins with templates share one process manager, and a plugin without any starts none', async () => {
  const other = definePlugin({
    name: 'other',
    version: '0.1.0',
    setup: () => ({
      tools: [
        defineCommandTool({
          name: 'say',
          description: 'Echoes a word.',
          inputSchema: z.object({ word: z.string() }),
          commands: [{ command: 'echo UTCP_ARG_word_UTCP_END' }],
        }),
      ],
    }),
  });
  const bare = definePlugin({
    name: 'bare',
    version: '0.1.0',
    setup: () => ({
      tools: [{ name: 'noop', description: 'Nothing.', inputSchema: z.object({}), execute: () => ({}) }],
    }),
  });
  const lone = await registryWith(bare);
  await lone.registry.expose('bare');
  expect(lone.registry.resolveOptional(TOKENS.ProcessManager)).toBeUndefined();
  await lone.registry.dispose();

  const { registry } = await registryWith(notes, other);
  await registry.expose('notes');
  const first = registry.resolve<ProcessManager>(TOKENS.ProcessManager);
  await registry.expose('other');
  expect(registry.resolve<ProcessManager>(TOKENS.ProcessManager)).toBe(first);
  const result = (await registry.execute('say', { word: '$HOME' })) as Result;
  expect(result.stdout).toBe('$HOME\n');
  await registry.dispose();
});
