// Invariant: registry.describeCall gives every call one short line for UIs — the tool's own describeCall when it works, `name(first string arg)` otherwise — and never throws.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { definePlugin, defineTool } from './define.js';
import { PluginRegistry } from './registry.js';

const plugin = definePlugin({
  name: 'described',
  version: '1.0.0',
  setup: () => ({
    tools: [
      defineTool({
        name: 'run',
        description: 'Run',
        inputSchema: z.strictObject({ command: z.string(), background: z.boolean().default(false) }),
        describeCall: (args) => `run(${args.command}${args.background ? ', background' : ''})`,
        execute: () => ({}),
      }),
      defineTool({
        name: 'plain',
        description: 'No describeCall',
        inputSchema: z.object({ count: z.number().optional(), path: z.string().optional() }),
        execute: () => ({}),
      }),
      defineTool({
        name: 'broken',
        description: 'describeCall throws',
        inputSchema: z.object({ path: z.string() }),
        describeCall: () => {
          throw new Error('bug');
        },
        execute: () => ({}),
      }),
    ],
  }),
});

describe('registry.describeCall', () => {
  it("uses the tool's own line, on one line and bounded", async () => {
    const registry = new PluginRegistry({ logger: pino({ level: 'silent' }), plugins: [plugin] });
    await registry.exposeTool('described');
    expect(registry.describeCall('run', { command: 'npm test' })).toBe('run(npm test)');
    expect(registry.describeCall('run', { command: 'npm run dev', background: true })).toBe(
      'run(npm run dev, background)',
    );
    expect(registry.describeCall('run', { command: 'echo a\necho b' })).toBe('run(echo a echo b)');
    const long = registry.describeCall('run', { command: 'x'.repeat(500) });
    expect(long.length).toBe(120);
    expect(long.endsWith('…')).toBe(true);
    await registry.dispose();
  });

  it('falls back to name(first string arg) and never throws', async () => {
    const registry = new PluginRegistry({ logger: pino({ level: 'silent' }), plugins: [plugin] });
    await registry.exposeTool('described');
    expect(registry.describeCall('plain', { count: 3, path: 'src/a.ts' })).toBe('plain(src/a.ts)');
    expect(registry.describeCall('plain', {})).toBe('plain()');
    expect(registry.describeCall('broken', { path: 'b.txt' })).toBe('broken(b.txt)');
    // Arguments its schema refuses: the generic line, not the tool's.
    expect(registry.describeCall('run', { command: 42, note: 'hi' })).toBe('run(hi)');
    expect(registry.describeCall('unknown_tool', { query: 'q' })).toBe('unknown_tool(q)');
    expect(registry.describeCall('plain', null)).toBe('plain()');
    expect(registry.describeCall('plain', 'raw text')).toBe('plain(raw text)');
    const hostile = new Proxy(
      {},
      {
        ownKeys: () => {
          throw new Error('no');
        },
      },
    );
    expect(registry.describeCall('plain', hostile)).toBe('plain()');
    expect(registry.describeCall('plain', { path: `a${'b'.repeat(200)}` }).length).toBeLessThanOrEqual(
      'plain()'.length + 60,
    );
    await registry.dispose();
  });
});
