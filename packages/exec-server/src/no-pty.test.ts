// A target whose node-pty cannot load: terminal calls fail with TERMINAL_UNAVAILABLE and a clear message, and the server keeps running, answering, and keeping its background processes alive.
import 'reflect-metadata';
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { bundleDir, type BundleManifest } from './bundle/bundle.js';
import { ExecClient } from './client/exec-client.js';
import { RemoteProcessManager } from './client/remote-process-manager.js';
import { RemoteTerminal } from './client/remote-terminal.js';
import { marker, memoryLogger, pidsWithArg, waitFor } from './test-support/helpers.js';
import { CommandTransport } from './transport/command-transport.js';
import { RpcPeer } from './json-rpc.js';
import { ExecServer } from './server/exec-server.js';
import { PassThrough } from 'node:stream';

let scratch: string;
let brokenBundle: string;

/**
 * The server bundle as a target without a working node-pty gets it: the prebuilt pty.node of no
 * platform (as on a platform the bundle has no binary for), everything else intact and consistent.
 */
function bundleWithoutPty(to: string): string {
  cpSync(bundleDir(), to, { recursive: true });
  const manifest = JSON.parse(readFileSync(join(to, 'manifest.json'), 'utf8')) as BundleManifest;
  for (const file of manifest.files) {
    if (file.path.endsWith('.node')) rmSync(join(to, file.path));
  }
  const files = manifest.files.filter((f) => !f.path.endsWith('.node'));
  const sha = (s: string) => createHash('sha256').update(s).digest('hex');
  // The boot script's bundle hash: of each file's path and digest.
  const hash = sha(files.map((f) => `${f.path}\0${f.sha256}\n`).join('')).slice(0, 24);
  writeFileSync(join(to, 'manifest.json'), JSON.stringify({ ...manifest, hash, files }));
  return to;
}

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'conch-exec-nopty-'));
  brokenBundle = bundleWithoutPty(join(scratch, 'bundle'));
});
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

describe('a target with no working PTY', () => {
  test('terminal calls return TERMINAL_UNAVAILABLE; the server, and the background task it runs, stay alive', async () => {
    const { logger, lines } = memoryLogger('debug');
    const client = new ExecClient({
      // No NODE_PATH (pnpm's points at the workspace's own node-pty binary): a clean target.
      transport: new CommandTransport({ command: ['env', '-u', 'NODE_PATH'], target: 'local-nopty' }),
      cacheDir: join(scratch, 'cache'),
      bundleDir: brokenBundle,
      logger,
    });
    const manager = new RemoteProcessManager({ client });
    const terminal = new RemoteTerminal({ client, logger });
    try {
      const m = marker('nopty-task');
      const task = manager.spawn(`sleep 300; : ${m}`, [], { shell: true });
      await task.spawned;
      await waitFor(() => pidsWithArg(m).length > 0, 20_000, 'the background task running');
      const serverPid = client.lastConnection!.hello.pid;
      expect(client.lastConnection!.init.pty).toMatchObject({
        available: false,
        reason: expect.stringContaining('@lydell/node-pty'),
      });

      const ctx = {
        callId: 'call-1',
        signal: new AbortController().signal,
        resolveOptional: () => undefined,
      } as unknown as Parameters<RemoteTerminal['execute']>[1];
      const first = await terminal.execute({ command: 'echo hi' }, ctx);
      expect(first).toMatchObject({ error_code: 'TERMINAL_UNAVAILABLE', target: 'local-nopty' });
      expect(String(first.error)).toMatch(/node-pty/);
      // Asked again (a model retries): the same answer, not a crash.
      const second = await terminal.execute({ command: 'echo again' }, { ...ctx, callId: 'call-2' });
      expect(second).toMatchObject({ error_code: 'TERMINAL_UNAVAILABLE' });

      // Whatever failed asynchronously in the server has had its turn by now.
      await new Promise((r) => setTimeout(r, 500));
      const again = await manager.spawn('echo', ['still-serving']).result;
      expect(again.stdout.head).toBe('still-serving\n');
      expect(client.lastConnection!.hello.pid).toBe(serverPid);
      expect(client.lastConnection!.generation).toBe(1);
      expect(pidsWithArg(m).length).toBeGreaterThan(0);
      // The server's own log (forwarded to this logger) names no uncaught exception.
      expect(lines().filter((l) => JSON.stringify(l).includes('uncaught exception'))).toEqual([]);
      await task.kill();
    } finally {
      terminal.dispose();
      await manager.dispose();
      await client.dispose();
    }
  }, 120_000);

  test('a server pointed at a PTY module that throws on load refuses the terminal and keeps answering (in this process: nothing uncaught)', async () => {
    const bad = join(scratch, 'bad-pty.cjs');
    writeFileSync(bad, "throw new Error('this target has no /dev/ptmx');\n");
    const toServer = new PassThrough();
    const fromServer = new PassThrough();
    const { logger } = memoryLogger('warn');
    let shutdown: string | undefined;
    const server = new ExecServer({
      input: toServer,
      output: fromServer,
      logger,
      ptyModule: bad,
      onShutdown: (reason) => (shutdown = reason),
    });
    const client = new RpcPeer({ input: fromServer, output: toServer, onClose: () => {} });
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', onUncaught);
    try {
      server.start();
      const init = await client.request<{ pty: { available: boolean; reason?: string } }>('initialize', {
        version: 1,
        client: 'test',
        cwd: scratch,
        idleTimeoutMs: 0,
      });
      expect(init.pty).toEqual({ available: false, reason: 'this target has no /dev/ptmx' });
      for (let i = 0; i < 2; i++) {
        await expect(client.request('terminal.open', { config: {} })).rejects.toMatchObject({
          message: expect.stringMatching(
            /expected node-pty to load in the target .*: this target has no \/dev\/ptmx/,
          ),
          data: { code: 'TERMINAL_UNAVAILABLE' },
        });
      }
      await new Promise((r) => setTimeout(r, 200));
      expect(await client.request('ping', {})).toMatchObject({ now: expect.any(Number) });
      expect(uncaught).toEqual([]);
      expect(shutdown).toBeUndefined();
    } finally {
      process.off('uncaughtException', onUncaught);
      await server.shutdown('test over');
    }
  });
});
