// The template-only git-helpers plugin is discovered by directory, passes the real permission gate without asking, and reports on a real repository.
import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PluginRegistry } from '@conch/core';
import { afterEach, beforeEach, expect, test } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));
let repo;
let registry;

beforeEach(() => {
  repo = mkdtempSync(join(tmpdir(), 'git-helpers-'));
  const git = (...args) => execFileSync('git', args, { cwd: repo, encoding: 'utf8' });
  git('init', '-q', '-b', 'main');
  git('config', 'user.email', 'dev@example.com');
  git('config', 'user.name', 'Dev');
  writeFileSync(join(repo, 'a.txt'), 'one\n');
  git('add', '.');
  git('commit', '-qm', 'first commit');
  writeFileSync(join(repo, 'a.txt'), 'one\ntwo\n');
  writeFileSync(join(repo, 'staged.txt'), 'new\n');
  git('add', 'staged.txt');
  writeFileSync(join(repo, 'untracked.txt'), 'x');
});
afterEach(async () => {
  await registry?.dispose();
  rmSync(repo, { recursive: true, force: true });
});

async function setup() {
  // searchPaths: this package's node_modules holds @conch/cli, background and permission
  registry = new PluginRegistry({ cwd: repo, pluginDirs: [here], searchPaths: [here] });
  const report = await registry.discover();
  expect(report.errors).toEqual([]);
  expect(report.loaded).toContain('git-helpers');
  // a generous parse bound: the gate fails closed on slow parses, and CI machines are slow
  await registry.expose('permission', { parseTimeoutMs: 5000 });
  await registry.expose('cli', {});
  await registry.expose('git-helpers', {});
  const decisions = [];
  registry.events.on('tool.permission', (e) => decisions.push(e.decision));
  return decisions;
}

test('three template tools with their schemas and read-only hints', async () => {
  await setup();
  const tools = registry.tools().filter((t) => t.plugin === 'git-helpers');
  expect(tools.map((t) => t.name).sort()).toEqual(['git_diff_stat', 'git_recent_log', 'git_status_summary']);
  for (const t of tools) expect(t.annotations).toMatchObject({ readOnlyHint: true });
  expect(tools.find((t) => t.name === 'git_recent_log').inputSchema).toMatchObject({
    type: 'object',
    properties: { count: { type: 'integer', default: 10 } },
  });
});

test('status summary, recent log and diff stat on a real repository, allowed without asking', async () => {
  const decisions = await setup();
  expect(await registry.execute('git_status_summary', {})).toMatchObject({
    returncode: 0,
    stdout: 'staged: 1, modified: 1, untracked: 1\n## main\n M a.txt\nA  staged.txt\n?? untracked.txt\n',
  });
  const log = await registry.execute('git_recent_log', { count: 5 });
  expect(log.returncode).toBe(0);
  expect(log.stdout).toMatch(/^[0-9a-f]{7,} \d{4}-\d{2}-\d{2} Dev: first commit\n/);
  expect(await registry.execute('git_diff_stat', {})).toMatchObject({
    returncode: 0,
    stdout: expect.stringMatching(/ a\.txt +\| 1 \+\n/),
  });
  expect(await registry.execute('git_diff_stat', { staged: true })).toMatchObject({
    stdout: expect.stringMatching(/^ staged\.txt \| 1 \+\n 1 file changed/),
  });
  expect(decisions.map((d) => d.outcome)).toEqual(['allow', 'allow', 'allow', 'allow']);
});

test('arguments stay data: option and shell injection attempts do nothing', async () => {
  await setup();
  const marker = join(repo, 'pwned');
  await expect(registry.execute('git_diff_stat', { base: `--output=${marker}` })).rejects.toThrow(
    /base: Invalid string: must match pattern/,
  );
  const weird = await registry.execute('git_diff_stat', { base: `HEAD; touch ${marker}` });
  expect(weird.returncode).not.toBe(0);
  expect(weird.stderr).toContain(`HEAD; touch ${marker}`);
  const sub = await registry.execute('git_status_summary', { path: `$(touch ${marker})` });
  expect(sub.returncode).not.toBe(0);
  expect(existsSync(marker)).toBe(false);
});
