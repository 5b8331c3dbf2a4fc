// Invariant: the files plugin gives models the file operator as tools — reads allowed as read-only actions, writes and edits asked through the gate, protected or outside paths refused as result values without asking — and nothing when it is not exposed; when a partner provides FILE_OPERATIONS_TARGET, the same tools run on the operations it routes to, judged by the host's rule on the target's paths.
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  definePlugin,
  PluginRegistry,
  type ApprovalAnswer,
  type ApprovalRequest,
  type ToolResult,
} from '@conch/core';
import { getPermissionEngine, permissionPlugin } from '@conch/permission';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FileOperator } from './file-operator.js';
import { filesPlugin } from './files-plugin.js';
import { FILE_OPERATIONS_TARGET, type FileOperationsRequest } from './tokens.js';

type Result = ToolResult & Record<string, any>;

let dir: string;
let registry: PluginRegistry;
let asked: ApprovalRequest[];
let answer: ApprovalAnswer;

beforeEach(async () => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-files-plugin-')));
  asked = [];
  answer = 'deny';
  registry = new PluginRegistry({ cwd: dir, plugins: [permissionPlugin, filesPlugin] });
  // The gate without a sandbox: writes are asked (kernel-writes.test.ts covers the sandbox).
  await registry.expose('permission', {
    sandbox: 'off',
    approve: (request: ApprovalRequest) => {
      asked.push(request);
      return Promise.resolve(answer);
    },
  });
});
afterEach(async () => {
  await registry.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe('files plugin', () => {
  it('exposes nothing until the host asks for it', async () => {
    expect(registry.tools().map((t) => t.name)).toEqual([]);
    expect(await registry.expose('files')).toEqual([
      'read_file',
      'write_file',
      'edit_file',
      'list_directory',
      'glob',
      'stat_file',
    ]);
    expect(registry.systemInstructions()).toMatch(/edit_file \(exact replacement of old_string/);
  });

  it('reads, lists, globs and stats without asking, audited as read-only actions', async () => {
    await registry.expose('files');
    writeFileSync(join(dir, 'notes.md'), '# notes\nsecond line\n');
    const read = (await registry.execute('read_file', { path: 'notes.md', limit: 1 })) as Result;
    expect(read).toMatchObject({
      path: 'notes.md',
      content: '# notes\n',
      size_bytes: 20,
      lines: 1,
      total_lines: 2,
      truncated: true,
      next_offset: 2,
    });
    expect(((await registry.execute('list_directory', {})) as Result).entries).toEqual([
      { name: 'notes.md', type: 'file', size: 20 },
    ]);
    expect(((await registry.execute('glob', { pattern: '*.md' })) as Result).matches).toEqual(['notes.md']);
    expect(((await registry.execute('stat_file', { path: 'notes.md' })) as Result).type).toBe('file');
    expect(asked).toEqual([]);
    const audit = getPermissionEngine(registry)!.audit();
    expect(audit.map((e) => [e.tool, e.outcome, e.rule])).toEqual([
      ['read_file', 'allow', 'readOnly:action'],
      ['list_directory', 'allow', 'readOnly:action'],
      ['glob', 'allow', 'readOnly:action'],
      ['stat_file', 'allow', 'readOnly:action'],
    ]);
  });

  it('asks before writing or editing; a denial changes nothing', async () => {
    await registry.expose('files');
    const denied = (await registry.execute('write_file', { path: 'out.txt', content: 'hello' })) as Result;
    expect(denied.permission_denied).toBe(true);
    expect(asked.map((a) => a.display)).toEqual(['write 5 bytes to out.txt']);
    expect(existsSync(join(dir, 'out.txt'))).toBe(false);

    answer = 'once';
    expect(await registry.execute('write_file', { path: 'out.txt', content: 'hello' })).toMatchObject({
      path: 'out.txt',
      bytes_written: 5,
      created: true,
    });
    expect(
      await registry.execute('edit_file', { path: 'out.txt', old_string: 'hello', new_string: 'bye' }),
    ).toMatchObject({ replacements: 1, line: 1 });
    expect(asked.at(-1)!.display).toBe('edit out.txt: replace "hello" with "bye"');
    expect(readFileSync(join(dir, 'out.txt'), 'utf8')).toBe('bye');
  });

  it('refuses protected and outside paths as result values, without asking anyone', async () => {
    await registry.expose('files');
    answer = 'once';
    const reason = getPermissionEngine(registry)!.protectedWriteReason(join(dir, '.env'), dir);
    const env = (await registry.execute('write_file', { path: '.env', content: 'A=1' })) as Result;
    expect(env).toEqual({
      error: `Refused: write would modify ${reason}. Protected paths are never written by conch; write somewhere else.`,
      error_code: 'PROTECTED_PATH',
      display: `write refused: ${reason}`,
    });
    const outside = (await registry.execute('write_file', { path: '../escape.txt', content: 'x' })) as Result;
    expect(outside.error_code).toBe('OUTSIDE_WORKING_DIR');
    const read = (await registry.execute('read_file', { path: '/etc/hostname' })) as Result;
    expect(read.error_code).toBe('OUTSIDE_WORKING_DIR');
    expect(asked).toEqual([]);
    expect(existsSync(join(dir, '.env'))).toBe(false);
  });

  it('refuses VS Code workspace files (*.code-workspace) like .vscode/, at any depth', async () => {
    await registry.expose('files');
    answer = 'once';
    for (const path of ['app.code-workspace', 'sub/dir/team.code-workspace', '.code-workspace']) {
      const result = (await registry.execute('write_file', { path, content: '{"tasks": {}}' })) as Result;
      expect(result.error_code, path).toBe('PROTECTED_PATH');
      expect(result.display, path).toContain('read by a tool of the user outside any sandbox');
      expect(existsSync(join(dir, path)), path).toBe(false);
    }
    expect(asked).toEqual([]);
    // A name that only contains the suffix is an ordinary file (asked, then written).
    expect(
      await registry.execute('write_file', { path: 'app.code-workspace.bak', content: 'x' }),
    ).not.toHaveProperty('error_code');
    expect(readFileSync(join(dir, 'app.code-workspace.bak'), 'utf8')).toBe('x');
  });

  it('returns edit refusals with their code, and bad arguments throw naming the field', async () => {
    await registry.expose('files');
    answer = 'once';
    writeFileSync(join(dir, 'a.txt'), 'x x');
    const ambiguous = (await registry.execute('edit_file', {
      path: 'a.txt',
      old_string: 'x',
      new_string: 'y',
    })) as Result;
    expect(ambiguous.error_code).toBe('EDIT_AMBIGUOUS');
    const missing = (await registry.execute('edit_file', {
      path: 'a.txt',
      old_string: 'z',
      new_string: 'y',
    })) as Result;
    expect(missing.error_code).toBe('EDIT_NO_MATCH');
    expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe('x x');
    await expect(registry.execute('read_file', { path: 'a.txt', offset: 0 })).rejects.toThrow(
      /Invalid arguments for tool 'read_file':\n {2}offset: Too small/,
    );
    await expect(registry.execute('glob', { pattern: '../*' })).rejects.toThrow(
      /pattern: a relative pattern without '\.\.'/,
    );
  });

  it('reports a binary file to the model by its code', async () => {
    await registry.expose('files');
    writeFileSync(join(dir, 'blob.bin'), Buffer.from([0, 1, 2, 3]));
    expect(await registry.execute('read_file', { path: 'blob.bin' })).toMatchObject({
      error_code: 'BINARY_FILE',
      display: 'blob.bin is binary (4 bytes)',
    });
  });
});

describe('routed by FILE_OPERATIONS_TARGET', () => {
  it('runs the tools on the operations a partner routes to, exposed before or after it, with the config and the host rule', async () => {
    const there = realpathSync(mkdtempSync(join(tmpdir(), 'conch-files-there-')));
    try {
      writeFileSync(join(there, 'remote.md'), 'over there\n');
      const requests: FileOperationsRequest[] = [];
      let operator: FileOperator | undefined;
      const elsewhere = definePlugin({
        name: 'elsewhere',
        version: '0.0.0',
        configSchema: z.strictObject({}),
        setup(ctx) {
          ctx.provide(FILE_OPERATIONS_TARGET, {
            operationsFor(request) {
              requests.push(request);
              // The target judges its paths with the host's rule, its workspace standing for the root.
              operator ??= new FileOperator({
                root: there,
                ...request.policy,
                protectedReason: (abs) => request.protectedReason(abs, there),
              });
              return operator;
            },
          });
          return { tools: [] };
        },
      });
      registry.register(elsewhere);
      await registry.expose('files', { maxReadLines: 7 });
      await registry.expose('elsewhere');
      answer = 'once';
      expect(await registry.execute('read_file', { path: 'remote.md' })).toMatchObject({
        path: 'remote.md',
        content: 'over there\n',
      });
      expect(await registry.execute('write_file', { path: 'made.txt', content: 'x' })).toMatchObject({
        created: true,
      });
      expect(readFileSync(join(there, 'made.txt'), 'utf8')).toBe('x');
      expect(existsSync(join(dir, 'made.txt'))).toBe(false);
      const env = (await registry.execute('write_file', { path: '.env', content: 'A=1' })) as Result;
      expect(env.error_code).toBe('PROTECTED_PATH');
      expect(existsSync(join(there, '.env'))).toBe(false);
      // One request object for the plugin's lifetime, carrying its config.
      expect(new Set(requests).size).toBe(1);
      expect(requests[0]!.policy).toMatchObject({ maxReadLines: 7, allowOutside: false, allowedRoots: [] });
    } finally {
      rmSync(there, { recursive: true, force: true });
    }
  });
});
