// The plugin author's path in docs/plugin-authors.md, step by step as a newcomer runs it: an empty
// directory, `npm init`, the two template files, the packages installed (the tarballs `pnpm pack`
// makes in a checkout, until @conch/* is on the registry), and the template's test passes there.
// This file is the repository's check of the template; it is not part of what you copy.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

// conch keeps what it loaded per workspace in $XDG_STATE_HOME/conch/trust.json: a throwaway one here.
const state = mkdtempSync(join(tmpdir(), 'conch-template-state-'));
process.env.XDG_STATE_HOME = state;
process.once('exit', () => rmSync(state, { recursive: true, force: true }));

const here = join(dirname(fileURLToPath(import.meta.url)), '..');
const packages = join(here, '..', '..', 'packages');
const run = promisify(execFile);
// npm and node as a new user runs them: none of the npm_* variables of a `pnpm test` around us, and
// not as a child of this test runner (NODE_TEST_CONTEXT would route its report to us).
const env = Object.fromEntries(
  Object.entries(process.env).filter(
    ([k]) => !k.toLowerCase().startsWith('npm_') && k !== 'NODE_TEST_CONTEXT',
  ),
);
// stdin is closed at once: a step that would wait for input fails instead of hanging the suite.
const sh = (file, args, cwd) => {
  const running = run(file, args, { cwd, env, timeout: 240_000, maxBuffer: 16 << 20 });
  running.child.stdin?.end();
  return running;
};

const temp = [];
after(() => {
  for (const dir of temp) rmSync(dir, { recursive: true, force: true });
});

test(
  'the template, copied into an empty directory, installs and passes its test',
  { timeout: 600_000 },
  async () => {
    const packs = mkdtempSync(join(tmpdir(), 'conch-packs-'));
    const dir = mkdtempSync(join(tmpdir(), 'my-conch-plugin-'));
    temp.push(packs, dir);
    for (const name of ['core', 'permission', 'process', 'sandbox', 'shell-syntax']) {
      await sh('npx', ['-y', 'pnpm@10', 'pack', '--pack-destination', packs], join(packages, name));
    }
    const tarballs = readdirSync(packs).map((f) => join(packs, f));
    assert.equal(tarballs.length, 5);

    // The guide's steps.
    await sh('npm', ['init', '-y'], dir);
    await sh('npm', ['pkg', 'set', 'type=module', 'conch.plugin=./plugin.js'], dir);
    for (const file of ['plugin.js', 'plugin.test.js']) copyFileSync(join(here, file), join(dir, file));
    await sh('npm', ['install', '--no-audit', '--no-fund', 'zod@4', 'reflect-metadata'], dir);
    await sh('npm', ['install', '--no-audit', '--no-fund', '--save-dev', ...tarballs], dir);

    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    assert.equal(manifest.conch.plugin, './plugin.js');
    // TAP named explicitly: Node 20 prints it by default, Node 22+ prints the spec reporter.
    const { stdout } = await sh(process.execPath, ['--test', '--test-reporter=tap', 'plugin.test.js'], dir);
    assert.match(stdout, /# pass 3\n# fail 0\n/);
  },
);
