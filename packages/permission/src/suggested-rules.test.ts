// Invariant: a refusal's suggested rule lets exactly that command run once it is in rules.allow —
// checked by running it for real through cli_based_tool with the sandbox off — or no rule is
// suggested (a redirection's write is judged on its own: "echo x" allowed does not let
// `echo x > f.txt` write f.txt), and the refusal then says only a human's approval can.
import 'reflect-metadata';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, type ToolResult } from '@conch/core';
import { existsSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { permissionPlugin } from './plugin.js';

type Result = ToolResult & Record<string, any>;
const registries: PluginRegistry[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const r of registries.splice(0)) await r.dispose();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function gateWith(ws: string, allow: string[]) {
  const full = new PluginRegistry({ cwd: ws, plugins: [permissionPlugin, cliPlugin] });
  registries.push(full);
  await full.expose('permission', { sandbox: 'off', kernelWall: false, rules: { allow } } as never);
  await full.expose('cli', {});
  return async (command: string) =>
    (await full.execute('cli_based_tool', { command, background: false, timeout: 120 })) as Result;
}

/** The rules a refusal suggests ("Add "a", "b" to rules.allow…"), or undefined. */
function suggested(refused: Result): string[] | undefined {
  const m = /^Add "(.*)" to rules\.allow/.exec(String(refused.suggestion ?? ''));
  return m ? m[1]!.split('", "') : undefined;
}

describe('suggested rules', () => {
  it.each([
    ['echo x > f.txt', 'f.txt', false],
    ['printf y >> log.txt', 'log.txt', false],
    ['touch made-a made-b', 'made-b', true],
    ['mkdir -p build && cp input.txt build/', 'build/input.txt', true],
    [`node -e "require('fs').writeFileSync('by-node.txt', '1')"`, 'by-node.txt', true],
    ['cp input.txt copy.txt', 'copy.txt', true],
    ['sed -i s/in/out/ input.txt && touch sed-done', 'sed-done', true],
  ])(
    '%s: a suggested rule lets it run, or none is suggested',
    async (command, marker, expectRule) => {
      const ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-suggest-')));
      dirs.push(ws);
      writeFileSync(join(ws, 'input.txt'), 'in\n');
      const refused = await (await gateWith(ws, []))(command);
      expect(refused.error_code).toBe('PERMISSION_DENIED');
      expect(existsSync(join(ws, marker))).toBe(false);
      const rules = suggested(refused);
      expect(rules !== undefined, JSON.stringify(refused)).toBe(expectRule);
      if (!rules) {
        expect(refused.suggestion).toContain("only a human's approval can");
        return;
      }
      const allowed = await (await gateWith(ws, rules))(command);
      expect(allowed.returncode, JSON.stringify(allowed)).toBe(0);
      expect(existsSync(join(ws, marker))).toBe(true);
    },
    120_000,
  );
});
