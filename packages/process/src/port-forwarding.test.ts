// Invariant: a server a command starts in an isolated sandbox (its own network namespace) on 127.0.0.1, 0.0.0.0 or ::1 is reachable from the host at 127.0.0.1:<same port> while it listens — every byte both ways, what a server says first included — and only then: the host port closes when it stops listening, when its sandbox is idle and at dispose; a port taken on the host is never taken over; the sandbox gains no way out; nothing is forwarded with forwardPorts: false or without a sandbox.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventBus } from '@conch/core';
import { waitFor } from '@conch/test-support';
import { findBwrap, PROXY_PORT, type SandboxProfile } from '@conch/sandbox';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ManagedProcess } from './managed-process.js';
import { listeningPorts, loopbackTarget, parseListening, tcpSocketsInUse } from './port-forwarder.js';
import { ProcessManager, type ProcessManagerOptions } from './process-manager.js';
import { connectPort } from './supervisor-ports.js';
import type { SupervisorMessage } from './supervisor-protocol.js';
import { survivors } from './test-support/procs.js';

const bwrap = findBwrap();
const NODE = process.execPath;
const hasPython = (() => {
  try {
    execFileSync('python3', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
const hostHasIpv6 = (() => {
  try {
    return readdirSync('/proc/net').includes('if_inet6');
  } catch {
    return false;
  }
})();

/** A port nothing listens on now (the host picks it). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Connects to 127.0.0.1:port on the host: 'refused' (nothing listens), 'reset', or what the peer
 * sent until it closed.
 */
function exchange(port: number, send?: string, host = '127.0.0.1'): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    let got = '';
    socket.setEncoding('utf8');
    socket.on('data', (text: string) => (got += text));
    socket.on('connect', () => {
      if (send !== undefined) socket.end(send);
    });
    socket.on('error', (error: NodeJS.ErrnoException) =>
      resolve(
        error.code === 'ECONNREFUSED' ? 'refused' : error.code === 'ECONNRESET' ? 'reset' : error.code!,
      ),
    );
    socket.on('close', () => resolve(got));
  });
}

/** GET / from the host: the body, or 'refused' / 'reset'. */
async function get(port: number, host = '127.0.0.1'): Promise<string> {
  const answer = await exchange(port, `GET / HTTP/1.0\r\nHost: x\r\n\r\n`, host);
  const body = answer.indexOf('\r\n\r\n');
  return body === -1 ? answer : answer.slice(body + 4);
}

const httpServer = (host: string, port: number, body: string) =>
  `require('http').createServer((q, r) => r.end(${JSON.stringify(body)}))` +
  `.listen(${port}, ${JSON.stringify(host)}, () => console.log('listening'))`;

describe('reading /proc/<pid>/net/tcp', () => {
  const header =
    '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n';
  it('finds the listening sockets (state 0A), decoding addresses in host byte order', () => {
    const tcp =
      header +
      '   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n' +
      '   1: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1\n' +
      '   2: 0100007F:1F91 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 3 1\n';
    expect(parseListening(tcp, true)).toEqual([
      { address: '127.0.0.1', port: 8080 },
      { address: '0.0.0.0', port: 80 },
    ]);
    expect(parseListening(tcp.replace('0100007F:1F90', '7F000001:1F90'), false)[0]).toEqual({
      address: '127.0.0.1',
      port: 8080,
    });
    const tcp6 =
      header +
      '   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 0 0 0 0 0 1 1\n' +
      '   1: 00000000000000000000000000000000:1F91 00000000000000000000000000000000:0000 0A 0 0 0 0 0 1 1\n' +
      '   2: 0000000000000000FFFF00000100007F:1F92 00000000000000000000000000000000:0000 0A 0 0 0 0 0 1 1\n' +
      '   3: 000080FE00000000FF0BBC2F45E617FE:1F93 00000000000000000000000000000000:0000 0A 0 0 0 0 0 1 1\n';
    expect(parseListening(tcp6, true)).toEqual([
      { address: '::1', port: 8080 },
      { address: '::', port: 8081 },
      { address: '::ffff:127.0.0.1', port: 8082 },
      { address: 'fe80::2fbc:bff:fe17:e645', port: 8083 },
    ]);
  });

  it('forwards loopback and wildcard listeners only, to the loopback of their family', () => {
    expect(
      ['127.0.0.1', '0.0.0.0', '::ffff:127.0.0.1', '::1', '::', '10.0.0.2', 'fe80::1'].map(loopbackTarget),
    ).toEqual(['127.0.0.1', '127.0.0.1', '127.0.0.1', '::1', '::1', undefined, undefined]);
  });

  it("reads a live process's table: this process's own listener shows", async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as { port: number };
      expect(listeningPorts(process.pid)?.get(port)).toBe('127.0.0.1');
    } finally {
      server.close();
    }
    expect(listeningPorts(2 ** 22 + 1)).toBeUndefined(); // no such process
  });
});

