// Invariant: an environment is one resource — `await using` and close() both kill every process it started (commands, background tasks, terminal sessions), dispose the registry and remove the temp dir; a start-up that fails or is aborted halfway undoes what it started; bad options fail before anything starts, naming the field.
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NoSuchPluginError, PluginRegistry, type ToolResult } from '@conch/core';
import { getPermissionEngine } from '@conch/permission';
import { findBwrap, findCookiePids, pidAlive } from '@conch/process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createEnvironment, type Environment, type EnvironmentOptions } from './environment.js';
import { EnvironmentClosedError } from './errors/environment-closed-error.js';
import { InvalidEnvironmentOptionError } from './errors/invalid-environment-option-error.js';
import { descendants, waitFor } from '@conch/test-support';

type Result = ToolResult & Record<string, any>;

let root: string;
let work: string;
let tmpRoot: string;

beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'conch-env-test-')));
  work = join(root, 'work');
  tmpRoot = join(root, 'tmp');
  mkdirSync(work);
  mkdirSync(tmpRoot);
});
afterEach(async () => {
  expect(readdirSync(tmpRoot)).toEqual([]);
  // No process of ours outlives its environment, the process supervisor included.
  await waitFor(() => descendants(process.pid).length === 0, {
    what: 'every child process to exit',
    timeoutMs: 5_000,
  });
  rmSync(root, { recursive: true, force: true });
});

/** Plugins a test can drive without a human: the gate allows what the tests run. */
const PLUGINS: EnvironmentOptions['plugins'] = {
  permission: { rules: { allow: ['sleep *', 'echo *'] } },
  cli: {},
  background: {},
  terminal: {},
};

function survivors(prefix: string): number[] {
  return findCookiePids({ prefix }).filter((pid) => pidAlive(pid));
}

async function withEnv(options: EnvironmentOptions = {}): Promise<Environment> {
  return createEnvironment({ workingDir: work, tmpRoot, plugins: PLUGINS, ...options });
}

/** Starts one of each kind of process: a host spawn, a background task, a terminal session. */
async function startEverything(env: Environment): Promise<void> {
  env.processes.manager.spawn('sleep', ['300'], { label: 'host sleep' });
  const task = (await env.registry.execute('cli_based_tool', {
    command: 'sleep 301',
    background: true,
  })) as Result;
  expect(task.background_task_id).toBeDefined();
  const session = (await env.registry.execute('terminal', {
    command: 'sleep 302',
    background: true,
  })) as Result;
  expect(session.session_id).toBeDefined();
  await waitFor(() => survivors(env.processes.manager.cookiePrefix).length >= 4, {
    what: 'everything running',
    timeoutMs: 20_000,
  });
}

