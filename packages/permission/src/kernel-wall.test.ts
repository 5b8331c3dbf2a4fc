// Invariant: behind the gate stands the kernel — commands the real gate allows as reads run in a read-only sandbox, protected paths stay read-only for commands a human approved, and under /bin/sh the gate reads commands as sh.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, type ToolResult } from '@conch/core';
import { findBwrap } from '@conch/process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { permissionPlugin } from './plugin.js';

const BWRAP = findBwrap();
if (process.env.CI && !BWRAP) throw new Error('the kernel wall tests need bubblewrap under CI');

type Result = ToolResult & Record<string, any>;
let dir: string;
const registries: PluginRegistry[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-kernel-wall-'));
});
afterEach(async () => {
  for (const r of registries.splice(0)) await r.dispose();
  rmSync(dir, { recursive: true, force: true });
});

async function registry(permission: Record<string, unknown>, cli: Record<string, unknown> = {}) {
  const r = new PluginRegistry({ cwd: dir, plugins: [permissionPlugin, cliPlugin, backgroundPlugin] });
  registries.push(r);
  await r.expose('permission', permission);
  await r.expose('cli', cli);
  return r;
}
const run = async (r: PluginRegistry, command: string) =>
  (await r.execute('cli_based_tool', { command })) as Result;

describe.skipIf(!BWRAP)('kernel wall with the real gate', () => {
  it.each([
    ["sandbox 'off': commands a human approved", 'off', 2],
    ['the workspace-write sandbox: commands that run without a prompt', 'workspace-write', 0],
  ] as const)('protected paths stay read-only for %s', async (_name, sandbox, prompts) => {
    mkdirSync(join(dir, '.git', 'hooks'), { recursive: true });
    mkdirSync(join(dir, 'secrets'));
    writeFileSync(join(dir, 'secrets', 'key'), 'original\n');
    const asked: string[] = [];
    const r = await registry({
      sandbox,
      protectedPaths: ['secrets/*'],
      approve: async (request: { display: string }) => {
        asked.push(request.display);
        return 'once';
      },
    });
    // python writes the files itself: the parser cannot see the paths, the kernel refuses.
    const hook = await run(r, `python3 -c "open('.git/hooks/pre-commit','w').write('x')"`);
    const key = await run(r, `python3 -c "open('secrets/key','a').write('x')"`);
    expect(asked).toHaveLength(prompts);
    expect(existsSync(join(dir, '.git', 'hooks', 'pre-commit'))).toBe(false);
    expect(readFileSync(join(dir, 'secrets', 'key'), 'utf8')).toBe('original\n');
    expect(hook.stderr).toMatch(/Read-only file system/);
    expect(key).toMatchObject({ error_code: 'SANDBOX_REFUSED_WRITE' });
    const ok = await run(r, `python3 -c "open('notes.txt','w').write('x')"`);
    expect(ok).toMatchObject({ returncode: 0 });
    expect(readFileSync(join(dir, 'notes.txt'), 'utf8')).toBe('x');
  });

  it('reads allowed by the gate run read-only, and status reports the wall', async () => {
    writeFileSync(join(dir, 'a.txt'), 'hello\n');
    const r = await registry({});
    expect(await run(r, 'cat a.txt | wc -l')).toMatchObject({ returncode: 0, stdout: '1\n' });
    const status = (await r.status()) as unknown as { processes: { sandbox: { available: boolean } } };
    expect(status.processes.sandbox.available).toBe(true);
  });

  it('turning the protected-paths rule off turns the workspace wall off too', async () => {
    mkdirSync(join(dir, '.git', 'hooks'), { recursive: true });
    const r = await registry({
      safety: {
        protectedPaths: false,
        privilegeEscalation: true,
        downloadToInterpreter: true,
        recursiveDeleteRoot: true,
        sourceDownloaded: true,
        forkBomb: true,
      },
      mode: 'acceptAll',
    });
    const res = await run(r, `python3 -c "open('.git/hooks/pre-commit','w').write('x')"`);
    expect(res).toMatchObject({ returncode: 0 });
    expect(existsSync(join(dir, '.git', 'hooks', 'pre-commit'))).toBe(true);
  });
});

describe('dialect', () => {
  it('with /bin/sh as the shell the gate reads commands as sh and asks for bash-only syntax', async () => {
    const r = await registry({ sandbox: 'off' }, { shell: '/bin/sh' });
    const denied = await run(r, "echo $'\\x41' | cat");
    expect(denied).toMatchObject({ permission_denied: true });
    expect(denied.error).toMatch(/sh/);
    expect(await run(r, 'echo a | tr a b')).toMatchObject({ returncode: 0, stdout: 'b\n' });
  });
});
