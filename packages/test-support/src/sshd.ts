// A real OpenSSH server on 127.0.0.1 with a generated host key and user key, for the suites that
// run conch on an ssh "remote" (@conch/exec-server, @conch/environment). When it can (root,
// util-linux unshare), sshd runs in its own mount and pid namespaces with a private /tmp and
// ~/.cache: a test then passes only if every path and pid really goes through the exec server.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { requireUnderCi } from './index.js';

export const SSHD = '/usr/sbin/sshd';

export interface TestSshd {
  host: '127.0.0.1';
  port: number;
  user: string;
  identityFile: string;
  /** ssh options for a throwaway host key. */
  options: string[];
  /** Whether sshd runs in private mount + pid namespaces (a /tmp, ~/.cache and pids of its own). */
  isolated: boolean;
  /** The remote user's home. */
  home: string;
  stop(): Promise<void>;
}

/** The @conch/exec-server executor config that reaches this sshd: `{ kind: 'ssh', host, port, … }`. */
export function sshExecutorConfig(sshd: TestSshd): {
  kind: 'ssh';
  host: string;
  port: number;
  user: string;
  identityFile: string;
  options: string[];
} {
  const { host, port, user, identityFile, options } = sshd;
  return { kind: 'ssh', host, port, user, identityFile, options };
}

/** Whether the ssh suites can run here; under CI a missing sshd is a failure, not a skip. */
export function sshdAvailable(): boolean {
  const ok = existsSync(SSHD) && spawnSync('ssh-keygen', ['-?'], { stdio: 'ignore' }).error === undefined;
  return requireUnderCi(ok, `${SSHD} and ssh-keygen`, 'apt-get install -y openssh-server openssh-client');
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function keygen(file: string): void {
  const r = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ssh-keygen failed: ${r.stderr}`);
}

function canUnshare(): boolean {
  if (process.getuid?.() !== 0) return false;
  const r = spawnSync('unshare', ['--mount', '--pid', '--fork', '--mount-proc', 'true'], { stdio: 'ignore' });
  return r.status === 0;
}

export interface StartSshdOptions {
  /**
   * A file that stands for the remote user's `~/.bashrc` (bind-mounted over it in sshd's mount
   * namespace; needs `isolated`, and an existing ~/.bashrc to mount over). bash sources it for
   * every command sshd runs, so it is what a fresh `ssh host cmd` pays besides the handshake;
   * rewrite it in place (same inode) to change it between runs.
   */
  rcFile?: string;
}

export async function startSshd(start: StartSshdOptions = {}): Promise<TestSshd> {
  // Outside /tmp: the namespace mounts its own /tmp, and sshd must still read its config there.
  const base = existsSync('/var/tmp') ? '/var/tmp' : homedir();
  const dir = mkdtempSync(join(base, 'conch-sshd-'));
  keygen(join(dir, 'host_key'));
  keygen(join(dir, 'user_key'));
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'user_key.pub')), { mode: 0o600 });
  const port = await freePort();
  const user = process.env.USER && process.env.USER !== '' ? process.env.USER : 'root';
  const uid = process.getuid?.() ?? 0;
  const config = [
    `Port ${port}`,
    'ListenAddress 127.0.0.1',
    `HostKey ${join(dir, 'host_key')}`,
    `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
    'PidFile none',
    'PermitRootLogin prohibit-password',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'UsePAM no',
    // The key files live in a temp dir whose modes sshd would otherwise refuse.
    'StrictModes no',
    'LogLevel ERROR',
    'MaxSessions 64',
    'MaxStartups 64',
  ];
  writeFileSync(join(dir, 'sshd_config'), `${config.join('\n')}\n`);
  // sshd's privilege-separation directory (Debian: /run/sshd).
  let madeRunDir = false;
  if (uid === 0 && !existsSync('/run/sshd')) {
    mkdirSync('/run/sshd', { mode: 0o755 });
    madeRunDir = true;
  }
  const isolated = canUnshare();
  const home = homedir();
  if (start.rcFile && !(isolated && existsSync(join(home, '.bashrc')))) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(
      `startSshd({ rcFile }) needs root, util-linux unshare and an existing ${join(home, '.bashrc')} to mount over`,
    );
  }
  const sshdArgs = ['-D', '-e', '-f', join(dir, 'sshd_config')];
  let child: ChildProcess;
  if (isolated) {
    const cache = join(home, '.cache');
    mkdirSync(cache, { recursive: true });
    const script = [
      'set -e',
      'mount -t tmpfs -o mode=1777 conch-remote-tmp /tmp',
      `mount -t tmpfs -o mode=0700 conch-remote-cache ${cache}`,
      ...(start.rcFile ? [`mount --bind ${start.rcFile} ${join(home, '.bashrc')}`] : []),
      `exec ${SSHD} ${sshdArgs.join(' ')}`,
    ].join('\n');
    child = spawn(
      'unshare',
      [
        '--mount',
        '--propagation',
        'private',
        '--pid',
        '--fork',
        '--kill-child',
        '--mount-proc',
        'sh',
        '-c',
        script,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
  } else {
    child = spawn(SSHD, sshdArgs, { stdio: ['ignore', 'ignore', 'pipe'] });
  }
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const options = ['StrictHostKeyChecking=no', 'UserKnownHostsFile=/dev/null', 'LogLevel=ERROR'];
  const identityFile = join(dir, 'user_key');
  const deadline = Date.now() + 20_000;
  for (;;) {
    const probe = spawnSync(
      'ssh',
      [
        '-T',
        '-p',
        String(port),
        '-i',
        identityFile,
        '-o',
        'BatchMode=yes',
        '-o',
        'IdentitiesOnly=yes',
        ...options.flatMap((o) => ['-o', o]),
        `${user}@127.0.0.1`,
        'true',
      ],
      { encoding: 'utf8', timeout: 10_000 },
    );
    if (probe.status === 0) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`test sshd did not start: ${stderr || probe.stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    host: '127.0.0.1',
    port,
    user,
    identityFile,
    options,
    isolated,
    home,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        // unshare waits out SIGTERM; SIGKILL it and --kill-child takes its namespace's pid 1 (sshd)
        // down, and with it every process in that namespace.
        child.kill(isolated ? 'SIGKILL' : 'SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
      if (madeRunDir) rmSync('/run/sshd', { recursive: true, force: true });
    },
  };
}
