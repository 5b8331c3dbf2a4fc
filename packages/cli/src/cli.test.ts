// Invariant: cli_based_tool runs each seed example in the right mode with a non-interactive env, bounded output, actionable errors, and hands long commands to background tasks without losing a byte or leaking a process.
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { definePlugin, defineTool, TOKENS, toToolErrorResult, type PluginRegistry } from '@conch/core';
import { findBwrap } from '@conch/process';
import { waitFor } from '@conch/test-support';
import { z } from 'zod';
import { SCREEN_CASES } from '@conch/test-support';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expandPath, pathOutside } from './env.js';
import { getShellParser, runCommand } from './run-command.js';
import { DEFAULT_SLOW_PATTERNS, estimateSeconds } from './slow-patterns.js';
import { cookiePrefix, makeRegistry, survivors, type Result } from './test-support/registry.js';

let dir: string;
const registries: PluginRegistry[] = [];
const prefixes: string[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-cli-'));
});
afterEach(async () => {
  for (const r of registries.splice(0)) await r.dispose();
  for (const p of prefixes.splice(0)) expect(survivors(p)).toEqual([]);
  rmSync(dir, { recursive: true, force: true });
});

function setup(config: Record<string, unknown> = {}, options: { background?: boolean } = {}) {
  const registry = makeRegistry(dir, config, options);
  registries.push(registry);
  const run = async (args: Record<string, unknown>, opts: { signal?: AbortSignal } = {}) =>
    (await registry.execute('cli_based_tool', args, opts)) as Result;
  const call = async (tool: string, args: Record<string, unknown>) =>
    (await registry.execute(tool, args)) as Result;
  return { registry, run, call };
}

function trackProcesses(registry: PluginRegistry): string {
  // Spawn nothing: just make sure the manager exists and remember its cookie prefix.
  const prefix = cookiePrefix(registry);
  prefixes.push(prefix);
  return prefix;
}

