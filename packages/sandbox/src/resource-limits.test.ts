// A sandbox cannot take the host's memory through its file systems: each private tmpfs refuses a
// write past its size, /dev itself is read-only, the proxy socket cannot be changed from inside;
// limits are validated naming the field, and are wrapped around the sandbox as the mechanism needs.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findBwrap } from './find-bwrap.js';
import { InvalidSpawnOptionError } from './invalid-spawn-option-error.js';
import { normalizeSandboxProfile, PROXY_SOCKET_IN_SANDBOX, sandboxArgs, sandboxKey } from './profile.js';
import {
  allocationFailure,
  defaultSandboxResources,
  limitWrap,
  normalizeSandboxResources,
  parseByteSize,
  tmpfsSizing,
  type LimitSupport,
  type SandboxResources,
} from './resource-limits.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const dirs: string[] = [];
const temp = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('resources: values', () => {
  it('reads sizes in bytes or binary units, and nothing else', () => {
    expect(parseByteSize(0)).toBe(0);
    expect(parseByteSize(4096)).toBe(4096);
    expect(parseByteSize('512MiB')).toBe(512 * MiB);
    expect(parseByteSize('2G')).toBe(2 * GiB);
    expect(parseByteSize('1.5 GiB')).toBe(1.5 * GiB);
    expect(parseByteSize('64k')).toBe(64 * 1024);
    for (const bad of [-1, 1.5, '12 apples', '', 'MiB', '-3M', Number.NaN, null, {}]) {
      expect(parseByteSize(bad)).toBeUndefined();
    }
  });

  it('defaults from the machine: tmpfs min(512 MiB, RAM/8), memory min(RAM/2, 8 GiB), 4096 tasks, 5 minutes idle', () => {
    expect(defaultSandboxResources(32 * GiB)).toEqual({
      tmpfsBytes: 512 * MiB,
      memoryBytes: 8 * GiB,
      processes: 4096,
      idleMs: 300_000,
    });
    expect(defaultSandboxResources(2 * GiB)).toEqual({
      tmpfsBytes: 256 * MiB,
      memoryBytes: GiB,
      processes: 4096,
      idleMs: 300_000,
    });
    // A tiny machine still leaves the supervisor room: node 24 needs ~560 MiB of RLIMIT_DATA to start.
    expect(defaultSandboxResources(256 * MiB).memoryBytes).toBe(GiB);
    expect(defaultSandboxResources(GiB).memoryBytes).toBe(GiB);
  });

  it('fills what a partial object leaves out, and 0 turns a limit off', () => {
    const base = defaultSandboxResources();
    expect(normalizeSandboxResources({ memoryBytes: '1GiB', processes: 0 })).toEqual({
      ...base,
      memoryBytes: GiB,
      processes: 0,
    });
  });

  it.each([
    [{ memoryBytes: 10 * MiB }, 'sandbox.resources.memoryBytes', 'at least 1 GiB'],
    [{ memoryBytes: '512MiB' }, 'sandbox.resources.memoryBytes', 'at least 1 GiB'],
    [{ memoryBytes: 'lots' }, 'sandbox.resources.memoryBytes', "'512MiB'"],
    [{ tmpfsBytes: -1 }, 'sandbox.resources.tmpfsBytes', 'at least 1 MiB'],
    [{ processes: 10 }, 'sandbox.resources.processes', 'at least 64'],
    [{ processes: 100.5 }, 'sandbox.resources.processes', 'integer'],
    [{ idleMs: -5 }, 'sandbox.resources.idleMs', 'milliseconds'],
    [{ memory: 1 }, 'sandbox.resources.memory', 'no such field'],
    ['1GiB', 'sandbox.resources', 'tmpfsBytes'],
  ])('refuses %j naming %s', (resources, field, expected) => {
    const call = () =>
      normalizeSandboxProfile(
        { kind: 'workspace-write', writableRoots: ['/tmp'], readOnlyPaths: [], resources },
        '/',
      );
    expect(call).toThrow(InvalidSpawnOptionError);
    expect(call).toThrow(field);
    expect(call).toThrow(expected);
  });

  it('gives a profile with other resources another sandbox (one supervisor per set of limits)', () => {
    const profile = (resources?: SandboxResources) =>
      normalizeSandboxProfile({ kind: 'read-only', ...(resources ? { resources } : {}) }, '/');
    const small = { ...defaultSandboxResources(), memoryBytes: 2 * GiB };
    expect(sandboxKey(profile(small))).not.toBe(sandboxKey(profile()));
    expect(sandboxKey(profile(small))).toBe(sandboxKey(profile({ ...small })));
  });
});

