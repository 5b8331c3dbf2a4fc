// The exec protocol over a plain local pipe (the boot script, deploy by content hash, version checks, a dead or silent server, streamed output that adds up, rc-file noise before the hello): what every transport relies on.
import 'reflect-metadata';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventBus } from '@conch/core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BOOT_SCRIPT } from './bundle/boot-script.js';
import { bundleDir, bundleManifest } from './bundle/bundle.js';
import { ExecClient } from './client/exec-client.js';
import { RemoteProcessManager } from './client/remote-process-manager.js';
import type { RemoteProcess } from './client/remote-process.js';
import { ExecServerStartError } from './errors/exec-server-start-error.js';
import { ProtocolVersionError } from './errors/protocol-version-error.js';
import { RpcError, RpcPeer } from './json-rpc.js';
import { marker, memoryLogger, pidsWithArg, waitFor } from './test-support/helpers.js';
import { CommandTransport } from './transport/command-transport.js';

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'conch-exec-protocol-'));
});
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** A "target" that is this machine, reached through a command line like any transport. */
function localClient(
  options: Partial<ConstructorParameters<typeof ExecClient>[0]> & { prefix?: string[] } = {},
) {
  const { prefix = [], ...rest } = options;
  return new ExecClient({
    transport: new CommandTransport({ command: prefix, target: 'local-pipe' }),
    cacheDir: join(scratch, 'cache'),
    ...rest,
  });
}

describe('deploy by content hash', () => {
  test('the first connection installs the bundle, later ones reuse it, a partial copy is replaced', async () => {
    const cacheDir = join(scratch, 'deploy-cache');
    const { hash } = bundleManifest();
    const first = localClient({ cacheDir });
    try {
      const info = await first.connect();
      expect(info.deployed).toBe(true);
      expect(info.hello.bundle).toBe(hash);
      expect(readFileSync(join(cacheDir, hash, '.complete'), 'utf8')).toBe(`${hash}\n`);
      // Every file of the manifest is there, byte for byte.
      for (const file of bundleManifest().files) {
        expect(
          readFileSync(join(cacheDir, hash, file.path)).equals(readFileSync(join(bundleDir(), file.path))),
        ).toBe(true);
      }
    } finally {
      await first.dispose();
    }
    const second = localClient({ cacheDir });
    try {
      expect((await second.connect()).deployed).toBe(false);
    } finally {
      await second.dispose();
    }
    // An interrupted copy (no .complete marker) is not trusted: the next connection copies again.
    rmSync(join(cacheDir, hash, '.complete'));
    rmSync(join(cacheDir, hash, 'exec-server.js'));
    const third = localClient({ cacheDir });
    try {
      // The boot script installs next to the broken directory, then moves into place.
      rmSync(join(cacheDir, hash), { recursive: true });
      expect((await third.connect()).deployed).toBe(true);
      expect(existsSync(join(cacheDir, hash, 'exec-server.js'))).toBe(true);
    } finally {
      await third.dispose();
    }
  });

  test('the boot script refuses bytes that do not match the manifest', async () => {
    const cacheDir = join(scratch, 'corrupt-cache');
    const { hash, files } = bundleManifest();
    const child = spawn(process.execPath, ['-e', BOOT_SCRIPT, hash, cacheDir], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('need-bundle') && !child.stdin.writableEnded) {
        const header = `${JSON.stringify({ hash, files })}\n`;
        const total = files.reduce((n, f) => n + f.size, 0);
        child.stdin.end(Buffer.concat([Buffer.from(header), Buffer.alloc(total, 0x61)]));
      }
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(3);
    expect(out).toContain('"code":"BUNDLE_CORRUPT"');
    expect(existsSync(join(cacheDir, hash))).toBe(false);
  });
});

