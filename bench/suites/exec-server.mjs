// @conch/exec-server against the commands it replaces, on a loopback sshd started here: `echo hi`
// over the persistent ssh transport (one connection, one server, each run a request) against a
// fresh `ssh host echo hi`; 50 MB of output run in the target (captured there, every byte in its
// spill file) and streamed back to the host, against the same run on this machine; and what a
// first connection (deploy) and a reconnection cost. Needs /usr/sbin/sshd and ssh-keygen.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProcessManager } from '@conch/process';
import { alternate, median } from '../lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const { executorFromConfig } = await import(
  join(here, '..', '..', 'packages', 'exec-server', 'dist', 'index.js')
);

const MB50 = 50 * 1024 * 1024;
const FLOOD = `yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -c ${MB50}`;

async function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** A throwaway sshd on 127.0.0.1 (host key, user key, authorized_keys in a temp dir). */
async function startSshd() {
  const dir = mkdtempSync(join(tmpdir(), 'conch-bench-sshd-'));
  for (const key of ['host_key', 'user_key']) {
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, key)]);
  }
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'user_key.pub')), { mode: 0o600 });
  const port = await freePort();
  writeFileSync(
    join(dir, 'sshd_config'),
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${join(dir, 'host_key')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'PidFile none',
      'PermitRootLogin prohibit-password',
      'PasswordAuthentication no',
      'UsePAM no',
      'StrictModes no',
      'LogLevel ERROR',
      'MaxStartups 100',
    ].join('\n') + '\n',
  );
  let madeRunDir = false;
  if (process.getuid?.() === 0 && !existsSync('/run/sshd')) {
    mkdirSync('/run/sshd', { mode: 0o755 });
    madeRunDir = true;
  }
  const child = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', join(dir, 'sshd_config')], { stdio: 'ignore' });
  const user = process.env.USER || 'root';
  const options = ['StrictHostKeyChecking=no', 'UserKnownHostsFile=/dev/null', 'LogLevel=ERROR'];
  const sshArgs = [
    '-T',
    '-p',
    String(port),
    '-i',
    join(dir, 'user_key'),
    '-o',
    'BatchMode=yes',
    '-o',
    'IdentitiesOnly=yes',
  ];
  for (const o of options) sshArgs.push('-o', o);
  sshArgs.push(`${user}@127.0.0.1`);
  for (let i = 0; ; i++) {
    if (spawnSync('ssh', [...sshArgs, 'true'], { stdio: 'ignore', timeout: 10_000 }).status === 0) break;
    if (i > 100) throw new Error('bench sshd did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    config: { kind: 'ssh', host: '127.0.0.1', port, user, identityFile: join(dir, 'user_key'), options },
    sshArgs,
    stop() {
      child.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
      if (madeRunDir) rmSync('/run/sshd', { recursive: true, force: true });
    },
  };
}

/** Runs `argv` once over a fresh ssh connection (a handshake each time), output drained. */
function freshSsh(sshArgs, command) {
  return new Promise((resolve, reject) => {
    const child = spawn('ssh', [...sshArgs, command], { stdio: ['ignore', 'pipe', 'ignore'] });
    child.stdout.on('data', () => {});
    child.on('error', reject);
    child.on('close', resolve);
  });
}