describe('seed examples and modes', () => {
  it('ls -la runs directly', async () => {
    writeFileSync(join(dir, 'marker.txt'), 'x');
    const { run } = setup();
    const r = await run({ command: 'ls -la' });
    expect(r).toMatchObject({ returncode: 0, mode: 'direct', stderr: '' });
    expect(r.stdout).toContain('marker.txt');
    expect(r.error).toBeUndefined();
  });

  it("find . -name '*.py' | head -20 runs in the shell", async () => {
    writeFileSync(join(dir, 'a.py'), '');
    writeFileSync(join(dir, 'b.txt'), '');
    const { run } = setup();
    const r = await run({ command: "find . -name '*.py' | head -20" });
    expect(r).toMatchObject({ returncode: 0, mode: 'shell', stdout: './a.py\n' });
  });

  it('chains (npm install && npm test style) run in the shell; the table estimates them slow', async () => {
    const { run } = setup();
    const r = await run({ command: 'echo install && echo test' });
    expect(r).toMatchObject({ returncode: 0, mode: 'shell', stdout: 'install\ntest\n' });
    const parser = await getShellParser();
    expect(estimateSeconds(parser.parse('npm install && npm test'), DEFAULT_SLOW_PATTERNS)).toBe(60);
    expect(estimateSeconds(parser.parse('cargo build --release'), DEFAULT_SLOW_PATTERNS)).toBe(60);
    expect(estimateSeconds(parser.parse('ls -la'), DEFAULT_SLOW_PATTERNS)).toBe(0);
  });

  it("echo 'hello' > output.txt writes the file in the shell", async () => {
    const { run } = setup();
    const r = await run({ command: "echo 'hello' > output.txt" });
    expect(r).toMatchObject({ returncode: 0, mode: 'shell', stdout: '' });
    expect(readFileSync(join(dir, 'output.txt'), 'utf8')).toBe('hello\n');
  });

  it("cat file.txt || echo 'not found' falls back in the shell", async () => {
    const { run } = setup();
    const r = await run({ command: "cat file.txt || echo 'not found'" });
    expect(r).toMatchObject({ returncode: 0, mode: 'shell', stdout: 'not found\n' });
    expect(r.stderr).toMatch(/No such file/);
    expect(r.error).toBeUndefined();
  });

  it('export FOO=bar; echo $FOO runs in the shell', async () => {
    const { run } = setup();
    expect(await run({ command: 'export FOO=bar; echo $FOO' })).toMatchObject({
      returncode: 0,
      mode: 'shell',
      stdout: 'bar\n',
    });
  });

  it('a builtin with no program of its name runs in the shell, whatever it wraps or asks', async () => {
    writeFileSync(join(dir, 'a.txt'), 'a\n');
    const { run } = setup();
    const node = await run({ command: 'command -v node' });
    expect(node).toMatchObject({ returncode: 0, mode: 'shell' });
    expect(node.stdout.trim()).toMatch(/^\/.*\/node$/);
    expect(await run({ command: 'command -V cd' })).toMatchObject({ returncode: 0, mode: 'shell' });
    expect(await run({ command: 'command cp a.txt b.txt' })).toMatchObject({ returncode: 0, mode: 'shell' });
    expect(readFileSync(join(dir, 'b.txt'), 'utf8')).toBe('a\n');
    expect(await run({ command: 'command -v conch-no-such-tool-xyz' })).toMatchObject({
      returncode: 1,
      mode: 'shell',
    });
    const help = await run({ command: 'help pwd' });
    expect(help).toMatchObject({ returncode: 0, mode: 'shell' });
    expect(help.stdout).toMatch(/working directory/);
    expect(await run({ command: 'times' })).toMatchObject({ returncode: 0, mode: 'shell' });
    // `time` is the shell's reserved word, not GNU time (which may not be installed).
    const timed = await run({ command: 'time true' });
    expect(timed).toMatchObject({ returncode: 0, mode: 'shell' });
    expect(timed.stderr).toMatch(/^real\s/m);
    // Builtins that are programs too still run directly.
    expect(await run({ command: 'pwd' })).toMatchObject({ returncode: 0, mode: 'direct' });
  });

  it.runIf(existsSync('/bin/zsh') || existsSync('/usr/bin/zsh'))(
    "with zsh as the shell, zsh's own builtins run in it",
    async () => {
      const { run } = setup({ shell: existsSync('/bin/zsh') ? '/bin/zsh' : '/usr/bin/zsh' });
      expect(await run({ command: 'print -l a b' })).toMatchObject({
        returncode: 0,
        mode: 'shell',
        stdout: 'a\nb\n',
      });
      const whence = await run({ command: 'whence -p ls' });
      expect(whence).toMatchObject({ returncode: 0, mode: 'shell' });
      expect(whence.stdout.trim()).toMatch(/\/ls$/);
      expect(await run({ command: 'command -v ls' })).toMatchObject({ returncode: 0, mode: 'shell' });
      // With bash, `print` is no builtin: it runs as a program, and there is none.
      const { run: bash } = setup();
      expect(await bash({ command: 'print -l a b' })).toMatchObject({ returncode: 127, mode: 'direct' });
    },
  );

  it('quoted literal words run directly after quote removal; args are never shell-interpreted', async () => {
    const { run } = setup();
    expect(await run({ command: 'echo "a  b" \'$HOME\'' })).toMatchObject({
      mode: 'direct',
      stdout: 'a  b $HOME\n',
    });
    expect(await run({ command: 'printf', args: ['%s|', 'x y', '$(id)', '; rm -rf /'] })).toMatchObject({
      mode: 'direct',
      stdout: 'x y|$(id)|; rm -rf /|',
    });
    expect(await run({ command: 'echo a | tr a b', args: ['$(id)'] })).toMatchObject({ mode: 'shell' });
  });

  it('cwd is relative to the workspace and a missing one is an actionable error', async () => {
    mkdirSync(join(dir, 'sub'));
    const { run } = setup();
    expect((await run({ command: 'pwd', cwd: 'sub' })).stdout).toBe(`${join(dir, 'sub')}\n`);
    expect((await run({ command: 'pwd', cwd: 'nope' })).error).toMatch(/No such directory/);
  });

  it('a workspace deleted under the session: the error says it is gone, not to omit cwd', async () => {
    const ws = join(dir, 'ws');
    mkdirSync(ws);
    const registry = makeRegistry(ws);
    registries.push(registry);
    expect(await registry.execute('cli_based_tool', { command: 'pwd' })).toMatchObject({ stdout: `${ws}\n` });
    rmSync(ws, { recursive: true });
    const r = (await registry.execute('cli_based_tool', { command: 'pwd' })) as Record<string, string>;
    expect(r.error_code).toBe('INVALID_CWD');
    expect(r.error).toContain(`${ws}, the directory commands run in, is gone`);
    expect(r.error).not.toMatch(/omit cwd/);
  });
});

