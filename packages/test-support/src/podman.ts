// A real Docker-API engine for the tests that reach one through conch's policy socket (@conch/sandbox's
// EngineProxy and library Sandbox, @conch/permission's engine door): `podman system service` on a
// temp socket with its own storage (vfs: plain directories, nothing mounted to leave behind),
// network config and containers.conf, so the tests neither see nor touch the machine's containers
// and images.
// Settings that make podman 4.3 run here (a VM with cgroup v1 + v2 "hybrid" mounts): runc with the
// cgroupfs manager, `default_ulimits = []` (see exec-server's test-support/podman.ts).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';

/**
 * Whether the engine tests can run here; under CI a missing piece fails instead of skipping. They
 * run podman as root: as another user they skip, under CI too (CI runs as root and runs them).
 */
export function podmanUsable(): { ok: true } | { ok: false; reason: string } {
  if (process.getuid?.() !== 0)
    return { ok: false, reason: 'the engine tests run podman as root; this is not root' };
  let reason: string | undefined;
  if (spawnSync('podman', ['--version'], { stdio: 'ignore' }).status !== 0)
    reason = 'podman is not installed (apt-get install -y podman runc)';
  else if (spawnSync('runc', ['--version'], { stdio: 'ignore' }).status !== 0)
    reason = 'runc is not installed (apt-get install -y runc)';
  else if (!staticBusybox())
    reason = 'no static busybox to build the test image from (apt-get install -y busybox-static)';
  if (reason && process.env.CI === 'true') throw new Error(`engine tests: ${reason}`);
  return reason ? { ok: false, reason } : { ok: true };
}

/** /usr/bin/busybox when it is a static binary (an image FROM scratch needs no libc then). */
export function staticBusybox(): string | undefined {
  const path = '/usr/bin/busybox';
  if (!existsSync(path)) return undefined;
  // A static ELF has no PT_INTERP program header.
  const fd = openSync(path, 'r');
  try {
    const header = Buffer.alloc(64);
    readSync(fd, header, 0, 64, 0);
    if (header.readUInt32BE(0) !== 0x7f454c46 || header[4] !== 2) return undefined;
    const phoff = Number(header.readBigUInt64LE(32));
    const phentsize = header.readUInt16LE(54);
    const phnum = header.readUInt16LE(56);
    const table = Buffer.alloc(phentsize * phnum);
    readSync(fd, table, 0, table.length, phoff);
    for (let i = 0; i < phnum; i++) if (table.readUInt32LE(i * phentsize) === 3) return undefined;
    return path;
  } finally {
    closeSync(fd);
  }
}

export interface PodmanService {
  socket: string;
  /** Runs the podman CLI on the same storage (for setup and cleanup behind the proxy's back). */
  podman(args: string[]): { status: number | null; stdout: string; stderr: string };
  stop(): Promise<void>;
}

function ping(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath: socket, path: '/_ping', agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.end();
  });
}

export async function startPodmanService(): Promise<PodmanService> {
  const dir = mkdtempSync('/var/tmp/conch-engine-podman-');
  mkdirSync(join(dir, 'net'));
  const conf = join(dir, 'containers.conf');
  writeFileSync(
    conf,
    `[containers]\ndefault_ulimits = []\n[network]\nnetwork_config_dir = "${join(dir, 'net')}"\n`,
  );
  const socket = join(dir, 'podman.sock');
  const globalArgs = [
    '--root',
    join(dir, 'root'),
    '--runroot',
    join(dir, 'runroot'),
    '--storage-driver',
    'vfs',
    '--cgroup-manager',
    'cgroupfs',
    '--runtime',
    'runc',
  ];
  const env = { ...process.env, CONTAINERS_CONF: conf };
  const child: ChildProcess = spawn(
    'podman',
    [...globalArgs, 'system', 'service', '--time=0', `unix://${socket}`],
    {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    if (stderr.length < 20_000) stderr += c.toString();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const podman = (args: string[]) => {
    const r = spawnSync('podman', [...globalArgs, ...args], { env, encoding: 'utf8', timeout: 120_000 });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const stop = async () => {
    // Everything the tests made, whoever made it, then the service.
    podman(['rm', '-af', '-t', '0']);
    podman(['pod', 'rm', '-af']);
    podman(['network', 'prune', '-f']);
    podman(['volume', 'prune', '-f']);
    podman(['rmi', '-af']);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; i < 300; i++) {
    if (await ping(socket)) return { socket, podman, stop };
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await stop();
  throw new Error(`podman system service did not answer on ${socket}: ${stderr.slice(-2000)}`);
}
