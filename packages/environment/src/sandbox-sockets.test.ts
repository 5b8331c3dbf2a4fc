// Invariant: a sandboxed command reaches no service of the host through a socket file. The kernel
// checks no mount flag when a process connects to a socket by its path, so a read-only view of the
// host's tree would otherwise reach every daemon listening there (a database's socket under
// /var/lib, lxd's, the nix daemon's): whatever the spelling (curl, python, node, a relative path, a
// symlink the sandbox made), from a command or a terminal session, a connection to a socket the
// sandbox could not have made is refused, said in the result, and the host's listener sees nothing.
// Sockets the sandbox makes (in the workspace, its /tmp) and conch's own (the network proxy) work.
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, type ToolResult } from '@conch/core';
import { findBwrap } from '@conch/process';
import { guardAvailability } from '@conch/sandbox';
import { terminalPlugin } from '@conch/terminal';
import { accessSync, constants, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { permissionPlugin } from '@conch/permission';

type Result = ToolResult & Record<string, any>;

const ready = findBwrap() !== undefined && guardAvailability().available;
if (!ready && process.env.CI) throw new Error('CI needs bubblewrap and the sandbox guard for these tests');

let ws: string;
let home: string;
let registry: PluginRegistry | undefined;
const servers: Server[] = [];
const cleanup: string[] = [];
const realHome = process.env.HOME;

beforeEach(() => {
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-sockets-')));
  home = realpathSync(mkdtempSync(join(tmpdir(), 'conch-sockets-home-')));
  process.env.HOME = home;
});
afterEach(async () => {
  await registry?.dispose();
  registry = undefined;
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  for (const d of [ws, home, ...cleanup.splice(0)]) rmSync(d, { recursive: true, force: true });
  process.env.HOME = realHome;
});

/** A host service on a socket: records every connection, answers like an HTTP server with a secret. */
async function hostService(path: string): Promise<string[]> {
  const seen: string[] = [];
  const server = createServer((c) => {
    seen.push(path);
    // Read what comes (the peer's close ends the connection), answer, and close.
    c.resume();
    c.end('HTTP/1.0 200 OK\r\nContent-Length: 11\r\n\r\nHOST-SECRET');
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  servers.push(server);
  return seen;
}

async function makeRegistry(): Promise<PluginRegistry> {
  registry = new PluginRegistry({ cwd: ws, plugins: [permissionPlugin, cliPlugin, terminalPlugin] });
  await registry.expose('permission', {});
  await registry.expose('cli', {});
  await registry.expose('terminal', { shell: '/bin/bash' });
  return registry;
}

const cli = async (command: string) =>
  (await registry!.execute('cli_based_tool', { command, timeout: 120 })) as Result;

/** A directory the host can make and the sandbox sees read-only: a system one as root, else a protected one in the workspace. */
function systemDir(): string | undefined {
  try {
    accessSync('/var/lib', constants.W_OK);
  } catch {
    return undefined;
  }
  const dir = mkdtempSync('/var/lib/conch-sockets-');
  cleanup.push(dir);
  return dir;
}

describe.runIf(ready)('sockets of the host', () => {
  it('a host service on a socket is out of reach in every spelling, and the result says which socket', async () => {
    // Where the host can make a directory the sandbox sees read-only: a system one as root (the
    // gate lets commands name it), and a protected one in the workspace for any user (the gate
    // refuses commands that name it, so those spellings read the path from a file).
    const hooks = join(ws, '.git', 'hooks');
    mkdirSync(hooks, { recursive: true });
    const system = systemDir();
    const places: [string, boolean][] = [
      [hooks, false],
      ...(system ? [[system, true] as [string, boolean]] : []),
    ];
    // CI runs as root and must cover the system directory; another user covers the workspace's.
    if (process.env.CI && !system && process.getuid?.() === 0)
      throw new Error('CI runs these tests as root (a socket under /var/lib)');
    for (const [dir, named] of places) {
      const socket = join(dir, 'svc.sock');
      writeFileSync(join(ws, 'target.txt'), `${socket}\n`);
      const seen = await hostService(socket);
      await makeRegistry();
      const fromFile = [
        `python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.connect(open('target.txt').read().strip()); print(s.recv(100))"`,
        `node -e "require('net').connect(require('fs').readFileSync('target.txt', 'utf8').trim()).on('data', (d) => console.log(String(d))).on('error', (e) => { console.log(e.code); process.exit(3) })"`,
        // A link the sandbox makes in the workspace, to the host's socket.
        `python3 -c "import os, socket; os.path.lexists('link.sock') and os.unlink('link.sock'); os.symlink(open('target.txt').read().strip(), 'link.sock'); s = socket.socket(socket.AF_UNIX); s.connect('link.sock'); print(s.recv(100))"`,
        // A non-blocking connect.
        `python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.setblocking(False); s.connect(open('target.txt').read().strip()); print('connected')"`,
      ];
      const byName = [
        `curl -sS -m 20 --unix-socket ${socket} http://svc/`,
        // A relative path, from the socket's own directory.
        `cd ${dir} && python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.connect('svc.sock'); print(s.recv(100))"`,
        `perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => "${socket}") or die "$!\\n"; print "connected\\n"'`,
      ];
      for (const command of [...fromFile, ...(named ? byName : [])]) {
        const r = await cli(command);
        expect(`${r.stdout}${r.stderr}`, command).not.toContain('HOST-SECRET');
        expect(r.returncode, command).not.toBe(0);
        expect(r.error_code, `${command}: ${JSON.stringify(r)}`).toBe('NETWORK_BLOCKED');
        expect(r.blocked_hosts, command).toEqual([`unix:${socket}`]);
        expect(r.error, command).toContain(`the socket ${socket}`);
      }
      // From a terminal session too.
      const t = (await registry!.execute('terminal', {
        command: `python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.connect(open('target.txt').read().strip())"; echo "rc=$?"`,
      })) as Result;
      expect(t.output).not.toContain('HOST-SECRET');
      expect(t.output).toMatch(/rc=1/);
      expect(t.output).toContain('Permission denied');
      expect(seen, 'the host service saw no connection').toEqual([]);
      await registry!.dispose();
      registry = undefined;
    }
  });

  it("the sandbox's own sockets and conch's proxy still work; a host socket in the workspace is the workspace's", async () => {
    const seen = await hostService(join(ws, 'dev.sock'));
    await makeRegistry();
    const own = await cli(
      [
        'python3 -c "',
        'import socket, os',
        "for path in ('own.sock', '/tmp/own.sock'):",
        '    s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(1)',
        "    c = socket.socket(socket.AF_UNIX); c.connect(path); a, _ = s.accept(); a.send(b'ok'); print(path, c.recv(2).decode())",
        '    os.unlink(path)',
        '"',
      ].join('\n'),
    );
    expect(own, JSON.stringify(own)).toMatchObject({
      returncode: 0,
      stdout: 'own.sock ok\n/tmp/own.sock ok\n',
    });
    // Through the proxy (a TCP connect to the sandbox's bridge, then a unix connect to conch's socket).
    const proxied = await cli('curl -sS -m 60 -o /dev/null -w "%{http_code}" http://not-allowed.example/');
    expect(proxied.stdout).toBe('403');
    expect(proxied.error_code).toBe('NETWORK_BLOCKED');
    expect(proxied.blocked_hosts).toEqual(['not-allowed.example']);
    // A socket in the workspace is in the agent's room (a dev server's, a language server's).
    const dev = await cli(`curl -sS -m 20 --unix-socket ${join(ws, 'dev.sock')} http://dev/`);
    expect(dev, JSON.stringify(dev)).toMatchObject({ returncode: 0, stdout: 'HOST-SECRET' });
    expect(seen).toHaveLength(1);
  });
});