describe('environment', () => {
  it('stdin is closed and the environment is non-interactive', async () => {
    const { run } = setup({ env: { MY_VAR: 'from-config' } });
    expect(await run({ command: 'cat' })).toMatchObject({ returncode: 0, stdout: '' });
    expect((await run({ command: 'read x; echo "got:$x"' })).stdout).toBe('got:\n');
    const r = await run({ command: 'echo $PAGER $GIT_PAGER $GIT_TERMINAL_PROMPT $MY_VAR' });
    expect(r.stdout).toBe('cat cat 0 from-config\n');
  });

  it('extraPaths are prepended to PATH', async () => {
    const bin = join(dir, 'tools');
    mkdirSync(bin);
    writeFileSync(join(bin, 'conch-test-tool'), '#!/bin/sh\necho tool-ran "$@"\n');
    chmodSync(join(bin, 'conch-test-tool'), 0o755);
    const { run } = setup({ extra_paths: ['tools'] });
    expect(await run({ command: 'conch-test-tool x' })).toMatchObject({
      mode: 'direct',
      stdout: 'tool-ran x\n',
    });
    expect((await run({ command: 'echo $PATH' })).stdout.startsWith(`${bin}:`)).toBe(true);
    expect(expandPath('~/bin', '/x')).toBe(join(homedir(), 'bin'));
  });

  it('pathOutside keeps only absolute entries outside the writable roots (also through symlinks)', () => {
    const ws = join(dir, 'ws');
    mkdirSync(join(ws, 'bin'), { recursive: true });
    symlinkSync(ws, join(dir, 'ws-link'));
    const cache = join(dir, 'cache');
    const path = [
      '/usr/local/bin',
      join(ws, 'bin'),
      '',
      '.',
      'node_modules/.bin',
      join(dir, 'ws-link', 'bin'),
      join(cache, 'npm', 'bin'),
      `${ws}-other/bin`,
      '/usr/bin',
      ws,
    ].join(':');
    expect(pathOutside(path, [ws, cache])).toEqual({
      path: `/usr/local/bin:${ws}-other/bin:/usr/bin`,
      dropped: [
        join(ws, 'bin'),
        '',
        '.',
        'node_modules/.bin',
        join(dir, 'ws-link', 'bin'),
        join(cache, 'npm', 'bin'),
        ws,
      ],
    });
    expect(pathOutside('/usr/bin:/bin', [ws])).toEqual({ path: '/usr/bin:/bin', dropped: [] });
  });
});

