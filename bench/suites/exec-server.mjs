// @conch/exec-server against the commands it replaces, on a loopback sshd in its own mount namespace
// (test-support): `echo hi` over the persistent ssh transport (one connection, one server, each run
// a request) against a fresh `ssh host echo hi`, with the remote ~/.bashrc empty and realistic (a
// fresh ssh pays the rc on every command, the persistent transport once); 50 MB of output run in
// the target (captured there, every byte in its spill file) and streamed back to the host, against
// the same run on this machine; and what a first connection (the bundle copied into an empty
// cache) and a reconnection cost. Needs /usr/sbin/sshd, ssh-keygen, root and util-linux unshare.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProcessManager } from '@conch/process';
import { sshdAvailable, sshExecutorConfig, startSshd } from '@conch/test-support/sshd';
import { alternate, median } from '../lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const { executorFromConfig } = await import(
  join(here, '..', '..', 'packages', 'exec-server', 'dist', 'index.js')
);

const MB50 = 50 * 1024 * 1024;
const FLOOD = `yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -c ${MB50}`;

/**
 * What a developer's ~/.bashrc commonly does for every command ssh runs (bash sources it for sshd
 * even without a terminal): PATH entries; a version manager's function library sourced (nvm.sh is
 * about 4,500 lines) whose start-up picks a default version in a subshell; init hooks evaluated
 * from programs' output (pyenv's is a shell program, conda's a python one); dircolors. Written by
 * the bench so that every machine measures the same rc; what it costs alone is measured beside.
 */
function realisticRc(dir) {
  const lib = join(dir, 'version-manager.sh');
  const fns = [];
  for (let i = 0; i < 1500; i++) {
    fns.push(`vm_fn_${i}() {\n  local v="\${1:-default}"; [ -n "$v" ] && printf '%s\\n' "\${v#lts/}"\n}`);
  }
  fns.push('vm_default() { ( cd "$VM_DIR" && ls >/dev/null && printf "v20\\n" ); }');
  writeFileSync(lib, `export VM_DIR=${dir}\n${fns.join('\n')}\nVM_CURRENT="$(vm_default)"\n`);
  const hook = join(dir, 'init-hook.sh');
  writeFileSync(
    hook,
    '#!/bin/bash\nfor d in shims bin; do printf \'export PATH="%s:$PATH"\\n\' "$HOME/.tool/$d"; done\nprintf \'tool() { command tool "$@"; }\\n\'\n',
    { mode: 0o755 },
  );
  return [
    '# a realistic rc: PATH, a version manager sourced, init hooks evaluated, colours',
    'export PATH="$HOME/.local/bin:$HOME/bin:$PATH"',
    `[ -s ${lib} ] && . ${lib}`,
    `eval "$(${hook})"`,
    'eval "$(python3 -c \'print("export CONDA_SHLVL=0 CONDA_PROMPT_MODIFIER=")\')"',
    'command -v dircolors >/dev/null && eval "$(dircolors -b)"',
    'alias ll="ls -l"',
    '',
  ].join('\n');
}

/** What sourcing an rc costs in a fresh bash here (median of 9): the rc alone, no handshake. */
function rcCost(rc) {
  const times = [];
  for (let i = 0; i < 9; i++) {
    const t0 = performance.now();
    // sshd's default PATH, as the ssh session has it (a version manager's shims on this PATH
    // would make python3 itself slower here than there)
    spawnSync('bash', ['-c', `. ${rc}`], {
      stdio: 'ignore',
      env: { HOME: process.env.HOME, PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' },
    });
    times.push(performance.now() - t0);
  }
  return median(times);
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
  if (!existsSync('/usr/sbin/sshd') || !sshdAvailable()) {
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
  // sshd in its own mount namespace (test-support): a private /tmp and ~/.cache (so the first
  // connection really copies the bundle) and the remote ~/.bashrc replaced by rc, which the bench
  // rewrites in place: empty, then realistic.
  const rcDir = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : tmpdir(), 'conch-bench-rc-'));
  const rc = join(rcDir, 'bashrc');
  writeFileSync(rc, '');
  const sshd = await startSshd({ rcFile: rc });
  const config = sshExecutorConfig(sshd);
  const sshArgs = [
    '-T',
    '-p',
    String(sshd.port),
    '-i',
    sshd.identityFile,
    '-o',
    'BatchMode=yes',
    '-o',
    'IdentitiesOnly=yes',
  ];
  for (const o of sshd.options) sshArgs.push('-o', o);
  sshArgs.push(`${sshd.user}@${sshd.host}`);
  const rows = [];
  const target = executorFromConfig(config, { cwd: process.cwd() });
  const local = new ProcessManager({ cwd: process.cwd() });
  try {
    // First connection: the bundle is copied into the target's empty ~/.cache, then the server starts.
    let t0 = performance.now();
    const first = await target.client.connect();
    const deployMs = performance.now() - t0;

    const persistentVsFresh = async () => {
      const r = await alternate(
        async () => {
          const result = await target.processes.spawn('echo', ['hi']).result;
          if (result.stdout.head !== 'hi\n')
            throw new Error(`echo over ssh: ${JSON.stringify(result.stdout)}`);
        },
        () => freshSsh(sshArgs, 'echo hi'),
        { runs: 30, warmup: 3 },
      );
      return { echoMs: r.conch, baseline: r.baseline };
    };
    const empty = await persistentVsFresh();
    writeFileSync(rc, realisticRc(rcDir));
    const realistic = await persistentVsFresh();
    const realisticCost = rcCost(rc);
    writeFileSync(rc, '');
    const emptyCost = rcCost(rc);
    rows.push({
      name: 'exec-server: `echo hi` over the persistent ssh transport vs a fresh `ssh host echo hi`, the remote ~/.bashrc empty (loopback sshd, median of 30)',
      conch: empty.echoMs,
      baseline: empty.baseline,
      unit: 'ms',
      ratio: empty.echoMs / empty.baseline,
      goal: 'ratio <= 0.1',
      pass: empty.echoMs / empty.baseline <= 0.1,
    });
    rows.push({
      name: `exec-server: the same with a realistic ~/.bashrc (a 1,500-function version-manager library sourced, two init hooks evaluated (shell, python3), dircolors: \`bash -c '. rc'\` ${realisticCost.toFixed(0)} ms vs ${emptyCost.toFixed(0)} ms empty; loopback sshd, median of 30)`,
      conch: realistic.echoMs,
      baseline: realistic.baseline,
      unit: 'ms',
      ratio: realistic.echoMs / realistic.baseline,
      goal: 'ratio <= 0.1',
      pass: realistic.echoMs / realistic.baseline <= 0.1,
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
      name: `exec-server: first connection, the bundle copied into an empty cache (${Math.round(first.connectMs)} ms to a running server), vs reconnecting through the control master + \`true\``,
      conch: deployMs,
      baseline: reconnectMs,
      unit: 'ms',
      ratio: deployMs / reconnectMs,
      goal: 'info',
    });
  } finally {
    await local.dispose();
    await target.dispose();
    await sshd.stop();
    rmSync(rcDir, { recursive: true, force: true });
  }
  return rows;
}
