// Over a real sshd on 127.0.0.1 (own mount + pid namespaces where possible): the whole target suite, the bundle copied once and reused, one control master per executor, and nothing left after a host is SIGKILLed.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { backgroundPlugin } from '@conch/background';
import { runCommand } from '@conch/cli';
import { definePlugin, defineTool, PluginRegistry } from '@conch/core';
import type { ProcessManager } from '@conch/process';
import { expect, test } from 'vitest';
import { z } from 'zod';
import { bundleManifest } from './bundle/bundle.js';
import { ExecServerStartError } from './errors/exec-server-start-error.js';
import { marker, pidsWithArg, waitFor } from './test-support/helpers.js';
import { sshdAvailable, sshExecutorConfig, startSshd, type TestSshd } from './test-support/sshd.js';
import { describeTarget } from './test-support/target-suite.js';

let sshd: TestSshd;
/**
 * Where a target that is not isolated caches the bundle. Isolated, the target's ~/.cache is its
 * own (empty) tmpfs and the default place is tested; not isolated, the target shares this host's
 * HOME, whose cache an earlier run (or a real use of conch) may already hold, so the tests get a
 * cache of their own rather than read (and write) the real one.
 */
let cacheDir: string | undefined;

/** A file's mtime, or undefined when it does not exist. */
function mtimeOf(path: string): number | undefined {
  return statSync(path, { throwIfNoEntry: false })?.mtimeMs;
}