describe('versions and start failures', () => {
  test('a server speaking another protocol version is refused with both versions named', async () => {
    const fake = join(scratch, 'old-server.mjs');
    writeFileSync(
      fake,
      `process.stdout.write(JSON.stringify({ jsonrpc: '2.0', method: 'server.hello', params: { protocol: 'conch-exec', version: 99, serverVersion: '9.9.9' } }) + '\\n');
       process.stdin.resume(); process.stdin.on('end', () => process.exit(0));`,
    );
    const client = localClient({ serverCommand: [process.execPath, fake] });
    try {
      const error = await client.connect().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ProtocolVersionError);
      expect(error).toMatchObject({
        code: 'EXEC_SERVER_PROTOCOL_MISMATCH',
        serverVersion: 99,
        clientVersion: 1,
      });
      expect((error as Error).message).toMatch(/version 1 .*version 99/);
    } finally {
      await client.dispose();
    }
  });

  test('the server refuses a client of another version, naming both', async () => {
    const { hash } = bundleManifest();
    const child = spawn(process.execPath, ['-e', BOOT_SCRIPT, hash, join(scratch, 'cache')], {
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    // Deploy first if this cache is new (the earlier tests may have run alone).
    const seen = new Promise<void>((resolve) => {
      let buf = '';
      const onData = (d: Buffer) => {
        buf += d.toString();
        if (buf.includes('need-bundle')) {
          const { files } = bundleManifest();
          child.stdin.write(`${JSON.stringify({ hash, files })}\n`);
          for (const f of files) child.stdin.write(readFileSync(join(bundleDir(), f.path)));
          buf = '';
        }
        if (buf.includes('server.hello')) {
          child.stdout.off('data', onData);
          resolve();
        }
      };
      child.stdout.on('data', onData);
    });
    await seen;
    const peer = new RpcPeer({ input: child.stdout, output: child.stdin });
    const error = await peer.request('initialize', { version: 2, client: 'test', idleTimeoutMs: 0 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RpcError);
    expect((error as RpcError).data.code).toBe('PROTOCOL_MISMATCH');
    expect((error as Error).message).toContain('speaks version 1; the client speaks version 2');
    peer.close('done');
    await new Promise((resolve) => child.once('exit', resolve));
  });

  test('a transport that cannot run node fails with the stage and what it printed', async () => {
    const client = localClient({ prefix: ['sh', '-c', 'echo "sh: node: not found" >&2; exit 127', 'sh'] });
    try {
      const error = await client.connect().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ExecServerStartError);
      expect(error).toMatchObject({
        code: 'EXEC_SERVER_START_FAILED',
        stage: 'node-missing',
        target: 'local-pipe',
      });
      expect((error as Error).message).toContain('node: not found');
    } finally {
      await client.dispose();
    }
  });

  test('noise a login shell prints before the server is skipped', async () => {
    const client = localClient({
      prefix: ['sh', '-c', 'echo "Welcome to the box"; echo "{ not json"; exec "$@"', 'sh'],
    });
    try {
      const info = await client.connect();
      expect(info.hello.protocol).toBe('conch-exec');
    } finally {
      await client.dispose();
    }
  });
});

describe('a server that dies or goes silent', () => {
  test('the server killed mid-run (detachGraceMs 0): the run fails with TRANSPORT_LOST, its process dies, the next call reconnects', async () => {
    const client = localClient({ detachGraceMs: 0 });
    const manager = new RemoteProcessManager({ client });
    try {
      const m = marker('server-killed');
      const proc = manager.spawn(`sleep 300; : ${m}`, [], { shell: true });
      await proc.spawned;
      await waitFor(() => pidsWithArg(m).length > 0, 10_000, 'the process running');
      const { hello, init } = client.lastConnection!;
      const deadTempDir = init.tempDir;
      expect(existsSync(deadTempDir)).toBe(true);
      // SIGKILL: the server cannot clean up, but its supervisor sees the server's channel close.
      process.kill(hello.pid, 'SIGKILL');
      const result = await proc.result;
      expect(result.errorCode).toBe('TRANSPORT_LOST');
      await waitFor(
        () => pidsWithArg(m).length === 0,
        20_000,
        "the dead server's process swept by its supervisor",
      );
      const again = await manager.spawn('echo', ['again']).result;
      expect(again.stdout.head).toBe('again\n');
      expect(client.lastConnection!.generation).toBe(2);
      // The dead server could not remove its temp dir; the next server did.
      expect(existsSync(deadTempDir)).toBe(false);
    } finally {
      await manager.dispose();
      await client.dispose();
    }
  });

  test('a client that stops talking, detachGraceMs 0: the server ends after its idle timeout and kills what it ran', async () => {
    const { logger } = memoryLogger();
    const client = localClient({ heartbeatMs: 600_000, idleTimeoutMs: 1500, detachGraceMs: 0, logger });
    const manager = new RemoteProcessManager({ client });
    try {
      const m = marker('idle');
      const proc = manager.spawn(`sleep 300; : ${m}`, [], { shell: true });
      await proc.spawned;
      // Its command line shows once its exec is through, which can trail the spawn's answer (a
      // vfork parent resumes before the kernel sets the new program's arguments).
      await waitFor(() => pidsWithArg(m).length > 0, 10_000, 'the process running');
      // The server kills what it runs (and reports it) before it closes the stream.
      const result = await proc.result;
      expect(result).toMatchObject({ killed: true, reason: 'killed' });
      await waitFor(
        () => client.currentGeneration === undefined,
        20_000,
        'the connection closed by the server',
      );
      expect(pidsWithArg(m)).toEqual([]);
    } finally {
      await manager.dispose();
      await client.dispose();
    }
  });
});

describe('a session that outlives its stream', () => {
  // The transport is a shell that runs the server as its child (not exec'd): like ssh or podman
  // exec, ending the transport process does not end the server.
  const forking = ['sh', '-c', '"$@"; exit $?', 'sh'];

  test('a client that stops talking: the server detaches (its work kept), the client re-attaches, and the work is there', async () => {
    const client = localClient({ prefix: forking, heartbeatMs: 600_000, idleTimeoutMs: 1500 });
    const manager = new RemoteProcessManager({ client });
    try {
      const m = marker('detach-idle');
      const proc = manager.spawn(`echo started; sleep 300; : ${m}`, [], {
        shell: true,
        capture: { spill: 'combined' },
      }) as RemoteProcess;
      await proc.spawned;
      const first = client.lastConnection!;
      expect(first.init.session).toMatchObject({ graceMs: 60_000 });
      // Silence detaches the server, which closes its stream; the waiting process re-attaches.
      await waitFor(() => client.lastConnection!.reattached, 20_000, 'the client re-attached');
      const again = client.lastConnection!;
      expect(again.hello.pid).toBe(first.hello.pid);
      expect(again.session).toBe(first.session);
      expect(again.detachedMs).toBeGreaterThanOrEqual(0);
      expect(proc.isRunning).toBe(true);
      expect(pidsWithArg(m).length).toBeGreaterThan(0);
      expect(Buffer.from(await proc.combined!.read(0, 100)).toString()).toBe('started\n');
      const killed = await proc.kill();
      expect(killed).toMatchObject({ killed: true });
      expect(pidsWithArg(m)).toEqual([]);
    } finally {
      await manager.dispose();
      await client.dispose();
    }
  });

  test('a SIGKILLed server cannot be re-attached: the waiting run ends SESSION_EXPIRED naming it, the next call says so, the one after starts anew', async () => {
    const client = localClient({ prefix: forking });
    const manager = new RemoteProcessManager({ client });
    try {
      const m = marker('server-gone');
      const proc = manager.spawn(`sleep 300; : ${m}`, [], { shell: true });
      await proc.spawned;
      process.kill(client.lastConnection!.hello.pid, 'SIGKILL');
      const result = await proc.result;
      expect(result.errorCode).toBe('SESSION_EXPIRED');
      expect(result.spawnError?.message).toContain(`process ${proc.id} (sleep 300; : ${m})`);
      await waitFor(() => pidsWithArg(m).length === 0, 20_000, "the dead server's process swept");
      const next = manager.spawn('echo', ['next']);
      const nextResult = await next.result;
      expect(nextResult.errorCode).toBe('SESSION_EXPIRED');
      const after = await manager.spawn('echo', ['after']).result;
      expect(after.stdout.head).toBe('after\n');
    } finally {
      await manager.dispose();
      await client.dispose();
    }
  });
});

describe('output streaming', () => {
  test('streamed chunks plus what the window skipped add up to every byte, in order', async () => {
    const events = new EventBus();
    const client = localClient();
    const manager = new RemoteProcessManager({ client, events });
    try {
      let streamed = '';
      let eventChars = 0;
      events.on('process.output', (e) => {
        eventChars += e.text.length;
      });
      const size = 12 * 1024 * 1024;
      const proc = manager.spawn(`yes 0123456789abcdef | head -c ${size}`, [], {
        shell: true,
        capture: { spill: 'combined' },
      }) as RemoteProcess;
      proc.onOutput((e) => {
        streamed += e.text;
      });
      const result = await proc.result;
      expect(result.stdout.totalBytes).toBe(size);
      expect(streamed.length + proc.skippedBytes).toBe(size);
      expect(eventChars).toBe(streamed.length);
      // What arrived is the start of the output (the window drops the newest, never reorders).
      expect(streamed.slice(0, 34)).toBe('0123456789abcdef\n0123456789abcdef\n');
    } finally {
      await manager.dispose();
      await client.dispose();
    }
  });

  test('a listener added in the same tick as spawn (no event listener) gets the output from its first byte', async () => {
    const client = localClient();
    const manager = new RemoteProcessManager({ client });
    try {
      for (let round = 0; round < 5; round++) {
        let streamed = '';
        const proc = manager.spawn("printf 'first line\\n'; yes 0123456789abcdef | head -c 2000000", [], {
          shell: true,
          capture: { spill: 'combined' },
        }) as RemoteProcess;
        proc.onOutput((e) => (streamed += e.text));
        const result = await proc.result;
        expect(streamed.length + proc.skippedBytes).toBe(result.stdout.totalBytes);
        expect(streamed.startsWith('first line\n0123456789abcdef\n')).toBe(true);
      }
    } finally {
      await manager.dispose();
      await client.dispose();
    }
  });

  for (const [what, before] of [
    ['100 KB', 100_000],
    ['3 MB (more than the stream window)', 3_000_000],
  ] as const) {
    test(`a listener added once ${what} was written: what came before is skipped, streamed plus skipped is every byte`, async () => {
      const client = localClient();
      const manager = new RemoteProcessManager({ client });
      const dir = mkdtempSync(join(tmpdir(), 'conch-late-listener-'));
      const flag = join(dir, 'go');
      try {
        const proc = manager.spawn(
          `head -c ${before} /dev/zero | tr '\\0' a; while [ ! -e ${flag} ]; do sleep 0.02; done; head -c 50000 /dev/zero | tr '\\0' b`,
          [],
          { shell: true, capture: { spill: 'combined' } },
        ) as RemoteProcess;
        await waitFor(() => (proc.combined?.totalBytes ?? 0) >= before, 60_000, 'the first output');
        let streamed = '';
        proc.onOutput((e) => (streamed += e.text));
        writeFileSync(flag, '');
        const result = await proc.result;
        expect(result.stdout.totalBytes).toBe(before + 50_000);
        expect(streamed.length + proc.skippedBytes).toBe(before + 50_000);
        expect(proc.skippedBytes).toBeGreaterThanOrEqual(before);
        expect(streamed.endsWith('b'.repeat(1000))).toBe(true);
      } finally {
        await manager.dispose();
        await client.dispose();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
