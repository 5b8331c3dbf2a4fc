// Test helper: a real container under podman, with no registry: its root filesystem is this
// machine's own `/` (a read-only bind mount, overlaid so the container's writes stay its own), so
// node, bash and python3 are there. Settings that make podman 4.3 run here (a VM with cgroup v1 +
// v2 "hybrid" mounts, no CAP_SYS_RESOURCE):
//   - containers.conf `default_ulimits = []`: crun/runc may not raise RLIMIT_NOFILE/NPROC to
//     podman's defaults (setrlimit EPERM);
//   - runc with the cgroupfs manager (crun 1.8 refuses "cgroups in hybrid mode"), and a tmpfs on
//     /sys/fs/cgroup (runc cannot mount the v1 hierarchy podman would create for it);
//   - --rootfs on a bind mount of / (pivot_root refuses the real root) with the :O overlay.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const PODMAN_ARGS = ['--cgroup-manager', 'cgroupfs', '--runtime', 'runc'];

export interface TestContainer {
  name: string;
  engineArgs: string[];
  stop(): Promise<void>;
}

/**
 * Whether podman is installed and this is root (the container tests run podman as root); under CI
 * as root its absence fails the suite instead of skipping it. As another user they skip.
 */
export function podmanAvailable(): boolean {
  if (process.getuid?.() !== 0) return false;
  const ok = spawnSync('podman', ['--version'], { stdio: 'ignore' }).status === 0;
  if (!ok && process.env.CI === 'true') {
    throw new Error(
      'container tests: expected podman and runc as root (apt-get install -y podman runc); not found',
    );
  }
  return ok;
}

function run(args: string[]): string {
  const r = spawnSync('podman', [...PODMAN_ARGS, ...args], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`podman ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

export async function startContainer(): Promise<TestContainer> {
  const dir = mkdtempSync('/var/tmp/conch-podman-');
  const conf = join(dir, 'containers.conf');
  writeFileSync(conf, '[containers]\ndefault_ulimits = []\n');
  const previousConf = process.env.CONTAINERS_CONF;
  // podman (and so every `podman exec` the transport runs) reads it from the environment.
  process.env.CONTAINERS_CONF = conf;
  const root = join(dir, 'rootfs');
  spawnSync('mkdir', ['-p', root]);
  const mount = (args: string[]) => {
    const r = spawnSync('mount', args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`mount ${args.join(' ')}: ${r.stderr}`);
  };
  mount(['--bind', '/', root]);
  mount(['-o', 'remount,bind,ro', root]);
  const name = `conch-exec-test-${process.pid}`;
  try {
    run([
      'run',
      '-d',
      '--name',
      name,
      '--network',
      'none',
      '--mount',
      'type=tmpfs,dst=/sys/fs/cgroup',
      // The container's own /tmp and ~/.cache, empty: the overlaid rootfs would otherwise show this
      // machine's, bundle cache included, and the first connection would never really copy.
      '--mount',
      'type=tmpfs,dst=/tmp,notmpcopyup',
      '--mount',
      `type=tmpfs,dst=${join(homedir(), '.cache')},notmpcopyup`,
      '--rootfs',
      `${root}:O`,
      'sleep',
      'infinity',
    ]);
  } catch (error) {
    spawnSync('umount', [root]);
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    name,
    engineArgs: PODMAN_ARGS,
    async stop() {
      spawnSync('podman', [...PODMAN_ARGS, 'rm', '-f', '-t', '0', name], {
        stdio: 'ignore',
        timeout: 60_000,
      });
      spawnSync('umount', [root]);
      try {
        rmdirSync(root);
      } catch {
        // still mounted: left for the next boot rather than deleting through it
      }
      rmSync(conf, { force: true });
      try {
        rmdirSync(dir);
      } catch {
        // see above
      }
      if (previousConf === undefined) delete process.env.CONTAINERS_CONF;
      else process.env.CONTAINERS_CONF = previousConf;
    },
  };
}