export default async function exec() {
  if (!existsSync('/usr/sbin/sshd')) {
    return [
      {
        name: 'exec-server: skipped (no /usr/sbin/sshd: apt-get install openssh-server)',
        conch: NaN,
        baseline: NaN,
        unit: '',
        ratio: NaN,
      },
    ];
  }
  const sshd = await startSshd();
  const cacheDir = mkdtempSync(join(tmpdir(), 'conch-bench-cache-'));
  const rows = [];
  const target = executorFromConfig({ ...sshd.config, cacheDir }, { cwd: process.cwd() });
  const local = new ProcessManager({ cwd: process.cwd() });
  try {
    // First connection: the bundle is copied into the (empty) cache, then the server starts.
    let t0 = performance.now();
    const first = await target.client.connect();
    const deployMs = performance.now() - t0;

    const { median: echoMs, baseline } = await (async () => {
      const r = await alternate(
        async () => {
          const result = await target.processes.spawn('echo', ['hi']).result;
          if (result.stdout.head !== 'hi\n')
            throw new Error(`echo over ssh: ${JSON.stringify(result.stdout)}`);
        },
        () => freshSsh(sshd.sshArgs, 'echo hi'),
        { runs: 30, warmup: 3 },
      );
      return { median: r.conch, baseline: r.baseline };
    })();
    rows.push({
      name: 'exec-server: `echo hi` over the persistent ssh transport vs a fresh `ssh host echo hi` (loopback sshd, median of 30)',
      conch: echoMs,
      baseline,
      unit: 'ms',
      ratio: echoMs / baseline,
      goal: 'ratio <= 0.1',
      pass: echoMs / baseline <= 0.1,
    });

    // 50 MB: captured in the target (head + tail in the result, every byte in the target's spill file).
    const runRemote = async () => {
      const result = await target.processes.spawn(FLOOD, [], { shell: true, capture: { spill: 'combined' } })
        .result;
      if (result.stdout.totalBytes !== MB50)
        throw new Error(`remote 50 MB: ${result.stdout.totalBytes} bytes`);
    };
    const runLocal = async () => {
      const result = await local.spawn(FLOOD, [], { shell: true, capture: { spill: 'combined' } }).result;
      if (result.stdout.totalBytes !== MB50)
        throw new Error(`local 50 MB: ${result.stdout.totalBytes} bytes`);
    };
    const captured = await alternate(runRemote, runLocal, { runs: 9, warmup: 2 });
    rows.push({
      name: 'exec-server: 50 MB of output run in the ssh target (captured there, spill file in the target) vs the same run locally (median of 9)',
      conch: captured.conch,
      baseline: captured.baseline,
      unit: 'ms',
      ratio: captured.conch / captured.baseline,
      goal: 'ratio <= 1.5',
      pass: captured.conch / captured.baseline <= 1.5,
    });

    // 50 MB streamed to the host (onOutput): every byte crosses the link as it is produced.
    const streamed = async () => {
      let bytes = 0;
      const proc = target.processes.spawn(FLOOD, [], { shell: true, capture: { spill: 'combined' } });
      proc.onOutput((e) => (bytes += e.chunk.length));
      await proc.result;
      if (bytes + proc.skippedBytes !== MB50) throw new Error(`streamed ${bytes} + ${proc.skippedBytes}`);
      return proc.skippedBytes;
    };
    const streamLocal = async () => {
      let bytes = 0;
      const proc = local.spawn(FLOOD, [], { shell: true, capture: { spill: 'combined' } });
      proc.onOutput((e) => (bytes += e.chunk.length));
      await proc.result;
      if (bytes !== MB50) throw new Error(`local streamed ${bytes}`);
    };
    const remoteTimes = [];
    const localTimes = [];
    let skipped = 0;
    for (let i = 0; i < 5; i++) {
      t0 = performance.now();
      await streamLocal();
      localTimes.push(performance.now() - t0);
      t0 = performance.now();
      skipped += await streamed();
      remoteTimes.push(performance.now() - t0);
    }
    rows.push({
      name: `exec-server: 50 MB streamed from the ssh target to host listeners vs local listeners (median of 5; ${Math.round(skipped / 5 / 1024)} KiB/run beyond the stream window, in the spill file)`,
      conch: median(remoteTimes),
      baseline: median(localTimes),
      unit: 'ms',
      ratio: median(remoteTimes) / median(localTimes),
      goal: 'info',
    });

    // A dropped connection and the next call: a reconnect through the control master.
    process.kill(target.client.transportPid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 200));
    t0 = performance.now();
    await target.processes.spawn('true').result;
    const reconnectMs = performance.now() - t0;
    rows.push({
      name: `exec-server: first connection with the bundle copy (${Math.round(first.connectMs)} ms to a running server) vs reconnecting through the control master + \`true\``,
      conch: deployMs,
      baseline: reconnectMs,
      unit: 'ms',
      ratio: deployMs / reconnectMs,
      goal: 'info',
    });
  } finally {
    await local.dispose();
    await target.dispose();
    rmSync(cacheDir, { recursive: true, force: true });
    sshd.stop();
  }
  return rows;
}