describe('errors', () => {
  it('command not found, direct and shell', async () => {
    const { run } = setup();
    const direct = await run({ command: 'conch-no-such-command-xyz --help' });
    expect(direct).toMatchObject({ returncode: 127, mode: 'direct' });
    expect(direct.error).toMatch(/Command not found: 'conch-no-such-command-xyz'.*installed/);
    const shell = await run({ command: 'conch-no-such-command-xyz && echo never' });
    expect(shell).toMatchObject({ returncode: 127, mode: 'shell' });
    expect(shell.error).toMatch(/Command not found: 'conch-no-such-command-xyz'/);
  });

  it('an argument the OS cannot take is refused with an error naming it', async () => {
    const { run } = setup();
    await expect(run({ command: 'echo', args: ['ok', 'a\u0000b'] })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENTS',
      message: expect.stringMatching(/args\.1.*NUL/s),
    });
  });

  it('a bare name found on PATH without an execute bit: denied, with what to check', async () => {
    const bin = join(dir, 'tools');
    mkdirSync(bin);
    writeFileSync(join(bin, 'conch-noexec-tool'), '#!/bin/sh\necho ran\n');
    chmodSync(join(bin, 'conch-noexec-tool'), 0o644);
    const { run } = setup({ extra_paths: ['tools'] });
    const denied = await run({ command: 'conch-noexec-tool' });
    expect(denied).toMatchObject({ returncode: 126, error_code: 'NOT_EXECUTABLE' });
    expect(denied.error).toMatch(/either it is not executable, or it was not found on PATH/);
    expect(denied.error).toContain('command -v conch-noexec-tool');
  });

  it('permission denied and no such file', async () => {
    writeFileSync(join(dir, 'script.sh'), '#!/bin/sh\necho hi\n');
    chmodSync(join(dir, 'script.sh'), 0o644);
    const { run } = setup();
    const denied = await run({ command: './script.sh' });
    expect(denied.returncode).toBe(126);
    expect(denied.error).toMatch(/Permission denied/);
    const missing = await run({ command: 'cat /conch/does/not/exist' });
    expect(missing.returncode).toBe(1);
    expect(missing.error).toMatch(/No such file or directory: verify the path exists first/);
    const plain = await run({ command: 'sh -c "exit 3"' });
    expect(plain).toMatchObject({ returncode: 3 });
    expect(plain.error).toBeUndefined();
  });
});

describe('error_code and display from real calls', () => {
  it.each([
    [
      'a missing program, direct',
      { command: 'conch-no-such-xyz --help' },
      'COMMAND_NOT_FOUND',
      /^✗ exit=127 COMMAND_NOT_FOUND: Command not found: 'conch-no-such-xyz'/,
    ],
    [
      'a missing program in a list',
      { command: 'true && conch-no-such-xyz' },
      'COMMAND_NOT_FOUND',
      /^✗ exit=127 COMMAND_NOT_FOUND: /,
    ],
    [
      'a file that is not executable',
      { command: './plain.sh' },
      'NOT_EXECUTABLE',
      /^✗ exit=126 NOT_EXECUTABLE: /,
    ],
    ['a missing file', { command: 'cat missing.txt' }, 'NO_SUCH_FILE', /^✗ exit=1 NO_SUCH_FILE: /],
    [
      'a missing cwd',
      { command: 'ls', cwd: 'no/such/dir' },
      'INVALID_CWD',
      /^✗ INVALID_CWD: No such directory: /,
    ],
    [
      'a timeout',
      { command: 'sleep 30', timeout: 0.3, background: false },
      'TIMED_OUT',
      /^✗ exit=\d+ TIMED_OUT: Command timed out after 0.3s/,
    ],
    [
      'a plain failure',
      { command: 'echo first >&2; echo last words >&2; exit 3' },
      undefined,
      /^✗ exit=3 · last words$/,
    ],
    ['a silent failure', { command: 'false' }, undefined, /^✗ exit=1$/],
    ['a success', { command: 'echo ok' }, undefined, /^✓ exit=0 · ok$/],
  ])('%s', async (_what, args, code, display) => {
    writeFileSync(join(dir, 'plain.sh'), '#!/bin/sh\necho hi\n');
    chmodSync(join(dir, 'plain.sh'), 0o644);
    const { run } = setup();
    const r = await run(args);
    if (code) expect(r.error_code).toBe(code);
    else expect(r.error_code).toBeUndefined();
    expect(r.display).toMatch(display);
  });

  it('an abort rejects with ABORTED, which hosts render through toToolErrorResult', async () => {
    const { run } = setup();
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const error = await run({ command: 'sleep 30', background: false }, { signal: controller.signal }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: 'ABORTED' });
    expect(toToolErrorResult(error)).toMatchObject({
      error_code: 'ABORTED',
      display: expect.stringMatching(/^✗ ABORTED: /),
    });
  });

  it('cut output names its file; a background start and leftovers say so', async () => {
    const { run } = setup({ maxOutputChars: 1000 });
    const cut = await run({ command: 'seq 1 5000' });
    expect(cut.display).toBe(`✓ exit=0 · 5000 [full: ${cut.output_file}]`);
    const bg = await run({ command: 'sleep 0.2', background: true });
    expect(bg.display).toBe(`background ${bg.background_task_id} running`);
    const left = await run({ command: 'sleep 300 & echo started' });
    expect(left.display).toBe(`✓ exit=0 · started [1 left running as ${left.left_running_task_id}]`);
  });
});

