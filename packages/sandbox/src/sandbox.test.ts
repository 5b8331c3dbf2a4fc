// The sandbox as a library and a CLI: a run writes only the workspace, hides its secrets, reaches
// only allowed hosts, and reports what the guard refused and what the command planted; it never
// runs a command unsandboxed.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { podmanUsable, startPodmanService } from '@conch/test-support/podman';
import { describe, expect, it } from 'vitest';
import { guardAvailability } from './guard.js';
import { Sandbox, SandboxUnavailableError } from './sandbox.js';
import { bwrap, tempWorkspace } from './test-support/guarded.js';

const ready = bwrap !== undefined && guardAvailability().available;
const maybe = ready ? describe : describe.skip;
if (!ready && process.env.CI) throw new Error('CI needs bubblewrap and the guard for the sandbox suite');

const CLI = join(fileURLToPath(new URL('.', import.meta.url)), '..', 'dist', 'cli.js');
const run = promisify(execFile);

maybe('Sandbox', () => {
  it('confines a run to the workspace, hides .env, refuses protected names and reports plants', async () => {
    const ws = tempWorkspace();
    const outside = tempWorkspace('conch-sandbox-outside-');
    writeFileSync(join(ws, '.env'), 'TOKEN=SECRET\n');
    const sandbox = new Sandbox({ workspace: ws });
    try {
      const r = await sandbox.run('bash', [
        '-c',
        `echo ok > made.txt; cat .env; echo x > .envrc; echo y > ${outside}/escape.txt; printf 'yarnPath: ./y.js\\n' > .yarnrc.yml; exit 3`,
      ]);
      expect(r.exitCode).toBe(3);
      expect(readFileSync(join(ws, 'made.txt'), 'utf8')).toBe('ok\n');
      expect(r.stdout).not.toContain('SECRET');
      expect(existsSync(join(ws, '.envrc'))).toBe(false);
      expect(existsSync(join(outside, 'escape.txt'))).toBe(false);
      expect(r.refusals.map((x) => x.path)).toContain(join(ws, '.envrc'));
      expect(r.plants).toEqual([expect.objectContaining({ kind: 'yarn', path: join(ws, '.yarnrc.yml') })]);
      expect(sandbox.plants()).toHaveLength(1);
      sandbox.clearPlants();
      expect(sandbox.plants()).toHaveLength(0);
    } finally {
      sandbox.dispose();
    }
  });

  it('makes writable roots that do not exist yet, so a first run loses nothing', async () => {
    const ws = tempWorkspace();
    const outside = tempWorkspace('conch-sandbox-roots-');
    // Three shapes: one level missing, several levels, and one under a symlink (not made: the link
    // could point anywhere).
    const trash = join(outside, 'trash');
    const deep = join(outside, 'cache', 'build', 'out');
    const target = tempWorkspace('conch-sandbox-link-target-');
    symlinkSync(target, join(outside, 'link'));
    const viaLink = join(outside, 'link', 'made');
    const sandbox = new Sandbox({ workspace: ws, writableRoots: [trash, deep, viaLink] });
    try {
      const r = await sandbox.run('bash', [
        '-c',
        `echo kept > ${trash}/a.txt && echo built > ${deep}/b.txt && echo ok; echo x > ${viaLink}/c.txt 2>/dev/null; true`,
      ]);
      expect(r.stdout).toContain('ok');
      expect(readFileSync(join(trash, 'a.txt'), 'utf8')).toBe('kept\n');
      expect(readFileSync(join(deep, 'b.txt'), 'utf8')).toBe('built\n');
      expect(existsSync(join(target, 'made'))).toBe(false);
      // A second run sees what the first left, from the host's side too.
      const again = await sandbox.run('cat', [join(trash, 'a.txt')]);
      expect(again.stdout).toBe('kept\n');
    } finally {
      sandbox.dispose();
    }
  });

  it('sees a protected path that appears between runs (the policy is live)', async () => {
    const ws = tempWorkspace();
    mkdirSync(join(ws, 'app'));
    const sandbox = new Sandbox({ workspace: ws });
    try {
      expect((await sandbox.run('bash', ['-c', 'echo a > app/notes.txt'])).exitCode).toBe(0);
      writeFileSync(join(ws, 'app', '.env.production'), 'KEY=SECRET\n');
      const r = await sandbox.run('bash', ['-c', 'cat app/.env.production; echo b >> app/.env.production']);
      expect(r.stdout).not.toContain('SECRET');
      expect(r.exitCode).not.toBe(0);
      expect(readFileSync(join(ws, 'app', '.env.production'), 'utf8')).toBe('KEY=SECRET\n');
    } finally {
      sandbox.dispose();
    }
  });

  it('reaches only the hosts its allow-list names, and reports the others', async () => {
    const ws = tempWorkspace();
    const sandbox = new Sandbox({ workspace: ws, network: { allow: ['allowed.invalid'] } });
    try {
      const r = await sandbox.run('bash', [
        '-c',
        'curl -s -o /dev/null -w "%{http_code}" -x "$HTTPS_PROXY" http://not-allowed.invalid/; echo; curl -s --noproxy "*" -m 5 http://1.1.1.1/ >/dev/null; echo direct=$?',
      ]);
      expect(r.stdout).toContain('403');
      expect(r.stdout).not.toContain('direct=0');
      expect(r.blocked.map((b) => b.host)).toContain('not-allowed.invalid');
    } finally {
      sandbox.dispose();
    }
  });

  it("reaches the host's loopback services its allow-list names, at their own address, and no other loopback port", async () => {
    const ws = tempWorkspace();
    const serve = (body: string) =>
      new Promise<Server>((resolve) => {
        const server = createServer((_request, response) => response.end(body));
        server.listen(0, '127.0.0.1', () => resolve(server));
      });
    const portOf = (server: Server) => (server.address() as AddressInfo).port;
    const [web, db, api, closed] = await Promise.all(
      ['web', 'db', 'api', 'not named'].map((body) => serve(body)),
    );
    // Three spellings of the host's loopback; `closed` is a service the list does not name.
    const sandbox = new Sandbox({
      workspace: ws,
      network: { allow: [`localhost:${portOf(web!)}`, `127.0.0.1:${portOf(db!)}`, `[::1]:${portOf(api!)}`] },
    });
    try {
      const r = await sandbox.run('bash', [
        '-c',
        [
          `curl -s -m 20 http://localhost:${portOf(web!)}/; echo`,
          `python3 -c 'import http.client as h; c = h.HTTPConnection("127.0.0.1", ${portOf(db!)}, timeout=20); c.request("GET", "/"); print(c.getresponse().read().decode())'`,
          `curl -s -m 20 -g 'http://[::1]:${portOf(api!)}/' || curl -s -m 20 http://127.0.0.1:${portOf(api!)}/; echo`,
          `curl -s -m 20 http://127.0.0.1:${portOf(closed!)}/; echo closed=$?`,
          `(exec 3<>/dev/tcp/127.0.0.1/${portOf(closed!)}) 2>/dev/null; echo tcp=$?`,
        ].join('; '),
      ]);
      expect(r.stdout!.split('\n').slice(0, 5), r.stderr).toEqual(['web', 'db', 'api', 'closed=7', 'tcp=1']);
      // A port not named: nothing listens for it inside, so nothing reached the proxy for it either.
      expect(r.blocked).toEqual([]);
    } finally {
      sandbox.dispose();
      for (const server of [web, db, api, closed]) server!.close();
    }
  });

  it.runIf(podmanUsable().ok)(
    "reaches the host's container engine only through the policy socket with engine, and not at all without it",
    async () => {
      const ws = tempWorkspace();
      const service = await startPodmanService();
      const api = (method: string, path: string, body?: unknown) =>
        `curl -s -m 120 -X ${method} --unix-socket /run/docker.sock -H 'Content-Type: application/json' ${
          body === undefined ? '' : `-d '${JSON.stringify(body)}'`
        } http://d${path}; echo`;
      const env = { ...process.env, DOCKER_HOST: `unix://${service.socket}` };
      const saved = process.env.DOCKER_HOST;
      process.env.DOCKER_HOST = env.DOCKER_HOST;
      const withEngine = new Sandbox({ workspace: ws, engine: true });
      const without = new Sandbox({ workspace: ws });
      try {
        const r = await withEngine.run(
          'bash',
          [
            '-c',
            [
              api('GET', '/_ping'),
              'printenv DOCKER_HOST',
              api('POST', '/v1.41/containers/create', { Image: 'x', HostConfig: { Privileged: true } }),
              api('POST', '/v1.41/containers/create', { Image: 'x', HostConfig: { Binds: ['/:/host'] } }),
              `curl -s -m 60 --unix-socket ${service.socket} http://d/_ping >/dev/null; echo direct=$?`,
            ].join('; '),
          ],
          { env },
        );
        const lines = r.stdout!.split('\n').filter(Boolean);
        expect(lines[0], r.stderr).toBe('OK');
        expect(lines[1]).toBe('unix:///run/conch-engine/docker.sock');
        expect(lines[2]).toContain('conch:');
        expect(lines[3]).toContain('conch:');
        // The engine's own socket (outside every writable root) is not reachable from inside.
        expect(lines[4]).toMatch(/^direct=[1-9]/);
        expect(r.engineRefusals.map((refusal) => refusal.route)).toEqual([
          'container.create',
          'container.create',
        ]);
        const none = await without.run(
          'bash',
          [
            '-c',
            'test -e /run/docker.sock && echo has-socket; test -e /run/conch-engine && echo has-dir; echo done',
          ],
          { env },
        );
        expect(none.stdout).toBe('done\n');
        expect(none.engineRefusals).toEqual([]);
        // A bad policy fails at construction, naming its field.
        expect(() => new Sandbox({ workspace: ws, engine: { publish: 'everywhere' } as never })).toThrow(
          /publish/,
        );
      } finally {
        withEngine.dispose();
        without.dispose();
        if (saved === undefined) delete process.env.DOCKER_HOST;
        else process.env.DOCKER_HOST = saved;
        await service.stop();
      }
    },
    600_000,
  );

  it('never runs unsandboxed: without bubblewrap on PATH a run throws and nothing runs', async () => {
    const ws = tempWorkspace();
    const sandbox = new Sandbox({ workspace: ws });
    const path = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      await expect(sandbox.run('/bin/sh', ['-c', `touch ${ws}/ran`])).rejects.toBeInstanceOf(
        SandboxUnavailableError,
      );
      expect(existsSync(join(ws, 'ran'))).toBe(false);
    } finally {
      process.env.PATH = path;
      sandbox.dispose();
    }
  });
});

maybe('conch-sandbox', () => {
  it("runs a command as conch-mcp would and exits with the command's status, saying what it refused", async () => {
    const ws = tempWorkspace();
    const failed = await run(process.execPath, [
      CLI,
      '-w',
      ws,
      '--no-network',
      '-c',
      'echo hi > a.txt; echo x > .mcp.json; exit 7',
    ]).catch((error: { code: number; stderr: string }) => error);
    expect((failed as { code: number }).code).toBe(7);
    expect((failed as { stderr: string }).stderr).toContain(`refused create of ${join(ws, '.mcp.json')}`);
    expect(readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('hi\n');
    const ok = await run(process.execPath, [CLI, '-w', ws, '--no-network', '--', 'cat', 'a.txt']);
    expect(ok.stdout).toBe('hi\n');
    const status = await run(process.execPath, [CLI, '--status']);
    expect(JSON.parse(status.stdout)).toMatchObject({
      bubblewrap: { available: true },
      guard: { available: true },
    });
  });
});
