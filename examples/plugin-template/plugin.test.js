// The plugin, discovered from this folder by a real registry with the real permission gate;
// the only stand-in is the human who answers the approval prompt.
import 'reflect-metadata';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { PluginRegistry } from '@conch/core';

// conch keeps what it loaded per workspace in $XDG_STATE_HOME/conch/trust.json: a throwaway one here.
const state = mkdtempSync(join(tmpdir(), 'conch-template-state-'));
process.env.XDG_STATE_HOME = state;
process.once('exit', () => rmSync(state, { recursive: true, force: true }));

const here = dirname(fileURLToPath(import.meta.url));
let cwd;
let registry;
let answers;

beforeEach(async () => {
  cwd = mkdtempSync(join(tmpdir(), 'notes-'));
  // pluginDirs: this folder is the plugin; searchPaths: the plugins installed beside it (permission).
  registry = new PluginRegistry({ cwd, pluginDirs: [here], searchPaths: [here] });
  const report = await registry.discover();
  assert.deepEqual(report.errors, []);
  assert.ok(report.loaded.includes('notes'));
  answers = [];
  // The human: answers each approval prompt with the next scripted answer.
  const approve = async (request) => {
    answers.push(request.display);
    return request.display.includes('secret') ? 'deny' : 'once';
  };
  await registry.expose('permission', { approve });
  await registry.expose('notes', { file: 'TODO.md' });
});
afterEach(async () => {
  await registry.dispose();
  rmSync(cwd, { recursive: true, force: true });
});

test('a note is written only after the human approves it', async () => {
  const added = await registry.execute('add_note', { text: 'buy milk' });
  assert.deepEqual(added, { added: 'buy milk', display: '✓ noted in TODO.md' });
  assert.equal(readFileSync(join(cwd, 'TODO.md'), 'utf8'), '- buy milk\n');
  assert.deepEqual(answers, ['append to TODO.md: buy milk']);

  const denied = await registry.execute('add_note', { text: 'the secret plan' });
  assert.equal(denied.error_code, 'PERMISSION_DENIED');
  assert.match(denied.display, /^\[Blocked\] /);
  assert.equal(readFileSync(join(cwd, 'TODO.md'), 'utf8'), '- buy milk\n');
});

test('listing is read-only and never asks', async () => {
  assert.deepEqual(await registry.execute('list_notes', {}), { notes: [], display: '0 notes' });
  await registry.execute('add_note', { text: 'one' });
  await registry.execute('add_note', { text: 'two' });
  assert.deepEqual(await registry.execute('list_notes', {}), {
    notes: ['- one', '- two'],
    display: '2 notes',
  });
  assert.deepEqual(answers, ['append to TODO.md: one', 'append to TODO.md: two']);
});

test('bad arguments and bad config are refused with the field named', async () => {
  await assert.rejects(registry.execute('add_note', {}), { code: 'INVALID_ARGUMENTS', message: /text/ });
  assert.equal((await registry.execute('add_note', { text: 'a\nb' })).error_code, 'INVALID_ARGUMENTS');
  assert.equal(existsSync(join(cwd, 'TODO.md')), false);
  const other = new PluginRegistry({ cwd, pluginDirs: [here] });
  await other.discover();
  await assert.rejects(other.expose('notes', { file: '../escape.md' }), {
    code: 'INVALID_CONFIG',
    message: /file/,
  });
  await other.dispose();
});
