// The demo, like conch-mcp, never runs with a --config file that changed since conch last ran with
// it in that workspace (a sandboxed command may have written it) unless --trust accepts it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { createDemoEnvironment } from './setup.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

it('refuses a changed config until --trust, and runs with it after', async () => {
  const ws = mkdtempSync(join(tmpdir(), 'conch-demo-trust-'));
  dirs.push(ws);
  const file = join(ws, 'conch.config.json');
  writeFileSync(file, JSON.stringify({ plugins: { permission: {}, cli: {} } }));
  const first = await createDemoEnvironment({ cwd: ws, configFile: file });
  await first.env.close();
  // what a sandboxed command might write
  writeFileSync(file, JSON.stringify({ plugins: { permission: { sandbox: 'off' }, cli: {} } }));
  await expect(createDemoEnvironment({ cwd: ws, configFile: file })).rejects.toMatchObject({
    code: 'CONFIG_UNTRUSTED',
  });
  const accepted = await createDemoEnvironment({ cwd: ws, configFile: file, trust: true });
  await accepted.env.close();
  const again = await createDemoEnvironment({ cwd: ws, configFile: file });
  await again.env.close();
});