// The terminal's test runs the same table: one rendering of progress output in both tools.
describe('\\r, \\b and erase sequences render as a terminal shows them', () => {
  it.each(SCREEN_CASES)('$name', async ({ printf, screen }) => {
    const { run } = setup();
    const r = await run({ command: 'printf', args: [printf] });
    expect(r.stdout.replace(/\n$/, '')).toBe(screen);
  });
});

describe('truncation', () => {
  it('keeps head and tail with the true size and points to the full output file', async () => {
    const { run } = setup({ maxOutputChars: 2000 });
    const r = await run({ command: 'seq 1 100000' });
    expect(r).toMatchObject({ returncode: 0, truncated: true });
    expect(r.stdout.length).toBeLessThanOrEqual(2000);
    expect(r.stdout.startsWith('1\n2\n3\n')).toBe(true);
    expect(r.stdout.endsWith('99999\n100000\n')).toBe(true);
    expect(r.stdout).toContain('588,895 bytes, 100,000 lines');
    expect(r.truncation_message).toMatch(/grep/);
    expect(r.truncation_message).toMatch(/head -50/);
    expect(r.truncation_message).toMatch(/-maxdepth/);
    const full = readFileSync(r.output_file, 'utf8');
    expect(full.length).toBe(588_895);
    expect(full.endsWith('100000\n')).toBe(true);
  });

  it('small output is not truncated and has no output_file', async () => {
    const { run } = setup();
    const r = await run({ command: 'seq 1 10' });
    expect(r.truncated).toBeUndefined();
    expect(r.output_file).toBeUndefined();
  });

  it('binary output is reported, not dumped', async () => {
    const { run } = setup();
    const r = await run({ command: 'head -c 5000 /dev/zero' });
    expect(r.stdout).toMatch(/^\[binary output: 5,000 bytes/);
  });
});

describe('backgrounding', () => {
  it('exposing cli exposes background; background: false does not', () => {
    const { registry } = setup();
    expect(registry.isExposed('background')).toBe(true);
    expect(registry.tools().map((t) => t.name)).toEqual(
      expect.arrayContaining([
        'check_background_task',
        'list_background_tasks',
        'read_background_output',
        'cancel_background_task',
      ]),
    );
    const other = setup({ background: false });
    expect(other.registry.isExposed('background')).toBe(false);
  });

  it('an estimated-slow command starts as a task at once; wait_seconds returns its result', async () => {
    const { run, call } = setup({
      autoBackgroundThreshold: 1,
      slowPatterns: [{ pattern: 'sleep', seconds: 5 }],
    });
    const r = await run({ command: 'sleep 0.5; echo done' });
    expect(r).toMatchObject({ status: 'running', mode: 'shell' });
    expect(r.background_task_id).toMatch(/^cli_/);
    expect(r.message).toMatch(/estimated duration/);
    const checked = await call('check_background_task', { task_id: r.background_task_id, wait_seconds: 30 });
    expect(checked).toMatchObject({
      status: 'completed',
      result: { stdout: 'done\n', returncode: 0, mode: 'shell' },
    });
  });

  it('a command still running at the threshold is promoted without restart and without losing a byte', async () => {
    const { run, call, registry } = setup({ autoBackgroundThreshold: 0.5 });
    trackProcesses(registry);
    const marker = join(dir, 'runs');
    const r = await run({ command: `echo run >> ${marker}; echo start; sleep 1.5; echo end` });
    expect(r.status).toBe('running');
    expect(r.message).toMatch(/still running after 0.5s/);
    const checked = await call('check_background_task', { task_id: r.background_task_id, wait_seconds: 30 });
    expect(checked.result).toMatchObject({ stdout: 'start\nend\n', returncode: 0 });
    expect(readFileSync(marker, 'utf8')).toBe('run\n');
    const page = await call('read_background_output', { task_id: r.background_task_id });
    expect(page).toMatchObject({ output: 'start\nend\n', next_offset: 10, total_bytes: 10, has_more: false });
  });

  it('wait_seconds returns early with running when the task is not done', async () => {
    const { run, call } = setup();
    const r = await run({ command: 'sleep 2; echo late', background: true });
    const early = await call('check_background_task', { task_id: r.background_task_id, wait_seconds: 0.2 });
    expect(early.status).toBe('running');
    expect(early.message).toMatch(/wait_seconds/);
    const late = await call('check_background_task', { task_id: r.background_task_id, wait_seconds: 30 });
    expect(late).toMatchObject({ status: 'completed', result: { stdout: 'late\n' } });
  });

  it('without the background plugin the threshold is a hard timeout: tree killed, partial output, error', async () => {
    const { run, registry } = setup({ autoBackgroundThreshold: 0.5 }, { background: false });
    const prefix = trackProcesses(registry);
    expect(registry.isExposed('background')).toBe(false);
    const r = await run({ command: 'echo partial; sleep 300 & sleep 300' });
    expect(r.stdout).toBe('partial\n');
    expect(r.error).toMatch(/timed out after 0.5s.*autoBackgroundThreshold acts as a timeout/s);
    expect(survivors(prefix)).toEqual([]);
  });

  it('background: false waits in the foreground, with the threshold as its timeout', async () => {
    const { run, registry } = setup({ autoBackgroundThreshold: 0.5 });
    const prefix = trackProcesses(registry);
    const quick = await run({ command: 'sleep 0.1; echo fg', background: false });
    expect(quick).toMatchObject({ stdout: 'fg\n', returncode: 0 });
    const slow = await run({ command: 'echo partial; sleep 300', background: false });
    expect(slow.stdout).toBe('partial\n');
    expect(slow.error).toMatch(/foreground \(background: false\)/);
    const longer = await run({ command: 'sleep 0.8; echo waited', background: false, timeout: 30 });
    expect(longer).toMatchObject({ stdout: 'waited\n', returncode: 0 });
    expect(survivors(prefix)).toEqual([]);
  });

  it('with workers = 2, six tasks never run more than two at once', async () => {
    const { run, call, registry } = setup({ backgroundMaxWorkers: 2 });
    let running = 0;
    let peak = 0;
    registry.events.on('background.task.started', () => {
      running++;
      peak = Math.max(peak, running);
    });
    registry.events.on('background.task.finished', () => running--);
    const ids: string[] = [];
    const statuses: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await run({ command: `sleep 0.3; echo task-${i}`, background: true });
      ids.push(r.background_task_id);
      statuses.push(r.status);
    }
    expect(statuses.filter((s) => s === 'queued').length).toBeGreaterThanOrEqual(3);
    const service = registry.resolve<{ runningCount: number }>(TOKENS.BackgroundService);
    let observed = 0;
    const sampler = setInterval(() => (observed = Math.max(observed, service.runningCount)), 5);
    for (const [i, id] of ids.entries()) {
      const r = await call('check_background_task', { task_id: id, wait_seconds: 60 });
      expect(r).toMatchObject({ status: 'completed', result: { stdout: `task-${i}\n` } });
    }
    clearInterval(sampler);
    expect(peak).toBeLessThanOrEqual(2);
    expect(observed).toBeLessThanOrEqual(2);
    const listed = await call('list_background_tasks', {});
    expect(listed.tasks).toHaveLength(6);
  });

  it('cancel kills the whole tree', async () => {
    const { run, call, registry } = setup();
    const prefix = trackProcesses(registry);
    const r = await run({
      command: 'setsid sleep 300 > /dev/null 2>&1 & sleep 300 & echo up; wait',
      background: true,
    });
    await waitFor(() => survivors(prefix).length >= 3, { what: 'tree up', timeoutMs: 10_000 });
    const cancelled = await call('cancel_background_task', { task_id: r.background_task_id });
    expect(cancelled.status).toBe('cancelled');
    expect(survivors(prefix)).toEqual([]);
    const again = await call('cancel_background_task', { task_id: r.background_task_id });
    expect(again.message).toMatch(/already cancelled/);
  });

  it('dispose with queued and running tasks leaves nothing behind', async () => {
    const { run, registry } = setup({ backgroundMaxWorkers: 1 });
    const prefix = cookiePrefix(registry);
    for (let i = 0; i < 3; i++) await run({ command: 'sleep 300 & sleep 300', background: true });
    await waitFor(() => survivors(prefix).length >= 2, { what: 'first task up', timeoutMs: 10_000 });
    await registry.dispose();
    expect(survivors(prefix)).toEqual([]);
  });

  it('unknown task ids get an error saying how to find valid ones', async () => {
    const { call } = setup();
    const r = await call('check_background_task', { task_id: 'cli_nope' });
    expect(r.error).toMatch(/No background task 'cli_nope'.*list_background_tasks/);
  });
});

