// Invariant: in a container, conch runs the sandbox wherever the kernel lets it (root with
// `--security-opt unmask=ALL`: inside a user namespace of its own; non-root with unmask=ALL), and
// where it cannot (the default container, root or not) it says so — the mode in status, the reason
// and the container flags that fix it in the refusal and in the model's instructions — and a host
// that names a sandbox in its config fails at expose instead of running without it.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHECKOUT } from '@conch/test-support';

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'test-support', 'in-container.mjs');
const PODMAN = ['--cgroup-manager', 'cgroupfs', '--runtime', 'runc'];
const podman =
  process.getuid?.() === 0 && spawnSync('podman', ['--version'], { stdio: 'ignore' }).status === 0;
// As root (CI's user) a missing podman fails the run; as another user these tests skip.
if (!podman && process.env.CI && process.getuid?.() === 0)
  throw new Error('CI needs podman and runc as root for the container tests');

/** Whether a user other than root can read the checkout (a clone inside a 0700 home cannot). */
function othersCanRead(path: string): boolean {
  for (let dir = path; dir !== dirname(dir); dir = dirname(dir)) {
    try {
      const { mode } = statSync(dir);
      if ((mode & 0o005) !== 0o005) return false;
    } catch {
      return false;
    }
  }
  return true;
}

interface Said {
  error?: { code?: string; message: string };
  status?: Record<string, any>;
  instructions?: string;
  write?: Record<string, any>;
}

let dir: string;
let root: string;
let conf: string;

beforeAll(() => {
  if (!podman) return;
  // The container's root is this machine's own / (read-only bind, overlaid): node and the checkout
  // are there; nothing is pulled.
  dir = mkdtempSync('/var/tmp/conch-containers-');
  conf = join(dir, 'containers.conf');
  writeFileSync(conf, '[containers]\ndefault_ulimits = []\n');
  root = join(dir, 'rootfs');
  mkdirSync(root);
  for (const args of [
    ['--bind', '/', root],
    ['-o', 'remount,bind,ro', root],
  ]) {
    const r = spawnSync('mount', args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`mount ${args.join(' ')}: ${r.stderr}`);
  }
});

afterAll(() => {
  if (!podman) return;
  spawnSync('umount', [root]);
  try {
    rmdirSync(root);
  } catch {
    // still mounted: left rather than deleting through it
  }
  rmSync(conf, { force: true });
  try {
    rmdirSync(dir);
  } catch {
    // see above
  }
});

/**
 * The container's /tmp is a fresh tmpfs, which hides a checkout (or a node) cloned under the
 * host's /tmp: those are bound in read-only at the same path. Elsewhere the overlaid root shows them.
 */
function underTmp(): string[] {
  const needed = [CHECKOUT, dirname(dirname(process.execPath))];
  return needed
    .filter((path) => path.startsWith('/tmp/'))
    .flatMap((path) => ['--mount', `type=bind,src=${path},dst=${path},ro`]);
}

function inContainer(flags: string[], sandbox?: string): Said {
  const r = spawnSync(
    'podman',
    [
      ...PODMAN,
      'run',
      '--rm',
      '--network',
      'none',
      '--mount',
      'type=tmpfs,dst=/sys/fs/cgroup',
      '--mount',
      'type=tmpfs,dst=/tmp,notmpcopyup,tmpfs-mode=1777',
      '--mount',
      'type=tmpfs,dst=/ws,notmpcopyup,tmpfs-mode=1777',
      '-e',
      'HOME=/ws',
      ...underTmp(),
      ...flags,
      '--rootfs',
      `${root}:O`,
      process.execPath,
      SCRIPT,
      '/ws',
      ...(sandbox ? [sandbox] : []),
    ],
    { encoding: 'utf8', timeout: 300_000, env: { ...process.env, CONTAINERS_CONF: conf } },
  );
  const line = r.stdout.trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(line) as Said;
  } catch {
    throw new Error(`no answer from the container (${r.status}): ${r.stdout}\n${r.stderr}`);
  }
}

describe.runIf(podman)('conch in containers', () => {
  const nonRoot = othersCanRead(dirname(SCRIPT));

  it('root, default container: off, and every refusal says why and which flags fix it', () => {
    const said = inContainer([]);
    expect(said.error).toBeUndefined();
    expect(said.status?.permission).toMatchObject({ sandbox: 'off' });
    expect(said.status?.permission?.sandboxReason).toMatch(/--cap-add SYS_ADMIN --cap-add NET_ADMIN/);
    expect(said.instructions).toMatch(/There is no sandbox on this machine/);
    expect(said.write?.error).toMatch(/The sandbox is off on this machine/);
    expect(said.write?.error).toMatch(/unmask=ALL/);
  }, 300_000);

  it('root, default container: a config that names the sandbox fails at expose, saying why', () => {
    const said = inContainer([], 'workspace-write');
    expect(said.error).toMatchObject({ code: 'SANDBOX_UNAVAILABLE' });
    expect(said.error!.message).toMatch(/requires the sandbox \(sandbox: 'workspace-write'\)/);
    expect(said.error!.message).toMatch(/--cap-add SYS_ADMIN/);
  }, 300_000);

  it.each([
    ['root, --security-opt unmask=ALL (a user namespace of its own)', ['--security-opt', 'unmask=ALL']],
    ['root, --cap-add SYS_ADMIN --cap-add NET_ADMIN', ['--cap-add', 'SYS_ADMIN', '--cap-add', 'NET_ADMIN']],
    ['non-root, --security-opt unmask=ALL', ['--user', '65534', '--security-opt', 'unmask=ALL']],
  ])(
    '%s: the sandbox runs the everyday write without a prompt',
    (name, flags) => {
      if (flags.includes('--user') && !nonRoot) return; // the checkout is not readable by others here
      const said = inContainer(flags);
      expect(said.error, name).toBeUndefined();
      expect(said.status?.permission).toMatchObject({ sandbox: 'workspace-write' });
      expect(said.write, JSON.stringify(said.write)).toMatchObject({
        returncode: 0,
        sandbox: 'workspace-write',
        stdout: 'made\n',
      });
    },
    300_000,
  );

  it('non-root, default container: off, with the non-root fix', () => {
    if (!nonRoot) return;
    const said = inContainer(['--user', '65534']);
    expect(said.status?.permission).toMatchObject({ sandbox: 'off' });
    expect(said.status?.permission?.sandboxReason).toMatch(/unmask=ALL/);
    expect(said.write?.error).toMatch(/The sandbox is off on this machine/);
  }, 300_000);
});