describe('createEnvironment', () => {
  it('gives the host workingDir, tmpDir, files, shell, processes and events, and `await using` leaves nothing behind', async () => {
    let prefix = '';
    let tmpDir = '';
    let registry: PluginRegistry | undefined;
    const exited: string[] = [];
    {
      await using env = await withEnv();
      expect(env.workingDir).toBe(work);
      expect(env.tmpDir.startsWith(join(tmpRoot, 'conch-env-'))).toBe(true);
      expect(env.executor).toEqual({ kind: 'local' });
      expect(env.browser).toBeUndefined();
      expect(env.registry.tools().map((t) => t.name)).toEqual(
        expect.arrayContaining(['cli_based_tool', 'check_background_task', 'terminal']),
      );
      expect(env.registry.tools().some((t) => t.name === 'read_file' || t.name.startsWith('browser_'))).toBe(
        false,
      );
      env.events.on('process.exited', (e) => exited.push(e.id));
      prefix = env.processes.manager.cookiePrefix;
      tmpDir = env.tmpDir;
      registry = env.registry;

      await env.files.write('hello.txt', 'hi\n');
      expect((await env.files.read('hello.txt')).content).toBe('hi\n');
      const run = await env.shell.run('cat hello.txt && echo oops >&2; exit 4');
      expect(run).toMatchObject({ stdout: 'hi\n', stderr: 'oops\n', returncode: 4, mode: 'shell' });
      const direct = await env.shell.run('echo', { args: ['a b', '$HOME'] });
      expect(direct).toMatchObject({ stdout: 'a b $HOME\n', returncode: 0, mode: 'direct' });

      await startEverything(env);
      const host = env.processes.list().find((p) => p.command === 'host sleep')!;
      expect(host.isRunning).toBe(true);
      // The temp dir holds the registry's files (spill files, profiles).
      expect(readdirSync(tmpDir).some((f) => f.startsWith('conch-'))).toBe(true);
    }
    expect(survivors(prefix)).toEqual([]);
    expect(registry!.disposed).toBe(true);
    expect(exited.length).toBeGreaterThanOrEqual(2);
    expect(readdirSync(tmpRoot)).toEqual([]);
    void tmpDir;
  });

  it('close() does the same, is idempotent, and the environment is closed afterwards', async () => {
    const env = await withEnv();
    await startEverything(env);
    const prefix = env.processes.manager.cookiePrefix;
    await Promise.all([env.close(), env.close()]);
    await env.close();
    expect(env.closed).toBe(true);
    expect(survivors(prefix)).toEqual([]);
    await expect(env.browserSession()).rejects.toThrow(EnvironmentClosedError);
    await expect(env.registry.execute('cli_based_tool', { command: 'echo hi' })).rejects.toThrow(/disposed/);
  });

  it('kills a host command that is still running at close', async () => {
    const env = await withEnv();
    const running = env.shell.run('sleep 300; echo never');
    await waitFor(() => env.processes.list().some((p) => p.isRunning && p.command.startsWith('sleep 300')), {
      what: 'the command',
      timeoutMs: 10_000,
    });
    const prefix = env.processes.manager.cookiePrefix;
    await env.close();
    const result = await running;
    expect(result.stdout).not.toContain('never');
    expect(result.returncode).not.toBe(0);
    expect(survivors(prefix)).toEqual([]);
  });

  it("the shell: timeouts kill the command's tree; cwd and env apply; logs are kept", async () => {
    await using env = await withEnv();
    mkdirSync(join(work, 'sub'));
    expect(await env.shell.run('pwd', { cwd: 'sub' })).toMatchObject({ stdout: `${join(work, 'sub')}\n` });
    expect(await env.shell.run('echo "$GREETING"', { env: { GREETING: 'hola' } })).toMatchObject({
      stdout: 'hola\n',
    });
    const slow = await env.shell.run('sleep 30', { timeoutSec: 0.5 });
    expect(slow.error_code).toBe('TIMED_OUT');
    expect(survivors(env.processes.manager.cookiePrefix)).toEqual([]);
    const p = env.processes.manager.spawn('sh', ['-c', 'echo out; echo err >&2'], { label: 'logger' });
    await p.result;
    expect(await env.processes.logs(p.id)).toMatchObject({
      label: 'logger',
      running: false,
      exitCode: 0,
      stdout: { head: 'out\n' },
      stderr: { head: 'err\n' },
    });
    expect(await env.processes.logs('nope')).toBeUndefined();
    await expect(env.shell.run('  ')).rejects.toThrow(
      /environment option 'shell.run command': expected a non-empty command line/,
    );
  });

  it("the shell runs behind the permission plugin's kernel wall: protected files stay read-only", async () => {
    if (!findBwrap()) {
      if (process.env.CI) throw new Error('bubblewrap is required under CI (apt-get install -y bubblewrap)');
      return;
    }
    writeFileSync(join(work, '.env'), 'SECRET=1\n');
    await using env = await withEnv();
    const result = await env.shell.run('echo hacked > .env');
    expect(result.returncode).not.toBe(0);
    expect(result.error_code).toBe('SANDBOX_REFUSED_WRITE');
    expect(readFileSync(join(work, '.env'), 'utf8')).toBe('SECRET=1\n');
    // It is the host's own call: the gate is not asked (the audit log stays empty).
    expect(getPermissionEngine(env.registry)!.audit()).toEqual([]);
  });

  it('exposes the file tools when the host asks, and the plugins map in order', async () => {
    await using env = await withEnv({ files: { maxReadLines: 5 } });
    expect(env.registry.tools().map((t) => t.name)).toEqual(
      expect.arrayContaining(['read_file', 'edit_file', 'glob']),
    );
    writeFileSync(join(work, 'ten.txt'), Array.from({ length: 10 }, (_, i) => `${i}`).join('\n'));
    expect(await env.registry.execute('read_file', { path: 'ten.txt' })).toMatchObject({
      lines: 5,
      next_offset: 6,
    });
    expect((await env.files.read('ten.txt')).lines).toBe(5);
    expect(
      env.registry
        .plugins()
        .filter((p) => p.exposed)
        .map((p) => p.name),
    ).toEqual(['permission', 'cli', 'background', 'terminal', 'trash', 'files', 'environment']);
  });

  it('takes over a registry the host made, and disposes it at close', async () => {
    const registry = new PluginRegistry({ cwd: work, tempRoot: tmpRoot });
    const env = await createEnvironment({
      registry,
      plugins: { cli: { background: false }, permission: {} },
    });
    expect(env.registry).toBe(registry);
    expect(env.workingDir).toBe(work);
    await env.close();
    expect(registry.disposed).toBe(true);
  });
});