// Under CI (.ci/run installs bubblewrap) a missing bwrap fails these tests instead of skipping them.
describe.runIf(findBwrap() || process.env.CI)('sandbox (bwrap present)', () => {
  it('sandbox: true keeps the root read-only and the workspace writable', async () => {
    const { run, registry } = setup({ sandbox: true });
    const prefix = trackProcesses(registry);
    const r = await run({ command: 'echo hi > inside.txt; touch /usr/conch-sandbox-test; cat inside.txt' });
    expect(r.stdout).toBe('hi\n');
    expect(r.stderr).toMatch(/Read-only file system/);
    expect(readFileSync(join(dir, 'inside.txt'), 'utf8')).toBe('hi\n');
    expect(survivors(prefix)).toEqual([]);
  });
});

describe('pipeline integration', () => {
  it('asks the gate with a command request', async () => {
    const { registry, run } = setup();
    const requests: unknown[] = [];
    registry.events.on('tool.permission', (e) => requests.push(e.request));
    await run({ command: 'echo hi', cwd: '.' });
    // The one plan of the call: what the gate judges is what runs.
    expect(requests).toEqual([
      expect.objectContaining({ kind: 'command', tool: 'cli_based_tool', command: 'echo hi', cwd: dir }),
    ]);
    expect((requests[0] as { plan: unknown }).plan).toMatchObject({
      line: 'echo hi',
      mode: 'direct',
      argv: ['echo', 'hi'],
      dialect: 'bash',
      cwd: dir,
    });
  });

  it('an abort kills the foreground tree', async () => {
    const { run, registry } = setup({ autoBackgroundThreshold: 60 });
    const prefix = trackProcesses(registry);
    const controller = new AbortController();
    const pending = run({ command: 'sleep 300 & sleep 300' }, { signal: controller.signal });
    await waitFor(() => survivors(prefix).length >= 2, { what: 'tree up', timeoutMs: 10_000 });
    controller.abort();
    await expect(pending).rejects.toMatchObject({ code: 'ABORTED' });
    await waitFor(() => survivors(prefix).length === 0, { what: 'tree killed', timeoutMs: 10_000 });
  });

  it('system instructions carry the error table and how to use task handles', () => {
    const { registry } = setup();
    const text = registry.systemInstructions();
    expect(text).toMatch(/File exists/);
    expect(text).toMatch(/Command not found/);
    expect(text).toMatch(/check_background_task/);
  });

  it('runCommand works from another plugin with its own config override', async () => {
    const tool = defineTool({
      name: 'templated',
      description: 'runs a composed script',
      inputSchema: z.object({ name: z.string() }),
      execute: (args, ctx) =>
        runCommand(
          ctx,
          { command: 'echo "hello $NAME"', env: { NAME: args.name }, mode: 'shell' },
          { maxOutputChars: 500 },
        ),
    });
    const plugin = definePlugin({ name: 'templ', version: '0', configSchema: z.object({}), tools: [tool] });
    const registry = makeRegistry(dir, {}, { extra: [plugin] });
    registries.push(registry);
    registry.exposeSync('templ', {});
    expect(await registry.execute('templated', { name: 'world; id' })).toMatchObject({
      stdout: 'hello world; id\n',
      mode: 'shell',
      returncode: 0,
    });
  });
});