describe('resources: how a sandbox is wrapped', () => {
  const resources: SandboxResources = {
    tmpfsBytes: 64 * MiB,
    memoryBytes: GiB,
    processes: 500,
    idleMs: 1000,
  };
  const rlimit: LimitSupport = {
    mechanism: 'rlimit',
    memory: 'RLIMIT_DATA',
    memoryScope: 'process',
    processes: 'RLIMIT_NPROC',
    processesScope: 'sandbox',
    reasons: [],
    prlimit: '/usr/bin/prlimit',
  };

  it('with cgroup v2: a systemd scope with the memory (swap off) and task limits around bwrap', () => {
    const cgroup: LimitSupport = {
      mechanism: 'cgroup-v2',
      memory: 'memory.max',
      processes: 'pids.max',
      reasons: [],
      systemdRun: { path: '/usr/bin/systemd-run', user: true, version: 255 },
    };
    const wrap = limitWrap(resources, cgroup, 'conch-x.scope');
    expect(wrap.inner).toEqual([]);
    expect(wrap.outer).toEqual([
      '/usr/bin/systemd-run',
      '--user',
      '--scope',
      '--quiet',
      '--collect',
      '--unit=conch-x.scope',
      '-p',
      `MemoryMax=${GiB}`,
      '-p',
      'MemorySwapMax=0',
      '-p',
      'TasksMax=500',
      '-p',
      'OOMPolicy=continue',
      '--',
    ]);
    // systemd before 253 does not know OOMPolicy for a scope (nor stops one at an OOM kill).
    const old = limitWrap(resources, { ...cgroup, systemdRun: { ...cgroup.systemdRun!, version: 252 } }, 'u');
    expect(old.outer).not.toContain('OOMPolicy=continue');
  });

  it('with rlimits: prlimit inside bwrap, before the sandbox first program', () => {
    expect(limitWrap(resources, rlimit, 'u')).toEqual({
      outer: [],
      inner: ['/usr/bin/prlimit', `--data=${GiB}`, '--nproc=500', '--'],
    });
  });

  it('for root: the pid namespace pid_max, 300 above the limit (the kernel allocates cyclically from 300)', () => {
    const root: LimitSupport = { ...rlimit, processes: 'pid_max', nsenter: '/usr/bin/nsenter' };
    expect(limitWrap(resources, root, 'u')).toEqual({
      outer: [],
      inner: ['/usr/bin/prlimit', `--data=${GiB}`, '--'],
      pidMax: 800,
    });
  });

  it('wraps nothing when both limits are off', () => {
    expect(limitWrap({ ...resources, memoryBytes: 0, processes: 0 }, rlimit, 'u')).toEqual({
      outer: [],
      inner: [],
    });
  });

  it.each([
    ['python', 'Traceback (most recent call last):\n  File "<string>", line 1\nMemoryError\n'],
    ['node heap', 'FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory'],
    ['node buffer', 'RangeError: Array buffer allocation failed'],
    [
      'node 24 buffer',
      "RangeError: Failed to allocate memory\n    at createUnsafeBuffer (node:internal/buffer:1113:25) {\n  code: 'ERR_MEMORY_ALLOCATION_FAILED'\n}",
    ],
    ['node 24 code range', 'Fatal process out of memory: Failed to reserve virtual memory for CodeRange'],
    ['C', 'malloc: Cannot allocate memory'],
    ['rust', 'memory allocation of 21474836480 bytes failed'],
    ['C++', "terminate called after throwing an instance of 'std::bad_alloc'"],
    ['go', 'fatal error: runtime: out of memory'],
    ['bash', 'bash: xmalloc: cannot allocate 1024 bytes'],
    ['gcc', 'cc1: out of memory allocating 65536 bytes'],
  ])('reads an allocation failure from %s', (_name, text) => {
    expect(allocationFailure(`some output\n${text}\nmore`)).toBeDefined();
  });

  it('reads none from ordinary failures', () => {
    expect(allocationFailure('Error: ENOENT: no such file or directory\nexit 1')).toBeUndefined();
    expect(allocationFailure('FAIL src/app.test.ts > adds numbers')).toBeUndefined();
  });
});