describe('start-up failures', () => {
  it('rejects bad options before starting anything, naming the field', async () => {
    const cases: [EnvironmentOptions, RegExp][] = [
      [
        { executor: { kind: 'ssh' } as never },
        /environment option 'executor.host': expected .*string.*; received nothing/,
      ],
      [
        { workingDir: join(root, 'missing') },
        /environment option 'workingDir': expected an existing directory; received ".*missing"/,
      ],
      [{ files: { maxReadLines: 0 } }, /environment option 'files.maxReadLines': expected Too small/],
      [{ plugins: { cli: 'yes' as never } }, /environment option 'plugins.cli': expected a config object/],
      [
        { cdpUrl: 'auto', plugins: { browser: { cdpUrl: 'auto' } } },
        /environment option 'cdpUrl': expected the browser configured once/,
      ],
      [
        { cdpUrl: 42 as never },
        /environment option 'cdpUrl': expected 'auto', null, or a ws:\/\/ or http:\/\/ URL; received 42/,
      ],
    ];
    for (const [options, message] of cases) {
      await expect(createEnvironment({ workingDir: work, tmpRoot, ...options })).rejects.toThrow(message);
    }
    // Executor configs are checked before anything starts (the kinds are @conch/exec-server's).
    const error = await createEnvironment({ executor: { kind: 'container' } as never }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidEnvironmentOptionError);
    expect((error as InvalidEnvironmentOptionError).code).toBe('INVALID_ENVIRONMENT_OPTION');
    expect((error as Error).message).toMatch(/environment option 'executor\.(engine|container)'/);
    await expect(createEnvironment({ executor: { kind: 'teleport' } as never })).rejects.toThrow(
      /environment option 'executor\.kind'/,
    );
  });

  it('undoes what it started when a later step fails (the browser variant is in environment-browser.test.ts)', async () => {
    const registry = new PluginRegistry({ cwd: work, tempRoot: tmpRoot });
    const error = await createEnvironment({
      registry,
      tmpRoot,
      plugins: { ...PLUGINS, 'no-such-plugin': {} },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NoSuchPluginError);
    expect((error as Error).message).toMatch(/no-such-plugin/);
    expect(registry.disposed).toBe(true);
    // afterEach: the temp dir is gone
  });

  it('an abort during start-up undoes it and rejects with ABORTED', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(
      createEnvironment({ workingDir: work, tmpRoot, signal: controller.signal }),
    ).rejects.toMatchObject({
      code: 'ABORTED',
    });
    const late = new AbortController();
    const starting = createEnvironment({ workingDir: work, tmpRoot, plugins: PLUGINS, signal: late.signal });
    late.abort();
    await expect(starting).rejects.toMatchObject({ code: 'ABORTED' });
  });
});
