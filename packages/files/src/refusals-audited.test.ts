// Invariant: every decision of every file tool — its own refusals of paths outside the workspace or protected, and what the gate allows — is in the permission engine's audit log and emitted as permission.decision, once per call, with the sandbox off and on.
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  definePlugin,
  PluginRegistry,
  type ApprovalRequest,
  type ConchEvents,
  type ToolResult,
} from '@conch/core';
import { getPermissionEngine, permissionPlugin } from '@conch/permission';
import { findBwrap } from '@conch/process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FileOperator } from './file-operator.js';
import { filesPlugin } from './files-plugin.js';
import { FILE_OPERATIONS_TARGET } from './tokens.js';

type Result = ToolResult & Record<string, any>;

let dir: string;
let outside: string;
let registry: PluginRegistry;
let decisions: ConchEvents['permission.decision'][];

beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-files-audit-')));
  outside = realpathSync(mkdtempSync(join(tmpdir(), 'conch-files-audit-outside-')));
  writeFileSync(join(dir, 'notes.md'), 'hello\n');
  writeFileSync(join(outside, 'secret.txt'), 'secret\n');
  mkdirSync(join(dir, '.git', 'hooks'), { recursive: true });
  decisions = [];
});
afterEach(async () => {
  await registry.dispose();
  rmSync(dir, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

async function setup(permission: Record<string, unknown>) {
  registry = new PluginRegistry({ cwd: dir, plugins: [permissionPlugin, filesPlugin] });
  await registry.expose('permission', {
    ...permission,
    approve: (_request: ApprovalRequest) => Promise.resolve('once'),
  });
  await registry.expose('files');
  registry.events.on('permission.decision', (e) => decisions.push(e));
  return async (tool: string, args: Record<string, unknown>) =>
    (await registry.execute(tool, args)) as Result;
}

const REFUSED: [string, Record<string, unknown>, string][] = [
  ['read_file', { path: '/etc/hostname' }, 'files:OUTSIDE_WORKING_DIR'],
  ['read_file', { path: '../x/secret.txt' }, 'files:OUTSIDE_WORKING_DIR'],
  ['write_file', { path: '../escape.txt', content: 'x' }, 'files:OUTSIDE_WORKING_DIR'],
  ['write_file', { path: '.env', content: 'A=1' }, 'files:PROTECTED_PATH'],
  ['write_file', { path: '.git/hooks/pre-commit', content: '#!/bin/sh' }, 'files:PROTECTED_PATH'],
  ['write_file', { path: '.vscode/tasks.json', content: '{}' }, 'files:PROTECTED_PATH'],
  ['edit_file', { path: '.env.local', old_string: 'a', new_string: 'b' }, 'files:PROTECTED_PATH'],
  ['edit_file', { path: '/etc/hosts', old_string: 'a', new_string: 'b' }, 'files:OUTSIDE_WORKING_DIR'],
  ['list_directory', { path: '/etc' }, 'files:OUTSIDE_WORKING_DIR'],
  ['stat_file', { path: '/etc/passwd' }, 'files:OUTSIDE_WORKING_DIR'],
  ['glob', { pattern: '*', cwd: '/etc' }, 'files:OUTSIDE_WORKING_DIR'],
];

const SANDBOXES = [['off'], ...(findBwrap() ? [['workspace-write']] : [])];

describe.each(SANDBOXES)('with sandbox %s', (sandbox) => {
  it.each(REFUSED)('%s %j: the refusal is audited and emitted once', async (tool, args, rule) => {
    const call = await setup({ sandbox });
    const result = await call(tool, args);
    expect(result.error_code).toBe(rule.slice('files:'.length));
    const audit = getPermissionEngine(registry)!.audit();
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ tool, outcome: 'deny', verdict: 'deny', rule, askedHuman: false });
    expect(audit[0]!.reason).toBe(result.error);
    expect(decisions).toEqual([
      { tool, outcome: 'deny', askedHuman: false, rule, reason: result.error as string },
    ]);
  });

  it('allowed calls are audited too, one entry per call', async () => {
    const call = await setup({ sandbox });
    expect(await call('read_file', { path: 'notes.md' })).toMatchObject({ content: 'hello\n' });
    expect(await call('write_file', { path: 'out.txt', content: 'x' })).toMatchObject({ created: true });
    expect(await call('edit_file', { path: 'out.txt', old_string: 'x', new_string: 'y' })).toMatchObject({
      replacements: 1,
    });
    expect(await call('read_file', { path: 'missing.md' })).toMatchObject({ error_code: 'FILE_NOT_FOUND' });
    const audit = getPermissionEngine(registry)!.audit();
    expect(audit.map((e) => [e.tool, e.outcome])).toEqual([
      ['read_file', 'allow'],
      ['write_file', 'allow'],
      ['edit_file', 'allow'],
      ['read_file', 'allow'],
    ]);
    expect(decisions.map((d) => d.outcome)).toEqual(['allow', 'allow', 'allow', 'allow']);
  });
});

it('a refusal made where the files are routed (a target) is audited when the operation refuses', async () => {
  registry = new PluginRegistry({ cwd: dir, plugins: [permissionPlugin, filesPlugin] });
  const there = outside;
  const elsewhere = definePlugin({
    name: 'elsewhere',
    version: '0.0.0',
    configSchema: z.strictObject({}),
    setup(ctx) {
      let operator: FileOperator | undefined;
      ctx.provide(FILE_OPERATIONS_TARGET, {
        operationsFor: (request) =>
          (operator ??= new FileOperator({
            root: there,
            ...request.policy,
            protectedReason: (abs) => request.protectedReason(abs, there),
          })),
      });
      return { tools: [] };
    },
  });
  registry.register(elsewhere);
  await registry.expose('permission', { sandbox: 'off' });
  await registry.expose('files');
  await registry.expose('elsewhere');
  registry.events.on('permission.decision', (e) => decisions.push(e));
  const result = (await registry.execute('read_file', { path: '/etc/hostname' })) as Result;
  expect(result.error_code).toBe('OUTSIDE_WORKING_DIR');
  expect(
    getPermissionEngine(registry)!
      .audit()
      .map((e) => [e.tool, e.outcome, e.rule]),
  ).toEqual([
    ['read_file', 'allow', 'readOnly:action'],
    ['read_file', 'deny', 'files:OUTSIDE_WORKING_DIR'],
  ]);
  const env = (await registry.execute('write_file', { path: '.env', content: 'A=1' })) as Result;
  expect(env.error_code).toBe('PROTECTED_PATH');
  expect(decisions.map((d) => [d.tool, d.outcome, d.rule])).toEqual([
    ['read_file', 'allow', 'readOnly:action'],
    ['read_file', 'deny', 'files:OUTSIDE_WORKING_DIR'],
    ['write_file', 'deny', 'files:PROTECTED_PATH'],
  ]);
});