describeTarget('ssh target (real sshd on 127.0.0.1)', {
  available: sshdAvailable(),
  start: async () => {
    sshd = await startSshd();
    cacheDir = sshd.isolated ? undefined : mkdtempSync(join(tmpdir(), 'conch-ssh-cache-'));
    return {
      config: {
        ...sshExecutorConfig(sshd),
        ...(cacheDir ? { cacheDir } : {}),
      },
      target: `ssh:${sshd.user}@127.0.0.1:${sshd.port}`,
      cwd: sshd.home,
      home: sshd.home,
      isolated: sshd.isolated,
      stop: async () => {
        await sshd.stop();
        if (cacheDir) rmSync(cacheDir, { recursive: true, force: true });
      },
    };
  },
  extra: ({ target, newTarget, harness }) => {
    test('the bundle is copied into the target on first use and reused by later connections', async () => {
      const { hash } = bundleManifest();
      const hostCopy = join(homedir(), '.cache', 'conch', 'exec-server', hash, '.complete');
      const hostBefore = mtimeOf(hostCopy);
      const first = await target().client!.connect();
      expect(first.deployed).toBe(true);
      expect(first.hello.bundle).toBe(hash);
      expect(first.hello.version).toBe(1);
      if (cacheDir) {
        // Not isolated (an ordinary user cannot unshare): the target is this machine, and its
        // cache is outside what the target's file tools may read (its working dir, its temp dir).
        expect(statSync(join(cacheDir, hash, '.complete')).isFile()).toBe(true);
      } else {
        expect((await target().files.stat(`.cache/conch/exec-server/${hash}/.complete`)).type).toBe('file');
      }
      // The copy is in the target's own cache: this host's (whatever an earlier run left) is untouched.
      expect(mtimeOf(hostCopy)).toBe(hostBefore);
      const second = newTarget();
      try {
        const info = await second.client!.connect();
        expect(info.deployed).toBe(false);
        expect(info.hello.bundle).toBe(hash);
        expect(info.hello.pid).not.toBe(first.hello.pid);
      } finally {
        await second.dispose();
      }
    });

    test('a node missing in the target is named as such', async () => {
      const broken = newTarget({ node: '/nonexistent/bin/node' });
      try {
        const error = await broken.client!.connect().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(ExecServerStartError);
        expect(error).toMatchObject({ stage: 'node-missing', code: 'EXEC_SERVER_START_FAILED' });
      } finally {
        await broken.dispose();
      }
    });

    test("cli's own runner over the remote process layer: results, auto-backgrounding, a background task", async () => {
      // What the proposed cli integration does: runCommand with the target's process layer.
      const registry = new PluginRegistry({ cwd: '/', plugins: [backgroundPlugin] });
      const manager = target().processes as unknown as ProcessManager;
      registry.register(
        definePlugin({
          name: 'remote-cli',
          version: '0.0.0',
          configSchema: z.strictObject({}),
          setup: () => ({
            tools: [
              defineTool({
                name: 'remote_cli',
                description: 'cli_based_tool on the target',
                inputSchema: z.strictObject({ command: z.string() }),
                execute: (args, call) => runCommand(call, args, { autoBackgroundThreshold: 3 }, { manager }),
              }),
            ],
          }),
        }),
      );
      await registry.expose('background');
      await registry.expose('remote-cli');
      // Connected (and deployed) before the clock of auto-backgrounding starts.
      await target().client!.connect();
      try {
        const done = await registry.execute('remote_cli', {
          command: 'echo "$HOSTNAME_CHECK" hi && echo there >&2; exit 2',
        });
        expect(done).toMatchObject({ returncode: 2, stdout: ' hi\n', stderr: 'there\n', mode: 'shell' });
        const slow = await registry.execute('remote_cli', { command: 'sleep 6; echo slow done' });
        expect(slow).toMatchObject({ status: 'running' });
        const taskId = slow.background_task_id as string;
        const checked = await registry.execute('check_background_task', {
          task_id: taskId,
          wait_seconds: 30,
        });
        expect(JSON.stringify(checked)).toContain('slow done');
      } finally {
        await registry.dispose();
      }
    });

    test('each executor has its own control master, and dispose ends it', async () => {
      const masters = () => pidsWithArg('[mux]').filter((pid) => pidsWithArg('conch-ssh-').includes(pid));
      const before = new Set(masters());
      const own = newTarget();
      await own.processes.spawn('true').result;
      const mine = masters().filter((pid) => !before.has(pid));
      expect(mine.length).toBe(1);
      await own.dispose();
      await waitFor(() => !masters().includes(mine[0]!), 10_000, 'the control master ended by dispose');
    });

    test('a SIGKILLed host leaves nothing: the target kills its processes when the grace period ends, the control master ends after ControlPersist', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'conch-host-'));
      const m = marker('host-death');
      const script = join(dir, 'host.mjs');
      const entry = fileURLToPath(new URL('../dist/index.js', import.meta.url));
      writeFileSync(
        script,
        `import { executorFromConfig } from ${JSON.stringify(entry)};
         const target = executorFromConfig(${JSON.stringify({ ...harness().config, controlPersistSeconds: 2, detachGraceMs: 2000 })}, { cwd: process.cwd() });
         const proc = target.processes.spawn(${JSON.stringify(`sleep 300; : ${m}`)}, [], { shell: true });
         await proc.spawned;
         process.stdout.write('running\\n');
         setInterval(() => {}, 1000);`,
      );
      // A control master renames itself 'ssh: <ControlPath> [mux]': this host's is the new one.
      const masters = () => pidsWithArg('[mux]').filter((pid) => pidsWithArg('conch-ssh-').includes(pid));
      const before = new Set(masters());
      const newMasters = () => masters().filter((pid) => !before.has(pid));
      const controlDirs = () => readdirSync(tmpdir()).filter((n) => n.startsWith('conch-ssh-'));
      const dirsBefore = new Set(controlDirs());
      const host = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
      try {
        await new Promise<void>((resolve, reject) => {
          host.stdout.on('data', (d: Buffer) => d.toString().includes('running') && resolve());
          host.once('exit', (code) => reject(new Error(`host exited early (${code})`)));
        });
        await waitFor(() => pidsWithArg(m).length > 0, 10_000, 'the remote sleep');
        expect(newMasters().length).toBe(1);
        host.kill('SIGKILL');
        await waitFor(
          () => pidsWithArg(m).length === 0,
          20_000,
          'the remote sleep killed after the host died',
        );
        await waitFor(
          () => newMasters().length === 0,
          20_000,
          'the control master gone after ControlPersist',
        );
      } finally {
        host.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
        // The dead host's control socket directory (its master is gone; nothing else is left).
        for (const name of controlDirs()) {
          if (!dirsBefore.has(name)) rmSync(join(tmpdir(), name), { recursive: true, force: true });
        }
      }
    });
  },
});
