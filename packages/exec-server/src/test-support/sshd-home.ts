// A real sshd on 127.0.0.1 whose sessions get a throwaway HOME (sshd_config `SetEnv HOME=…`),
// a directory of its own that is not this host's HOME: what a file tool writes "in the remote
// user's home" lands there, where a test can look, and never in the real one. Where it can (root,
// util-linux unshare) sshd runs in its own mount and pid namespaces with a private /tmp, like
// @conch/test-support's sshd (whose config has no room for a SetEnv line).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { SSHD, type TestSshd } from './sshd.js';

export { sshdAvailable, sshExecutorConfig } from './sshd.js';

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

/**
 * Starts sshd with a fresh HOME for its sessions (`home` of the result: under /var/tmp, seen by
 * this host at the same path). The login directory stays the passwd one: give the executor a
 * `cwd`.
 */
export async function startSshdWithHome(): Promise<TestSshd> {
  // Outside /tmp: the namespace mounts its own /tmp, and the host inspects the home.
  const dir = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : '/tmp', 'conch-sshd-home-'));
  const home = join(dir, 'home');
  mkdirSync(home, { mode: 0o700 });
  keygen(join(dir, 'host_key'));
  keygen(join(dir, 'user_key'));
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'user_key.pub')), { mode: 0o600 });
  const port = await freePort();
  const user = process.env.USER && process.env.USER !== '' ? process.env.USER : 'root';
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
    'StrictModes no',
    'LogLevel ERROR',
    'MaxSessions 64',
    'MaxStartups 64',
    // Applied after sshd's own HOME (OpenSSH >= 7.8): the login shell, `~` and os.homedir() see it.
    `SetEnv HOME=${home}`,
  ];
  writeFileSync(join(dir, 'sshd_config'), `${config.join('\n')}\n`);
  let madeRunDir = false;
  if (process.getuid?.() === 0 && !existsSync('/run/sshd')) {
    mkdirSync('/run/sshd', { mode: 0o755 });
    madeRunDir = true;
  }
  const isolated = canUnshare();
  const sshdArgs = ['-D', '-e', '-f', join(dir, 'sshd_config')];
  let child: ChildProcess;
  if (isolated) {
    const script = `set -e\nmount -t tmpfs -o mode=1777 conch-remote-tmp /tmp\nexec ${SSHD} ${sshdArgs.join(' ')}`;
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
        'printf %s "$HOME"',
      ],
      { encoding: 'utf8', timeout: 10_000 },
    );
    if (probe.status === 0) {
      if (probe.stdout !== home) {
        child.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`test sshd: expected sessions with HOME=${home}; they have ${probe.stdout}`);
      }
      break;
    }
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
        child.kill(isolated ? 'SIGKILL' : 'SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
      if (madeRunDir) rmSync('/run/sshd', { recursive: true, force: true });
    },
  };
}
