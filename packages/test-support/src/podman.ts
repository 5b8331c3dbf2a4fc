// A podman API service for the tests that reach a container engine through conch's policy socket
// (@conch/permission engine-door, @conch/sandbox's library Sandbox): its own storage and network
// config under /var/tmp, so nothing of the machine's containers is seen, and nothing is pulled.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';

export interface PodmanService {
  /** The API's unix socket (`DOCKER_HOST=unix://<socket>`). */
  socket: string;
  /** Stops the service and removes its storage. */
  stop: () => Promise<void>;
}

/** Starts one; resolves once it answers `/_ping` (each attempt waits on the socket, not on a clock). */
export async function startPodmanService(): Promise<PodmanService> {
  const dir = mkdtempSync('/var/tmp/conch-podman-service-');
  mkdirSync(join(dir, 'net'));
  const conf = join(dir, 'containers.conf');
  writeFileSync(conf, `[network]\nnetwork_config_dir = "${join(dir, 'net')}"\n`);
  const socket = join(dir, 'podman.sock');
  const child: ChildProcess = spawn(
    'podman',
    [
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
      'system',
      'service',
      '--time=0',
      `unix://${socket}`,
    ],
    { env: { ...process.env, CONTAINERS_CONF: conf }, stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  // Ready when it answers a ping (each attempt waits on the socket, not on a clock).
  for (let attempt = 0; attempt < 600 && child.exitCode === null; attempt++) {
    const ok = await new Promise<boolean>((resolve) => {
      const req = request({ socketPath: socket, path: '/_ping', agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      });
      req.on('error', () => setTimeout(() => resolve(false), 100));
      req.end();
    });
    if (ok) return { socket, stop };
  }
  await stop();
  throw new Error('podman system service did not answer');
}
