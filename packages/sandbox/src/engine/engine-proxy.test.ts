// Pins: through the proxy a real engine builds, runs, execs into, logs and tears down the session's containers (raw API, the docker CLI, docker-compose run inside bubblewrap), and every escape through the engine is refused with its rule while marker files prove nothing ran.
import { spawn, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:http';
import { connect, createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findBwrap } from '../find-bwrap.js';
import {
  podmanUsable,
  startPodmanService,
  staticBusybox,
  type PodmanService,
} from '@conch/test-support/podman';
import { SESSION_LABEL } from './engine-policy.js';
import { EngineProxy } from './engine-proxy.js';

const usable = podmanUsable();
if (!usable.ok) console.warn(`engine proxy end-to-end tests skipped: ${usable.reason}`);
const hasDocker = spawnSync('docker', ['--version'], { stdio: 'ignore' }).status === 0;
const hasCompose = spawnSync('docker-compose', ['version'], { stdio: 'ignore' }).status === 0;
if (usable.ok && !hasDocker)
  console.warn('engine proxy: no docker CLI here; its tests are skipped (the raw API tests run)');
if (usable.ok && !hasCompose) {
  const message = 'engine proxy: no docker-compose here (apt-get install -y docker-compose)';
  if (process.env.CI === 'true') throw new Error(message);
  console.warn(`${message}; the compose test is skipped`);
}
const bwrap = findBwrap();

interface Answer {
  status: number;
  text: string;
  json: any;
}

function call(
  socketPath: string,
  method: string,
  path: string,
  body?: unknown | Buffer,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const data =
      body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
    const req = request(
      {
        socketPath,
        method,
        path,
        agent: false,
        headers: {
          ...(data
            ? {
                'content-length': String(data.length),
                'content-type': Buffer.isBuffer(body) ? 'application/x-tar' : 'application/json',
              }
            : {}),
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, text, json });
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

/** Docker's multiplexed stream (8-byte frame headers) to stdout text. */
function demux(raw: Buffer): string {
  let out = '';
  let at = 0;
  while (at + 8 <= raw.length) {
    const size = raw.readUInt32BE(at + 4);
    if (raw[at] === 1) out += raw.subarray(at + 8, at + 8 + size).toString('utf8');
    at += 8 + size;
  }
  return out;
}

/** POST /exec/{id}/start with `Connection: Upgrade`: writes stdin, half-closes, reads to the end. */
function execUpgrade(
  socketPath: string,
  id: string,
  stdin: string,
): Promise<{ head: string; stdout: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ path: socketPath, allowHalfOpen: true });
    const body = JSON.stringify({ Detach: false, Tty: false });
    const chunks: Buffer[] = [];
    socket.on('connect', () => {
      socket.write(
        `POST /v1.41/exec/${id}/start HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
    });
    let sent = false;
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      const all = Buffer.concat(chunks);
      if (!sent && all.includes('\r\n\r\n')) {
        sent = true;
        socket.write(stdin);
        socket.end();
      }
    });
    socket.on('error', reject);
    socket.on('close', () => {
      const all = Buffer.concat(chunks);
      const split = all.indexOf('\r\n\r\n');
      resolve({ head: all.subarray(0, split).toString('latin1'), stdout: demux(all.subarray(split + 4)) });
    });
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

function httpGet(url: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    // busybox httpd passes the CGI's bare-LF header lines through: the lenient parser reads them.
    const req = request(url, { agent: false, insecureHTTPParser: true }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve(res.statusCode === 200 ? Buffer.concat(chunks).toString('utf8') : undefined),
      );
    });
    req.on('error', () => resolve(undefined));
    req.end();
  });
}

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  tries = 600,
): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`gave up waiting for ${what}`);
}

/**
 * Runs a client without blocking the event loop: the proxy under test serves from this process,
 * so a spawnSync'd client would wait on a proxy that cannot answer.
 */
function run(
  file: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; input?: string; cwd?: string; timeoutMs?: number } = {},
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { env: options.env, cwd: options.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 240_000);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}

const DOCKERFILE =
  'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nCMD ["sh"]\n';

describe.skipIf(!usable.ok)('EngineProxy with a real engine (podman system service)', () => {
  let service: PodmanService;
  let proxy: EngineProxy;
  let socket: string;
  let ws: string;
  let out: string;
  let outside: string;
  const session = `e2e${process.pid}${Date.now().toString(36)}`;
  const image = `conch-e2e-${session}`;

  /** What the engine itself holds, asked behind the proxy's back. */
  const engine = (method: string, path: string, body?: unknown) => call(service.socket, method, path, body);
  const containersNamed = async (name: string) =>
    (
      (
        await engine(
          'GET',
          `/v1.41/containers/json?all=1&filters=${encodeURIComponent(JSON.stringify({ name: [name] }))}`,
        )
      ).json as unknown[]
    ).length;

  beforeAll(async () => {
    service = await startPodmanService();
    const base = realpathSync(mkdtempSync(join(tmpdir(), 'conch-engine-e2e-')));
    ws = join(base, 'shop');
    outside = join(base, 'outside');
    out = join(ws, 'out');
    mkdirSync(join(ws, 'img'), { recursive: true });
    mkdirSync(out);
    mkdirSync(outside);
    copyFileSync(staticBusybox()!, join(ws, 'img', 'busybox'));
    writeFileSync(join(ws, 'img', 'Dockerfile'), DOCKERFILE);
    proxy = new EngineProxy();
    ({ socketPath: socket } = await proxy.start({
      workspace: ws,
      sessionId: session,
      engineSocket: service.socket,
    }));
    // The image every test runs, built through the proxy from the workspace.
    const tar = spawnSync('tar', ['-C', join(ws, 'img'), '-c', '.'], { maxBuffer: 64 << 20 }).stdout;
    const built = await call(socket, 'POST', `/v1.41/build?t=${image}:1`, tar);
    expect(built.status, built.text).toBe(200);
    expect(built.text).toContain('Successfully');
  }, 300_000);

  afterAll(async () => {
    await proxy?.stop();
    await service?.stop();
    if (ws) rmSync(join(ws, '..'), { recursive: true, force: true });
  }, 300_000);

  it('the built image carries the session label', async () => {
    const inspect = await engine('GET', `/v1.41/images/${image}:1/json`);
    expect(inspect.json.Config.Labels[SESSION_LABEL]).toBe(session);
  });

  it('runs, execs into (Upgrade, stdin both ways), logs, stops and removes a container through the raw API', async () => {
    const created = await call(socket, 'POST', '/v1.41/containers/create?name=api-c', {
      Image: `${image}:1`,
      Cmd: ['sh', '-c', 'echo started; touch /out/api-control; sleep 600'],
      HostConfig: { Binds: [`${out}:/out`] },
    });
    expect(created.status, created.text).toBe(201);
    const id = created.json.Id as string;
    expect((await call(socket, 'POST', `/v1.41/containers/${id}/start`)).status).toBe(204);
    await until('the control marker', () => existsSync(join(out, 'api-control')));
    const exec = await call(socket, 'POST', `/v1.41/containers/api-c/exec`, {
      Cmd: ['cat'],
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
    });
    expect(exec.status, exec.text).toBe(201);
    const { head, stdout } = await execUpgrade(socket, exec.json.Id, 'through the proxy\n');
    expect(head).toMatch(/^HTTP\/1.1 101/);
    expect(stdout).toBe('through the proxy\n');
    const logs = await call(socket, 'GET', `/v1.41/containers/api-c/logs?stdout=1`);
    expect(logs.text).toContain('started');
    expect((await call(socket, 'POST', `/v1.41/containers/api-c/stop?t=0`)).status).toBe(204);
    expect((await call(socket, 'DELETE', `/v1.41/containers/api-c`)).status).toBe(204);
    expect(await containersNamed('api-c')).toBe(0);
  }, 180_000);

  /** A create that would write /out/<marker> if it ever ran. */
  const escapes: { name: string; rule: string; hostConfig: Record<string, unknown>; setup?: () => void }[] = [
    { name: 'mount-root', rule: 'bind-outside-workspace', hostConfig: { Binds: ['/:/h'] } },
    { name: 'mount-home', rule: 'bind-outside-workspace', hostConfig: { Binds: [`${homedir()}:/h`] } },
    {
      name: 'mount-root-mounts',
      rule: 'bind-outside-workspace',
      hostConfig: { Mounts: [{ Type: 'bind', Source: '/', Target: '/h' }] },
    },
    { name: 'privileged', rule: 'privileged', hostConfig: { Privileged: true } },
    { name: 'privileged-lowercase', rule: 'privileged', hostConfig: { privileged: true } },
    { name: 'pid-host', rule: 'host-namespace', hostConfig: { PidMode: 'host' } },
    { name: 'net-host', rule: 'host-namespace', hostConfig: { NetworkMode: 'host' } },
    { name: 'ipc-host', rule: 'host-namespace', hostConfig: { IpcMode: 'host' } },
    { name: 'engine-socket', rule: 'engine-socket', hostConfig: { Binds: [] } },
    { name: 'proxy-socket', rule: 'engine-socket', hostConfig: { Binds: [] } },
    { name: 'symlink-out', rule: 'bind-outside-workspace', hostConfig: { Binds: [] } },
    { name: 'cap-sys-admin', rule: 'capabilities', hostConfig: { CapAdd: ['SYS_ADMIN'] } },
    {
      name: 'device',
      rule: 'devices',
      hostConfig: {
        Devices: [{ PathOnHost: '/dev/null', PathInContainer: '/dev/x', CgroupPermissions: 'rwm' }],
      },
    },
    { name: 'seccomp', rule: 'security-opt', hostConfig: { SecurityOpt: ['seccomp=unconfined'] } },
  ];

  it.each(escapes.map((e) => [e.name, e] as const))(
    'refuses the escape %s with its rule; nothing runs',
    async (name, escape) => {
      const hostConfig = { ...escape.hostConfig } as Record<string, unknown>;
      const binds = [`${out}:/out`];
      if (name === 'engine-socket') binds.push(`${service.socket}:/var/run/docker.sock`);
      if (name === 'proxy-socket') binds.push(`${socket}:/var/run/docker.sock`);
      if (name === 'symlink-out') {
        symlinkSync(outside, join(ws, 'innocent'));
        binds.push(`${ws}/innocent:/h`);
      }
      hostConfig.Binds = [...binds, ...((escape.hostConfig.Binds as string[] | undefined) ?? [])];
      const created = await call(socket, 'POST', `/v1.41/containers/create?name=esc-${name}`, {
        Image: `${image}:1`,
        Cmd: ['sh', '-c', `touch /out/${name}; touch /h/${name} 2>/dev/null; true`],
        HostConfig: hostConfig,
      });
      expect(created.status).toBe(403);
      expect(created.json.message).toMatch(new RegExp(`^conch: ${escape.rule}: `));
      expect(await containersNamed(`esc-${name}`)).toBe(0);
      expect(existsSync(join(out, name))).toBe(false);
      expect(existsSync(join(outside, name))).toBe(false);
      expect(proxy.refusals().some((r) => r.rule === escape.rule && r.route === 'container.create')).toBe(
        true,
      );
      // The control: the same container without the escape runs and leaves its marker.
      const control = await call(socket, 'POST', `/v1.41/containers/create?name=ctl-${name}`, {
        Image: `${image}:1`,
        Cmd: ['sh', '-c', `touch /out/ctl-${name}`],
        HostConfig: { Binds: [`${out}:/out`] },
      });
      expect(control.status, control.text).toBe(201);
      expect((await call(socket, 'POST', `/v1.41/containers/ctl-${name}/start`)).status).toBe(204);
      await until('the control marker', () => existsSync(join(out, `ctl-${name}`)));
      await call(socket, 'POST', `/v1.41/containers/ctl-${name}/wait`);
      expect((await call(socket, 'DELETE', `/v1.41/containers/ctl-${name}?force=1`)).status).toBe(204);
    },
    120_000,
  );

  it("refuses exec into, logs of and removal of a container that is not the session's", async () => {
    const foreign = await engine('POST', '/v1.41/containers/create?name=foreign-c', {
      Image: `${image}:1`,
      Cmd: ['sleep', '600'],
      HostConfig: { Binds: [`${out}:/out`] },
    });
    expect(foreign.status).toBe(201);
    expect((await engine('POST', '/v1.41/containers/foreign-c/start')).status).toBe(204);
    const exec = await call(socket, 'POST', '/v1.41/containers/foreign-c/exec', {
      Cmd: ['touch', '/out/foreign-exec'],
    });
    expect(exec.status).toBe(403);
    expect(exec.json.message).toMatch(/^conch: not-session-object: /);
    for (const [method, path] of [
      ['GET', '/v1.41/containers/foreign-c/logs?stdout=1'],
      ['POST', '/v1.41/containers/foreign-c/stop'],
      ['DELETE', '/v1.41/containers/foreign-c?force=1'],
      ['GET', '/v1.41/containers/foreign-c/archive?path=/'],
    ] as const) {
      const answer = await call(socket, method, path);
      expect(answer.status, `${method} ${path}`).toBe(403);
    }
    // An exec made behind the proxy's back cannot be started through it either.
    const behind = await engine('POST', '/v1.41/containers/foreign-c/exec', {
      Cmd: ['touch', '/out/foreign-exec'],
    });
    const started = await call(socket, 'POST', `/v1.41/exec/${behind.json.Id}/start`, { Detach: true });
    expect(started.status).toBe(403);
    expect(existsSync(join(out, 'foreign-exec'))).toBe(false);
    // Reads stay open; the container is still there.
    expect((await call(socket, 'GET', '/v1.41/containers/foreign-c/json')).status).toBe(200);
    // An endpoint off the allow-list (prune would remove it) is refused.
    const prune = await call(socket, 'POST', '/v1.41/containers/prune');
    expect(prune.json.message).toMatch(/^conch: unknown-endpoint: /);
    expect(await containersNamed('foreign-c')).toBe(1);
  }, 120_000);

  it("refuses exec into a privileged container of the workspace's compose project", async () => {
    const made = await engine('POST', '/v1.41/containers/create?name=proj-priv', {
      Image: `${image}:1`,
      Cmd: ['sleep', '600'],
      Labels: { 'com.docker.compose.project': 'shop' },
      HostConfig: { Privileged: true, Binds: [`${out}:/out`] },
    });
    expect(made.status).toBe(201);
    expect((await engine('POST', '/v1.41/containers/proj-priv/start')).status).toBe(204);
    const exec = await call(socket, 'POST', '/v1.41/containers/proj-priv/exec', {
      Cmd: ['touch', '/out/proj-priv'],
    });
    expect(exec.json.message).toMatch(/^conch: privileged: /);
    // It is the project's, so it may be stopped and removed.
    expect((await call(socket, 'DELETE', '/v1.41/containers/proj-priv?force=1')).status).toBe(204);
    expect(existsSync(join(out, 'proj-priv'))).toBe(false);
  }, 120_000);

  it('refuses to start a container whose bind source became a symlink out of the workspace', async () => {
    mkdirSync(join(ws, 'data'));
    const created = await call(socket, 'POST', '/v1.41/containers/create?name=swap-c', {
      Image: `${image}:1`,
      Cmd: ['touch', '/d/swapped'],
      HostConfig: { Binds: [`${ws}/data:/d`] },
    });
    expect(created.status).toBe(201);
    rmSync(join(ws, 'data'), { recursive: true });
    symlinkSync(outside, join(ws, 'data'));
    const start = await call(socket, 'POST', '/v1.41/containers/swap-c/start');
    expect(start.json.message).toMatch(/^conch: bind-outside-workspace: /);
    expect(existsSync(join(outside, 'swapped'))).toBe(false);
    expect((await call(socket, 'DELETE', '/v1.41/containers/swap-c?force=1')).status).toBe(204);
  }, 120_000);

  it('refuses a build whose Dockerfile mounts a host path, and a host-binding volume', async () => {
    const ctx = join(ws, 'badbuild');
    mkdirSync(ctx);
    writeFileSync(
      join(ctx, 'Dockerfile'),
      `FROM ${image}:1\nRUN --mount=type=bind,source=${outside},target=/h,rw touch /h/built\n`,
    );
    const tar = spawnSync('tar', ['-C', ctx, '-c', '.']).stdout;
    const build = await call(socket, 'POST', '/v1.41/build?t=badbuild', tar);
    expect(build.json.message).toMatch(/^conch: build-mount: /);
    const gz = spawnSync('tar', ['-C', ctx, '-cz', '.']).stdout;
    expect((await call(socket, 'POST', '/v1.41/build', gz)).json.message).toMatch(/^conch: build-mount: /);
    expect(existsSync(join(outside, 'built'))).toBe(false);
    const volume = await call(socket, 'POST', '/v1.41/volumes/create', {
      Name: 'hostvol',
      DriverOpts: { type: 'none', o: 'bind', device: '/' },
    });
    expect(volume.json.message).toMatch(/^conch: volume-options: /);
    expect((await engine('GET', '/v1.41/volumes/hostvol')).status).toBe(404);
  }, 120_000);

  it.skipIf(!hasDocker)(
    'the docker CLI builds, runs, execs with stdin, follows logs, removes; its escapes are refused',
    async () => {
      const env = { ...process.env, DOCKER_HOST: `unix://${socket}` };
      const docker = (args: string[], input?: string) =>
        run('docker', args, { env, ...(input === undefined ? {} : { input }) });
      const build = await docker(['build', '-t', `${image}:cli`, join(ws, 'img')]);
      expect(build.status, build.stderr).toBe(0);
      const ran = await docker([
        'run',
        '--rm',
        '-v',
        `${out}:/out`,
        `${image}:cli`,
        'sh',
        '-c',
        'echo cli > /out/cli-ran; echo done',
      ]);
      expect(ran.stdout.trim(), ran.stderr).toBe('done');
      expect(existsSync(join(out, 'cli-ran'))).toBe(true);
      expect(
        (
          await docker([
            'run',
            '-d',
            '--name',
            'cli-c',
            `${image}:cli`,
            'sh',
            '-c',
            'echo hello-logs; sleep 600',
          ])
        ).status,
      ).toBe(0);
      const exec = await docker(['exec', '-i', 'cli-c', 'cat'], 'piped through\n');
      expect(exec.stdout, exec.stderr).toBe('piped through\n');
      const logs = await docker(['logs', 'cli-c']);
      expect(logs.stdout).toContain('hello-logs');
      expect((await docker(['rm', '-f', 'cli-c'])).status).toBe(0);
      symlinkSync('/', join(ws, 'rootlink'));
      const cases: [string[], string][] = [
        [['-v', '/:/h'], 'bind-outside-workspace'],
        [['-v', `${homedir()}:/h`], 'bind-outside-workspace'],
        [['--privileged'], 'privileged'],
        [['--pid', 'host'], 'host-namespace'],
        [['-v', `${service.socket}:/var/run/docker.sock`], 'engine-socket'],
        [['-v', `${ws}/rootlink:/h`], 'bind-outside-workspace'],
        [['--cap-add', 'SYS_ADMIN'], 'capabilities'],
        [['--device', '/dev/null:/dev/x'], 'devices'],
      ];
      for (const [args, rule] of cases) {
        const marker = `cli-${args.join('_').replace(/[^a-z0-9]/gi, '')}`;
        const r = await docker([
          'run',
          '--rm',
          '-v',
          `${out}:/out`,
          ...args,
          `${image}:cli`,
          'touch',
          `/out/${marker}`,
        ]);
        expect(r.status, args.join(' ')).not.toBe(0);
        expect(r.stderr).toContain(`conch: ${rule}: `);
        expect(existsSync(join(out, marker))).toBe(false);
      }
    },
    300_000,
  );

  it.skipIf(!hasCompose)(
    `docker-compose (inside ${bwrap ? 'bubblewrap' : 'the host'}) builds, starts, queries, execs and tears down a db + app project without a prompt`,
    async () => {
      const port = await freePort();
      mkdirSync(join(ws, 'app'));
      writeFileSync(join(ws, 'app', 'Dockerfile'), DOCKERFILE);
      copyFileSync(staticBusybox()!, join(ws, 'app', 'busybox'));
      writeFileSync(
        join(ws, 'docker-compose.yml'),
        [
          'version: "3.8"',
          'services:',
          '  db:',
          '    build: ./app',
          '    command: ["sh", "-c", "[ -f /data/answer ] || echo 42 > /data/answer; exec httpd -f -v -p 5432 -h /data"]',
          '    volumes:',
          '      - dbdata:/data',
          '  app:',
          '    build: ./app',
          `    command: ["sh", "-c", "mkdir -p /www/cgi-bin && printf '#!/bin/sh\\\\necho Content-Type: text/plain\\\\necho\\\\nwget -qO- http://db:5432/answer\\\\n' > /www/cgi-bin/answer && chmod +x /www/cgi-bin/answer && exec httpd -f -p 80 -h /www"]`,
          '    ports:',
          `      - "${port}:80"`,
          '    depends_on: [db]',
          'volumes:',
          '  dbdata: {}',
          '',
        ].join('\n'),
      );
      const compose = (args: string[]) => {
        const inner = ['docker-compose', ...args];
        const argv = bwrap
          ? ([
              bwrap,
              [
                '--ro-bind',
                '/',
                '/',
                '--dev',
                '/dev',
                '--proc',
                '/proc',
                '--tmpfs',
                '/tmp',
                '--tmpfs',
                '/run',
                '--bind',
                ws,
                ws,
                '--bind',
                socket,
                '/run/docker.sock',
                '--unshare-pid',
                '--unshare-net',
                '--die-with-parent',
                '--chdir',
                ws,
                '--setenv',
                'DOCKER_HOST',
                'unix:///var/run/docker.sock',
                '--',
                ...inner,
              ],
            ] as const)
          : (['docker-compose', args] as const);
        return run(argv[0], argv[1] as string[], {
          cwd: ws,
          env: { ...process.env, DOCKER_HOST: `unix://${socket}` },
        });
      };
      const up = await compose(['up', '-d', '--build']);
      expect(up.status, up.stderr).toBe(0);
      const answer = await until('the app to answer', () =>
        httpGet(`http://127.0.0.1:${port}/cgi-bin/answer`),
      );
      expect(answer.trim()).toBe('42');
      const exec = await compose(['exec', '-T', 'db', 'cat', '/data/answer']);
      expect(exec.stdout.trim(), exec.stderr).toBe('42');
      const logs = await compose(['logs', 'db']);
      expect(logs.status, logs.stderr).toBe(0);
      const labelled = await engine(
        'GET',
        `/v1.41/containers/json?filters=${encodeURIComponent(JSON.stringify({ label: [`${SESSION_LABEL}=${session}`, 'com.docker.compose.project=shop'] }))}`,
      );
      expect((labelled.json as unknown[]).length).toBe(2);
      const down = await compose(['down', '-v', '--rmi', 'local']);
      expect(down.status, down.stderr).toBe(0);
      const project = encodeURIComponent(JSON.stringify({ label: ['com.docker.compose.project=shop'] }));
      expect((await engine('GET', `/v1.41/containers/json?all=1&filters=${project}`)).json).toEqual([]);
      expect(
        ((await engine('GET', `/v1.41/volumes?filters=${project}`)).json as { Volumes: unknown[] | null })
          .Volumes ?? [],
      ).toEqual([]);
      expect((await engine('GET', `/v1.41/networks?filters=${project}`)).json).toEqual([]);
      expect(
        proxy.refusals().filter((r) => r.route?.startsWith('container.') && r.path.includes('shop')),
      ).toEqual([]);
    },
    480_000,
  );
});

describe('EngineProxy without an engine', () => {
  it('listens, answers 503 naming no-engine, and says so once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'conch-engine-none-'));
    const proxy = new EngineProxy();
    const seen: string[] = [];
    const off = proxy.onRefusal((r) => seen.push(r.rule));
    try {
      const { socketPath, engine } = await proxy.start({
        workspace: dir,
        sessionId: 's1',
        engineSocket: join(dir, 'absent.sock'),
        env: {},
      });
      expect(engine.available).toBe(false);
      expect(engine.reason).toContain('absent.sock');
      for (let i = 0; i < 2; i++) {
        const answer = await call(socketPath, 'GET', '/v1.41/containers/json');
        expect(answer.status).toBe(503);
        expect(answer.json.message).toMatch(/^conch: no-engine: /);
      }
      expect(proxy.refusals().filter((r) => r.rule === 'no-engine')).toHaveLength(1);
      expect(seen).toEqual(['no-engine']);
      // Off the allow-list is still said as such.
      expect((await call(socketPath, 'POST', '/v1.41/swarm/init', {})).json.message).toMatch(
        /^conch: unknown-endpoint: /,
      );
    } finally {
      off();
      await proxy.stop();
      expect(readdirSync(dir)).toEqual([]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
