// Invariant: with safeRm the cli's rm behaves like the terminal's — it runs in shell mode with the trash's rm function, so what it removes is in the trash and restores byte-identical; the gate still judges the line as written; output files outlive the registry.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { backgroundPlugin } from '@conch/background';
import { defaultOutputDir } from '@conch/process';
import { PluginRegistry, TOKENS, type PermissionRequest } from '@conch/core';
import { trashPlugin } from '@conch/trash';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cliPlugin } from './plugin.js';
import type { Result } from './test-support/registry.js';

let dir: string;
let registry: PluginRegistry;
let judged: PermissionRequest[];

function make(config: Record<string, unknown>): PluginRegistry {
  const r = new PluginRegistry({ cwd: dir, plugins: [cliPlugin, backgroundPlugin, trashPlugin] });
  judged = [];
  r.container.register(TOKENS.PermissionGate, {
    useValue: {
      check: (request: PermissionRequest) => {
        judged.push(request);
        return Promise.resolve({ outcome: 'allow' as const, reason: 'test' });
      },
    },
  });
  r.exposeSync('cli', config);
  return r;
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-cli-rm-'));
});
afterEach(async () => {
  await registry.dispose();
  rmSync(dir, { recursive: true, force: true });
});

const run = async (args: Record<string, unknown>) =>
  (await registry.execute('cli_based_tool', args)) as Result;

describe('cli safeRm', () => {
  it('moves files, directories, globs and names with spaces into the trash; they restore byte-identical', async () => {
    registry = make({ safeRm: true });
    expect(registry.isExposed('trash')).toBe(true);
    mkdirSync(join(dir, 'build', 'sub'), { recursive: true });
    writeFileSync(join(dir, 'build', 'sub', 'out.bin'), Buffer.from([0, 255, 1, 254]));
    for (const n of ['a.log', 'b.log', 'with space.txt']) writeFileSync(join(dir, n), `${n}\n`);
    const r = await run({ command: 'rm -r build *.log "with space.txt"' });
    expect(r).toMatchObject({ returncode: 0, mode: 'shell', stderr: '' });
    // The gate saw the line as written, not the plumbing.
    expect(judged.at(-1)).toMatchObject({ command: 'rm -r build *.log "with space.txt"' });
    for (const n of ['build', 'a.log', 'b.log', 'with space.txt'])
      expect(existsSync(join(dir, n))).toBe(false);
    const listed = (await registry.execute('trash', { action: 'list' })) as {
      entries: { id: string; original_path: string }[];
    };
    expect(listed.entries.map((e) => e.original_path).sort()).toEqual(
      ['a.log', 'b.log', 'build', 'with space.txt'].map((n) => join(dir, n)),
    );
    for (const e of listed.entries) await registry.execute('trash', { action: 'restore', id: e.id });
    expect(readFileSync(join(dir, 'build', 'sub', 'out.bin'))).toEqual(Buffer.from([0, 255, 1, 254]));
    expect(readFileSync(join(dir, 'with space.txt'), 'utf8')).toBe('with space.txt\n');
  });

  it('reports rm errors as rm does, and leaves what rm does not cover to the real rm', async () => {
    registry = make({ safeRm: true });
    const missing = await run({ command: 'rm nope' });
    expect(missing).toMatchObject({
      returncode: 1,
      stderr: "rm: cannot remove 'nope': No such file or directory\n",
    });
    writeFileSync(join(dir, 'gone.txt'), 'x');
    writeFileSync(join(dir, 'script.sh'), 'rm gone.txt\n');
    // A child script's rm is the real one (the function is not inherited).
    expect(await run({ command: 'bash script.sh' })).toMatchObject({ returncode: 0 });
    expect(existsSync(join(dir, 'gone.txt'))).toBe(false);
    const listed = (await registry.execute('trash', { action: 'list' })) as {
      entries: { original_path: string }[];
    };
    expect(listed.entries.map((e) => e.original_path)).not.toContain(join(dir, 'gone.txt'));
  });

  it('without safeRm, rm runs directly and deletes', async () => {
    registry = make({});
    expect(registry.isExposed('trash')).toBe(false);
    writeFileSync(join(dir, 'x.txt'), 'x');
    expect(await run({ command: 'rm x.txt' })).toMatchObject({ returncode: 0, mode: 'direct' });
    expect(existsSync(join(dir, 'x.txt'))).toBe(false);
  });
});

describe('cli output_file', () => {
  it('lives in the per-user output directory and is readable after the registry is disposed', async () => {
    registry = make({ maxOutputChars: 1000 });
    const r = await run({ command: 'seq 1 100000' });
    expect(r.truncated).toBe(true);
    expect(dirname(dirname(r.output_file))).toBe(defaultOutputDir());
    expect(dirname(r.output_file)).toBe(defaultOutputDir(process.env, dir));
    const file: string = r.output_file;
    await registry.dispose();
    expect(readFileSync(file, 'utf8').split('\n')[99_999]).toBe('100000');
    registry = make({});
    const again = await run({ command: `tail -n 1 ${file}` });
    expect(again.stdout).toBe('100000\n');
  });

  it('goes to the configured outputDir', async () => {
    registry = make({ maxOutputChars: 1000, outputDir: 'out' });
    const r = await run({ command: 'seq 1 50000' });
    expect(dirname(r.output_file)).toBe(join(dir, 'out'));
  });
});