describe('counting the sockets of a namespace (/proc/<pid>/net/sockstat)', () => {
  it("reads this process's counts, and undefined for a process that is gone", () => {
    const counts = tcpSocketsInUse(process.pid);
    expect(counts).toMatch(/^\d+(\/\d+)?$/);
    expect(tcpSocketsInUse(2 ** 22 + 1)).toBeUndefined();
  });
});

describe("the supervisor's connect", () => {
  it('connects to nothing but a loopback port', async () => {
    const replies: SupervisorMessage[] = [];
    for (const [host, port] of [
      ['10.0.0.1', 80],
      ['localhost', 80],
      ['127.0.0.1', 0],
      ['127.0.0.1', 70000],
    ] as const) {
      connectPort({ t: 'port-connect', id: 1, host: host as '127.0.0.1', port }, (m) => replies.push(m));
    }
    expect(replies.map((r) => r.t === 'port-error' && r.code)).toEqual([
      'EINVAL',
      'EINVAL',
      'EINVAL',
      'EINVAL',
    ]);
  });
});

// Under CI (.ci/run installs bubblewrap) a missing bwrap fails these tests instead of skipping them.
describe.runIf(bwrap || process.env.CI)('port forwarding out of a sandbox', () => {
  let ws: string;
  let manager: ProcessManager;
  let events: EventBus;
  let hostServers: Server[];
  const sandbox = (): SandboxProfile => ({ kind: 'workspace-write', writableRoots: [ws], readOnlyPaths: [] });
  const create = (options: ProcessManagerOptions = {}) =>
    new ProcessManager({
      cwd: ws,
      tempDir: () => ws,
      killGraceMs: 300,
      drainMs: 300,
      events,
      ...options,
    });

  beforeEach(() => {
    ws = mkdtempSync(join(tmpdir(), 'conch-ports-'));
    events = new EventBus();
    hostServers = [];
    manager = create();
  });
  afterEach(async () => {
    await manager.dispose();
    for (const server of hostServers) server.close();
    expect(survivors(manager.cookiePrefix)).toEqual([]);
    rmSync(ws, { recursive: true, force: true });
  });

  /** Starts a command and waits until its output matches `ready`. */
  async function start(
    file: string,
    args: string[],
    ready: RegExp,
    profile: SandboxProfile | undefined = sandbox(),
    on = manager,
  ): Promise<ManagedProcess> {
    const proc = on.spawn(file, args, { ...(profile ? { sandbox: profile } : {}) });
    let out = '';
    proc.onOutput(({ text }) => (out += text));
    await waitFor(
      () => {
        if (!proc.isRunning) throw new Error(`${file} ended before it was ready: ${out}`);
        return ready.test(out);
      },
      { what: `${file} to be ready`, timeoutMs: 30_000 },
    );
    expect(proc.sandbox).toBe(profile?.kind ?? 'none');
    return proc;
  }

  const serve = (host: string, port: number, body: string, profile?: SandboxProfile, on = manager) =>
    start(NODE, ['-e', httpServer(host, port, body)], /listening/, profile ?? sandbox(), on);

  async function listenOnHost(port: number, answer: string): Promise<void> {
    const server = createServer((socket) => socket.end(answer));
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    hostServers.push(server);
  }

  it('a server on 127.0.0.1 in the sandbox answers on the host at the same port (refreshForwardedPorts)', async () => {
    const forwarded: number[] = [];
    events.on('process.port.forwarded', (e) => forwarded.push(e.port));
    const port = await freePort();
    await serve('127.0.0.1', port, 'from the sandbox');
    await manager.refreshForwardedPorts();
    expect(await get(port)).toBe('from the sandbox');
    expect(manager.forwardedPorts()).toEqual([{ port, sandbox: 'workspace-write', target: '127.0.0.1' }]);
    expect(forwarded).toEqual([port]);
    // Many connections, in parallel.
    const answers = await Promise.all(Array.from({ length: 20 }, () => get(port)));
    expect(new Set(answers)).toEqual(new Set(['from the sandbox']));
  });

  it.runIf(hasPython)(
    'python3 -m http.server on 0.0.0.0 is found by the poll and serves its files',
    async () => {
      writeFileSync(join(ws, 'index.html'), '<title>served</title>\n');
      const port = await freePort();
      await start('python3', ['-u', '-m', 'http.server', String(port), '--bind', '0.0.0.0'], /Serving HTTP/);
      // No refresh: the poll finds it while the server (the supervisor's work) runs.
      await waitFor(() => manager.forwardedPorts().some((p) => p.port === port), {
        what: 'the poll to forward the port',
        timeoutMs: 20_000,
      });
      expect(await get(port)).toBe('<title>served</title>\n');
    },
  );

  it('a server on ::1 only is reached through 127.0.0.1 (and [::1] where the host has IPv6)', async () => {
    const port = await freePort();
    await serve('::1', port, 'v6 inside');
    await manager.refreshForwardedPorts();
    expect(manager.forwardedPorts()).toEqual([{ port, sandbox: 'workspace-write', target: '::1' }]);
    expect(await get(port)).toBe('v6 inside');
    if (hostHasIpv6) expect(await get(port, '::1')).toBe('v6 inside');
  });

  it('every byte travels both ways: a server that speaks first, and an echo after a half-close', async () => {
    const banner = await freePort();
    const echo = await freePort();
    const script =
      `const net = require('net');` +
      `net.createServer((s) => s.end('hello first\\n')).listen(${banner}, '127.0.0.1', () => {` +
      `  net.createServer({ allowHalfOpen: true }, (s) => { let b = ''; s.on('data', (d) => (b += d));` +
      `    s.on('end', () => s.end('echo:' + b.length + ':' + b.slice(-8))); })` +
      `  .listen(${echo}, '127.0.0.1', () => console.log('listening')); });`;
    await start(NODE, ['-e', script], /listening/);
    await manager.refreshForwardedPorts();
    expect(await exchange(banner)).toBe('hello first\n');
    const big = 'x'.repeat(3 * 1024 * 1024) + 'the-end!';
    expect(await exchange(echo, big)).toBe(`echo:${big.length}:the-end!`);
  });

  it('when the server exits, the host port closes (the sandbox still busy: the poll sees it)', async () => {
    const closed: number[] = [];
    events.on('process.port.closed', (e) => closed.push(e.port));
    const port = await freePort();
    const keepBusy = manager.spawn('sleep', ['600'], { sandbox: sandbox() });
    const server = await serve('127.0.0.1', port, 'up');
    await manager.refreshForwardedPorts();
    expect(await get(port)).toBe('up');
    await server.kill();
    // Waited for without connecting (a failed connection inside would also close it).
    await waitFor(() => closed.length > 0, { what: 'the host port to close', timeoutMs: 20_000 });
    expect(await get(port)).toBe('refused');
    expect(manager.forwardedPorts()).toEqual([]);
    expect(closed).toEqual([port]);
    expect(keepBusy.isRunning).toBe(true);
  });

  it('a server that starts while the sandbox has work is forwarded by the poll alone', async () => {
    const opened: number[] = [];
    events.on('process.port.forwarded', (e) => opened.push(e.port));
    const keepBusy = manager.spawn('sleep', ['600'], { sandbox: sandbox() });
    await manager.refreshForwardedPorts(); // the poll's last count is taken now, before the server
    const port = await freePort();
    await serve('127.0.0.1', port, 'polled');
    // No refresh: the poll sees the count of sockets move and reads the tables.
    await waitFor(() => opened.includes(port), { what: 'the poll to forward the port', timeoutMs: 20_000 });
    expect(await get(port)).toBe('polled');
    expect(keepBusy.isRunning).toBe(true);
  });

  it('a server that takes over from another in one moment (the count of sockets unchanged) is still forwarded', async () => {
    const opened: number[] = [];
    const closed: number[] = [];
    events.on('process.port.forwarded', (e) => opened.push(e.port));
    events.on('process.port.closed', (e) => closed.push(e.port));
    const [first, second] = [await freePort(), await freePort()];
    const marker = join(ws, 'swap');
    // One process: on the marker, the first server closes and the second starts listening in the
    // same callback, microseconds apart, so a poll (every 300 ms) all but never sees a count
    // between the two. (Without the tenth poll's read of the tables this test times out.)
    const script =
      `const http = require('http'), fs = require('fs');` +
      `const a = http.createServer((q, r) => r.end('first')).listen(${first}, '127.0.0.1', () => console.log('listening'));` +
      `const t = setInterval(() => { if (!fs.existsSync(${JSON.stringify(marker)})) return; clearInterval(t);` +
      `  a.close(); http.createServer((q, r) => r.end('second')).listen(${second}, '127.0.0.1', () => console.log('swapped')); }, 20);`;
    const proc = await start(NODE, ['-e', script], /listening/);
    await manager.refreshForwardedPorts();
    expect(await get(first)).toBe('first');
    let out = '';
    proc.onOutput(({ text }) => (out += text));
    writeFileSync(marker, '');
    await waitFor(() => /swapped/.test(out), { what: 'the swap', timeoutMs: 20_000 });
    // Within POLLS_PER_FULL_SCAN polls the tables are read whatever the count says.
    await waitFor(() => opened.includes(second) && closed.includes(first), {
      what: 'the second port forwarded and the first closed',
      timeoutMs: 30_000,
    });
    expect(await get(second)).toBe('second');
    expect(await get(first)).toBe('refused');
  }, 90_000);

  it('when the server ends with the last of the sandbox’s work, the host port closes', async () => {
    const port = await freePort();
    const server = await serve('127.0.0.1', port, 'up');
    await manager.refreshForwardedPorts();
    expect(await get(port)).toBe('up');
    const closed = new Promise((resolve) => events.once('process.port.closed', resolve));
    await server.kill();
    // Idle now: no poll runs, the last scan (as the work ended) closed it.
    await closed;
    expect(manager.forwardedPorts()).toEqual([]);
    expect(await get(port)).toBe('refused');
  });

  it('after dispose() nothing listens on the host, and connections in progress are cut', async () => {
    const a = await freePort();
    const b = await freePort();
    await serve('127.0.0.1', a, 'a');
    await serve('0.0.0.0', b, 'b');
    await manager.refreshForwardedPorts();
    expect([await get(a), await get(b)]).toEqual(['a', 'b']);
    const open = connect({ host: '127.0.0.1', port: a });
    await new Promise((resolve) => open.once('connect', resolve));
    const cut = new Promise((resolve) => open.once('close', resolve));
    open.on('error', () => {});
    await manager.dispose();
    await cut;
    expect([await get(a), await get(b)]).toEqual(['refused', 'refused']);
    expect(manager.forwardedPorts()).toEqual([]);
  });

  it('a port taken on the host is never taken over; the server inside still works inside', async () => {
    const port = await freePort();
    await listenOnHost(port, 'the host service');
    await serve('127.0.0.1', port, 'the sandbox server');
    await manager.refreshForwardedPorts();
    await manager.refreshForwardedPorts(); // and not on a second look either
    expect(await exchange(port)).toBe('the host service');
    expect(manager.forwardedPorts()).toEqual([]);
    const inside = await manager.spawn(
      NODE,
      ['-e', `fetch('http://127.0.0.1:${port}/').then((r) => r.text()).then(console.log)`],
      { sandbox: sandbox() },
    ).result;
    expect(inside.stdout.head).toBe('the sandbox server\n');
  });

  it('gives the sandbox no way out: host-only ports stay unreachable inside, a forwarded port inside is the server itself', async () => {
    const hostOnly = await freePort();
    await listenOnHost(hostOnly, 'host secret');
    const port = await freePort();
    await serve('127.0.0.1', port, 'inside');
    await manager.refreshForwardedPorts();
    expect(await get(port)).toBe('inside');
    // From inside: the host's port is not there; the forwarded one is the sandbox's own server.
    const probe =
      `const net = require('net'); const fs = require('fs');` +
      `const tryPort = (p) => new Promise((ok) => { const s = net.connect(p, '127.0.0.1');` +
      `  let got = ''; s.on('data', (d) => (got += d)); s.on('connect', () => s.write('GET / HTTP/1.0\\r\\n\\r\\n'));` +
      `  s.on('error', (e) => ok(e.code)); s.on('close', () => ok(got.split('\\r\\n\\r\\n')[1] ?? got)); });` +
      `const sockets = fs.readdirSync('/tmp').filter((f) => fs.statSync('/tmp/' + f).isSocket());` +
      `Promise.all([tryPort(${hostOnly}), tryPort(${port})]).then((r) => console.log(JSON.stringify([...r, sockets])));`;
    const result = await manager.spawn(NODE, ['-e', probe], { sandbox: sandbox() }).result;
    expect(JSON.parse(result.stdout.head)).toEqual(['ECONNREFUSED', 'inside', []]);
  });

  it("the network bridge's own port is never forwarded", async () => {
    const proxied: SandboxProfile = { ...sandbox(), network: 'proxy' } as SandboxProfile;
    const port = await freePort();
    await serve('127.0.0.1', port, 'with a proxy', proxied);
    await manager.refreshForwardedPorts();
    // The bridge listens in the sandbox's namespace (a supervisor pid shows it), unforwarded.
    expect(manager.supervisorPids().some((pid) => listeningPorts(pid)?.has(PROXY_PORT))).toBe(true);
    expect(manager.forwardedPorts().map((p) => p.port)).toEqual([port]);
    expect(manager.forwardedPorts().some((p) => p.port === PROXY_PORT)).toBe(false);
    expect(await get(port)).toBe('with a proxy');
  });

  it('works for the read-only sandbox too (its own network namespace as well)', async () => {
    const port = await freePort();
    await serve('127.0.0.1', port, 'read-only server', { kind: 'read-only', required: true });
    await manager.refreshForwardedPorts();
    expect(await get(port)).toBe('read-only server');
    expect(manager.forwardedPorts()).toEqual([{ port, sandbox: 'read-only', target: '127.0.0.1' }]);
  });

  it('forwardPorts: false forwards nothing', async () => {
    const off = create({ forwardPorts: false });
    try {
      const port = await freePort();
      await serve('127.0.0.1', port, 'not forwarded', sandbox(), off);
      await off.refreshForwardedPorts();
      expect(off.forwardedPorts()).toEqual([]);
      expect(await get(port)).toBe('refused');
    } finally {
      await off.dispose();
    }
  });

  it('without a sandbox nothing is forwarded (the server is on the host network already)', async () => {
    const port = await freePort();
    await serve('127.0.0.1', port, 'on the host', { kind: 'protected', readOnlyPaths: [] });
    await manager.refreshForwardedPorts();
    expect(manager.forwardedPorts()).toEqual([]);
    expect(await get(port)).toBe('on the host');
  });
});