const bwrap = findBwrap();
// Under CI (.ci/run installs bubblewrap) a missing bwrap fails these tests instead of skipping them.
describe.runIf(bwrap || process.env.CI)('resources: the private file systems, in a real sandbox', () => {
  const size = 8 * MiB;
  const resources: SandboxResources = { ...defaultSandboxResources(), tmpfsBytes: size };
  // Asynchronous: the proxy test's server answers from this process's event loop.
  const inSandbox = (profile: unknown, script: string, extra: { proxySocket?: string } = {}) => {
    const normalized = normalizeSandboxProfile(profile, '/');
    const { args } = sandboxArgs(normalized, [process.execPath], extra);
    return new Promise<{ stdout: string }>((resolve) => {
      execFile(
        bwrap!,
        [...args, '--', '/bin/sh', '-c', script],
        { encoding: 'utf8', timeout: 60_000, maxBuffer: 1 << 20 },
        (_error, stdout, stderr) => resolve({ stdout: `${stdout}${stderr}` }),
      );
    });
  };

  it('sizes tmpfs here (bubblewrap 0.7+)', () => {
    expect(tmpfsSizing()).toEqual({ ok: true });
  });

  // 1 GiB asked for, written by three programs: each stops at the size with ENOSPC.
  it.each(['/dev/shm', '/var/tmp', '/run'])('refuses 1 GiB in %s past its size', async (dir) => {
    const ws = temp('conch-res-ws-');
    const r = await inSandbox(
      { kind: 'workspace-write', writableRoots: [ws], readOnlyPaths: [], resources },
      [
        `dd if=/dev/zero of=${dir}/dd bs=1M count=1024 2>&1; echo "dd=$?"`,
        `python3 -c "open('${dir}/py','wb').write(bytes(1<<30))" 2>&1; echo "py=$?"`,
        `${process.execPath} -e "require('fs').writeFileSync('${dir}/node', Buffer.alloc(1<<30))" 2>&1; echo "node=$?"`,
        `du -sk ${dir} | cut -f1`,
      ].join('; '),
    );
    expect(r.stdout).toMatch(/No space left on device/);
    expect(r.stdout).toMatch(/dd=1/);
    expect(r.stdout).toMatch(/ENOSPC|No space left/);
    expect(r.stdout).not.toMatch(/py=0|node=0/);
    const used = Number(r.stdout.trim().split('\n').pop());
    expect(used * 1024).toBeLessThanOrEqual(size);
  });

  it('keeps /dev read-only (its tmpfs would hold half the RAM) and /dev/shm a shared temp dir', async () => {
    const r = await inSandbox(
      { kind: 'read-only', resources },
      'echo x > /dev/planted 2>&1; echo "dev=$?"; stat -c %a /dev/shm; echo ok > /dev/null && echo null-ok; ' +
        'python3 -c "import multiprocessing as m; m.Lock(); print(\'semlock-ok\')"',
    );
    expect(r.stdout).toMatch(/Read-only file system/);
    expect(r.stdout).toMatch(/dev=[12]/);
    expect(r.stdout).toMatch(/^1777$/m);
    expect(r.stdout).toContain('null-ok');
    expect(r.stdout).toContain('semlock-ok');
  });

  it('sizes the read-only profile private /tmp too (there it is a tmpfs)', async () => {
    const r = await inSandbox(
      { kind: 'read-only', resources },
      'dd if=/dev/zero of=/tmp/x bs=1M count=1024 2>&1; stat -c %a /tmp',
    );
    expect(r.stdout).toMatch(/No space left on device/);
    expect(r.stdout).toMatch(/^1777$/m);
  });

  it('binds the proxy socket read-only: no chmod, no unlink, and connect() still works', async () => {
    const ws = temp('conch-res-ws-');
    const net = temp('conch-res-net-');
    const socketPath = join(net, 'proxy.sock');
    const server = createServer((socket) => socket.end('answered\n'));
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    try {
      const r = await inSandbox(
        { kind: 'workspace-write', writableRoots: [ws], readOnlyPaths: [], network: 'proxy', resources },
        [
          `chmod 000 ${PROXY_SOCKET_IN_SANDBOX} 2>&1; echo "chmod=$?"`,
          `rm -f ${PROXY_SOCKET_IN_SANDBOX} 2>&1; echo "rm=$?"`,
          `python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('${PROXY_SOCKET_IN_SANDBOX}'); print(s.recv(64).decode().strip())"`,
        ].join('; '),
        { proxySocket: socketPath },
      );
      expect(r.stdout).toMatch(/Read-only file system/);
      expect(r.stdout).toMatch(/chmod=1/);
      expect(r.stdout).toMatch(/rm=1/);
      expect(r.stdout).toContain('answered');
    } finally {
      server.close();
    }
  });
});
