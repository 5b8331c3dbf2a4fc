// Invariant: nothing run in a sandbox starves the host — a fork loop and a huge allocation end with
// a result that names the limit (resourceLimit) while the host and a concurrent command keep
// working, a tmpfs's memory is freed when its sandbox goes idle, and a flood of connections to the
// proxy leaves the host's descriptors bounded.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@conch/test-support';
import { findBwrap, MAX_PROXY_CONNECTIONS, type SandboxProfile } from '@conch/sandbox';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ProcessManager } from './process-manager.js';
import type { ProcessResult } from './process-result.js';
import { memoryVerdict, type SupervisorLimits } from './sandbox-limits.js';
import { survivors } from './test-support/procs.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const bwrap = findBwrap();
const cc = ['cc', 'gcc'].find((c) => spawnSync(c, ['--version']).status === 0);
/**
 * The Python interpreter itself, or undefined: not a version manager's shim (pyenv's `python3` is a
 * bash script that forks helpers while it starts, so a command of it is not one process).
 */
const python = (() => {
  const found = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() || undefined : undefined;
})();

/** The machine's shared memory (tmpfs pages among them), from /proc/meminfo. */
function shmem(): number {
  const m = /^Shmem:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'));
  return Number(m?.[1] ?? 0) * 1024;
}

describe('the memory verdict, from the evidence there is', () => {
  const limits = (mechanism: 'cgroup-v2' | 'rlimit'): SupervisorLimits => ({
    resources: { tmpfsBytes: 0, memoryBytes: GiB, processes: 0, idleMs: 0 },
    outer: [],
    inner: [],
    env: {},
    support:
      mechanism === 'rlimit'
        ? { mechanism, memory: 'RLIMIT_DATA', memoryScope: 'process', processes: 'none', reasons: [] }
        : { mechanism, memory: 'memory.max', memoryScope: 'sandbox', processes: 'pids.max', reasons: [] },
  });
  const base = { oomRise: () => 0, cgroup: false, exitCode: 1, signal: null, text: '' };

  it('an OOM kill counted in the sandbox cgroup, with a SIGKILL conch did not send', () => {
    expect(
      memoryVerdict({
        ...base,
        limits: limits('cgroup-v2'),
        cgroup: true,
        oomRise: () => 1,
        exitCode: null,
        signal: 'SIGKILL',
      }),
    ).toMatchObject({
      kind: 'memory',
      mechanism: 'cgroup-v2',
      per: 'sandbox',
      limit: GiB,
      signal: 'SIGKILL',
    });
  });

  it("the machine's OOM killer (a shell's 137 counts), said as the machine running out", () => {
    expect(
      memoryVerdict({ ...base, limits: limits('rlimit'), oomRise: () => 2, exitCode: 137 }),
    ).toMatchObject({
      kind: 'memory',
      mechanism: 'machine',
      signal: 'SIGKILL',
    });
  });

  it('a SIGKILL with no OOM kill counted is no memory limit', () => {
    expect(
      memoryVerdict({
        ...base,
        limits: limits('cgroup-v2'),
        cgroup: true,
        exitCode: null,
        signal: 'SIGKILL',
      }),
    ).toBeUndefined();
  });

  it('under RLIMIT_DATA, a failure whose output says an allocation failed (node aborting: SIGABRT)', () => {
    expect(
      memoryVerdict({
        ...base,
        limits: limits('rlimit'),
        exitCode: 134,
        text: 'FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory',
      }),
    ).toMatchObject({ kind: 'memory', mechanism: 'rlimit', per: 'process', signal: 'SIGABRT' });
  });

  it('never for a command that succeeded, or without a memory limit', () => {
    const text = 'MemoryError';
    expect(memoryVerdict({ ...base, limits: limits('rlimit'), exitCode: 0, text })).toBeUndefined();
    const none = limits('rlimit');
    none.resources.memoryBytes = 0;
    expect(memoryVerdict({ ...base, limits: none, text })).toBeUndefined();
  });
});

// Under CI (.ci/run installs bubblewrap) a missing bwrap fails these tests instead of skipping them.
describe.runIf(bwrap || process.env.CI)('sandbox resource limits', () => {
  let ws: string;
  let manager: ProcessManager;
  let sandbox: SandboxProfile;
  const resources = { tmpfsBytes: 128 * MiB, memoryBytes: GiB, processes: 128, idleMs: 0 };

  beforeEach(() => {
    ws = mkdtempSync(join(tmpdir(), 'conch-limits-'));
    manager = new ProcessManager({ cwd: ws, killGraceMs: 300, drainMs: 300 });
    sandbox = { kind: 'workspace-write', writableRoots: [ws], readOnlyPaths: [], resources };
  });
  afterEach(async () => {
    await manager.dispose();
    expect(survivors(manager.cookiePrefix)).toEqual([]);
    rmSync(ws, { recursive: true, force: true });
  });

  const run = (file: string, args: string[], profile: SandboxProfile | undefined = sandbox) =>
    manager.spawn(file, args, { ...(profile ? { sandbox: profile } : {}), timeoutMs: 120_000 });

  it('says how the limits are enforced here (status().limits)', async () => {
    expect((await run('true', []).result).exitCode).toBe(0);
    const { limits } = await manager.status();
    expect(['cgroup-v2', 'rlimit', 'none']).toContain(limits.mechanism);
    expect(limits.memory.bytes).toBe(GiB);
    expect(limits.processes.max).toBe(128);
    expect(limits.tmpfs).toEqual({ bytes: 128 * MiB, paths: ['/dev/shm', '/run', '/var/tmp'], sized: true });
    if (limits.mechanism === 'rlimit') {
      expect(limits.memory).toMatchObject({ enforcedBy: 'RLIMIT_DATA', per: 'process' });
      expect(limits.reasons.length).toBeGreaterThan(0);
      // What the sandbox's own processes got, read from inside.
      const inside = await run('cat', ['/proc/self/limits']).result;
      expect(inside.stdout.head).toMatch(new RegExp(`Max data size\\s+${GiB}\\s+${GiB}`));
      if (limits.processes.enforcedBy === 'pid_max') {
        const pidMax = await run('cat', ['/proc/sys/kernel/pid_max']).result;
        expect(pidMax.stdout.head.trim()).toBe(String(128 + 300));
      }
    }
  });

  /** A C program built in the workspace, as a command; undefined without a compiler. */
  const compiled = (name: string, source: string): [string, string[]] | undefined => {
    if (!cc) return undefined;
    writeFileSync(join(ws, `${name}.c`), source);
    execFileSync(cc, ['-o', join(ws, name), join(ws, `${name}.c`)]);
    return [join(ws, name), []];
  };

  const bombs: [string, () => [string, string[]] | undefined][] = [
    [
      'a Python fork loop',
      () =>
        python
          ? [
              'python3',
              [
                '-c',
                'import os\nprint("started", flush=True)\nwhile True:\n  try: os.fork()\n  except OSError: pass',
              ],
            ]
          : undefined,
    ],
    [
      // It fills the sandbox to its limit (128 tasks, the supervisor's threads among them) in a
      // few milliseconds and exits at once: gone, almost always, before the watch's next look
      // (every 250 ms), so the group it left is stopped and named as its own as it exits
      // (supervisor-limits.ts, leaderExited). A shell that gives up after its forks failed ends
      // the same way.
      'a leader that fills the sandbox and exits',
      () =>
        compiled(
          'fill',
          '#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\nint main(void){puts("started");fflush(stdout);for(int i=0;i<120;i++)if(fork()==0){pause();_exit(0);}exit(3);}\n',
        ),
    ],
    [
      'a bash loop of background sleeps',
      () => ['bash', ['-c', 'echo started; while :; do sleep 1000 & done']],
    ],
    [
      'a C fork bomb',
      () =>
        compiled(
          'bomb',
          '#include <stdio.h>\n#include <unistd.h>\nint main(void){puts("started");fflush(stdout);for(;;)fork();}\n',
        ),
    ],
  ];

  it.each(bombs)(
    'stops %s at the process limit (PROCESS_LIMIT) while the host and a concurrent command keep working',
    async (_name, make) => {
      const bomb = make();
      if (!bomb) return; // the interpreter or compiler is not here
      const marker = join(ws, 'go-on');
      // A command already running beside it, which starts nothing while the loop runs.
      const beside = run(python ?? 'python3', [
        '-c',
        `import os, time\nprint("beside ready", flush=True)\nwhile not os.path.exists(${JSON.stringify(marker)}): time.sleep(0.05)\nprint("beside alive")`,
      ]);
      // Running before the loop starts (on a loaded machine a start can take longer than the loop
      // takes to fill the sandbox): from then on it starts nothing.
      // (Output is matched on what has arrived so far: a print can come in several chunks.)
      let besideOut = '';
      beside.onOutput((e) => (besideOut += e.text));
      await waitFor(() => besideOut.includes('beside ready'), 'the command beside to start');
      const loop = run(bomb[0], bomb[1]);
      let loopOut = '';
      loop.onOutput((e) => (loopOut += e.text));
      await waitFor(() => loopOut.includes('started'), 'the fork loop to start');
      // Started while the loop holds every task the sandbox may have: it waits and then runs.
      const during = run('sh', ['-c', 'echo started-during']);
      // The host's own spawns are untouched: unsandboxed through the supervisor, and by node here.
      expect((await run('true', [], undefined).result).exitCode).toBe(0);
      expect(spawnSync('true').status).toBe(0);
      const result: ProcessResult = await loop.result;
      const how = JSON.stringify({
        exitCode: result.exitCode,
        signal: result.signal,
        stderr: result.stderr.head.slice(-300),
      });
      expect(result.resourceLimit, how).toMatchObject({ kind: 'processes', limit: 128, signal: 'SIGKILL' });
      expect(result.resourceLimit!.evidence).toMatch(/held \d+ tasks/);
      // Stopped by the watch (SIGKILL), or its leader gave up first (bash exits once a fork has
      // failed too often; likelier on a loaded machine) and the group it left holding the sandbox
      // was stopped as it exited: either way the result names the limit.
      expect(result.signal === 'SIGKILL' || (result.exitCode !== null && result.exitCode !== 0), how).toBe(
        true,
      );
      expect(result.reason).toBe('exit');
      const later = await during.result;
      expect(later.exitCode).toBe(0);
      expect(later.stdout.head).toContain('started-during');
      writeFileSync(marker, '');
      const side = await beside.result;
      // How it ended, not only its code: a failure here says whether it was killed, lost or limited.
      expect({
        exitCode: side.exitCode,
        signal: side.signal,
        reason: side.reason,
        killed: side.killed,
        lost: side.supervisorLost,
        unresponsive: side.supervisorUnresponsive,
        stderr: side.stderr.head,
      }).toEqual({
        exitCode: 0,
        signal: null,
        reason: 'exit',
        killed: false,
        lost: undefined,
        unresponsive: undefined,
        stderr: '',
      });
      expect(side.stdout.head).toContain('beside alive');
      expect(side.resourceLimit).toBeUndefined();
      // And the sandbox goes on.
      expect((await run('sh', ['-c', 'echo after']).result).stdout.head).toContain('after');
    },
    120_000,
  );

  const allocations: [string, () => [string, string[]] | undefined][] = [
    ['Python, 20 GiB at once', () => (python ? ['python3', ['-c', 'b = bytearray(20 << 30)']] : undefined)],
    [
      'Python, 64 MiB at a time up to 20 GiB',
      () =>
        python
          ? ['python3', ['-c', 'b = []\nfor i in range(320): b.append(bytearray(64 << 20))']]
          : undefined,
    ],
    [
      'node, 64 MiB at a time up to 20 GiB',
      () => [
        process.execPath,
        ['-e', 'const b = []; for (let i = 0; i < 320; i++) b.push(Buffer.alloc(64 << 20, 1));'],
      ],
    ],
    [
      'node, its heap',
      () => [process.execPath, ['-e', 'const a = []; for (;;) a.push(new Array(1e6).fill(1.5));']],
    ],
    [
      'C malloc, 64 MiB at a time up to 20 GiB',
      () => {
        if (!cc) return undefined;
        const src = join(ws, 'alloc.c');
        writeFileSync(
          src,
          '#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\nint main(void){for(int i=0;i<320;i++){char*p=malloc(64<<20);if(!p){perror("malloc");return 1;}memset(p,1,64<<20);}return 0;}\n',
        );
        execFileSync(cc, ['-o', join(ws, 'alloc'), src]);
        return [join(ws, 'alloc'), []];
      },
    ],
    [
      'a shell running Python',
      () => (python ? ['sh', ['-c', 'python3 -c "b = bytearray(20 << 30)"; exit $?']] : undefined),
    ],
  ];

  it.each(allocations)(
    'ends %s with OUT_OF_MEMORY evidence, the host untouched',
    async (_name, make) => {
      const command = make();
      if (!command) return;
      const before = spawnSync('true').status;
      const result = await run(command[0], command[1]).result;
      expect(result.exitCode === 0 && result.signal === null).toBe(false);
      expect(result.resourceLimit).toMatchObject({ kind: 'memory', limit: GiB });
      const { limits } = await manager.status();
      if (limits.mechanism === 'rlimit') {
        expect(result.resourceLimit).toMatchObject({ mechanism: 'rlimit', per: 'process' });
        expect(result.resourceLimit!.evidence).toMatch(/RLIMIT_DATA/);
      }
      expect(before).toBe(0);
      expect((await run('sh', ['-c', 'echo fine']).result).stdout.head).toContain('fine');
    },
    120_000,
  );

  it('reports no limit for a command that failed for its own reasons', async () => {
    const result = await run('sh', ['-c', 'echo "no such thing" >&2; exit 3']).result;
    expect(result.exitCode).toBe(3);
    expect(result.resourceLimit).toBeUndefined();
  });

  it.each(['/dev/shm', '/var/tmp', '/run'])(
    'refuses 1 GiB in %s past its size, and frees what was written once the sandbox is idle past its bound',
    async (dir) => {
      const idle: SandboxProfile = {
        kind: 'workspace-write',
        writableRoots: [ws],
        readOnlyPaths: [],
        resources: { ...resources, idleMs: 200 },
      };
      const full = await run('sh', ['-c', `dd if=/dev/zero of=${dir}/big bs=1M count=1024 2>&1`], idle)
        .result;
      expect(full.exitCode).not.toBe(0);
      expect(full.stdout.head).toMatch(/No space left on device/);
      expect(full.stdout.head).toMatch(/134217728 bytes/);
      const held = shmem();
      // Idle past its bound: the sandbox is closed, and with it its tmpfs.
      await waitFor(() => manager.supervisorPids().length === 0, {
        what: 'the idle sandbox to be closed',
        timeoutMs: 60_000,
      });
      await waitFor(() => held - shmem() > 100 * MiB, {
        what: `the 128 MiB in ${dir} to be freed (Shmem ${held} -> ${shmem()})`,
        timeoutMs: 60_000,
      });
      // The next command gets a new sandbox, with an empty tmpfs.
      const next = await run('sh', ['-c', `ls ${dir}/big 2>&1; echo done`], idle).result;
      expect(next.stdout.head).toMatch(/No such file/);
    },
    120_000,
  );

  describe('the network proxy under a flood of connections', () => {
    let server: Server;
    let port: number;
    beforeAll(async () => {
      server = createServer((_req, res) => res.end('from the host\n'));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      port = (server.address() as { port: number }).port;
    });
    afterAll(() => {
      server.close();
    });

    it('keeps the host descriptors bounded, and the network works afterwards', async () => {
      if (!python) return;
      const proxied = new ProcessManager({
        cwd: ws,
        killGraceMs: 300,
        drainMs: 300,
        network: { decide: async () => ({ allowed: true }) },
      });
      const fds = () => readdirSync('/proc/self/fd').length;
      try {
        const net: SandboxProfile = { ...sandbox, network: 'proxy' } as SandboxProfile;
        expect((await proxied.spawn('true', [], { sandbox: net }).result).exitCode).toBe(0);
        const before = fds();
        const marker = join(ws, 'release');
        const flood = proxied.spawn(
          'python3',
          [
            '-c',
            [
              'import os, socket, time',
              'held = []',
              // Past the cap both ways, and within the listen backlogs (511): a TCP connect to a full
              // backlog waits for SYN retries, seconds each on a loaded machine.
              'for i in range(600):',
              '  s = socket.socket(socket.AF_UNIX); s.connect("/run/conch/proxy.sock"); held.append(s)',
              'for i in range(400):',
              '  s = socket.create_connection(("127.0.0.1", 3128)); held.append(s)',
              'print("holding", len(held), flush=True)',
              `while not os.path.exists(${JSON.stringify(marker)}): time.sleep(0.05)`,
            ].join('\n'),
          ],
          { sandbox: net, timeoutMs: 120_000 },
        );
        // Matched on all it printed so far: print's pieces ("holding", " ", "1000") are separate
        // writes where PYTHONUNBUFFERED is set, and often separate chunks here (this test failed
        // about 1 run in 4 when it looked at one chunk at a time).
        let out = '';
        let ended: ProcessResult | undefined;
        flood.onOutput((e) => (out += e.text));
        const holding = () => out.includes('holding 1000');
        void flood.result.then((r) => (ended = r));
        await waitFor(() => holding() || ended, {
          what: 'the flood to hold its connections',
          timeoutMs: 150_000,
        });
        expect(ended?.stderr.head ?? '').toBe('');
        expect(holding(), out).toBe(true);
        const during = fds();
        writeFileSync(marker, '');
        expect((await flood.result).exitCode).toBe(0);
        // Each accepted connection is one descriptor (an allowed tunnel two): the cap bounds them.
        expect(during - before).toBeLessThanOrEqual(MAX_PROXY_CONNECTIONS + 32);
        // The proxy has seen them close (its count is back under the cap) before the next request.
        await waitFor(() => fds() <= before + 8, 'the proxy to close the flood connections');
        const fetch = await proxied.spawn(
          'python3',
          [
            '-c',
            `import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:${port}/").read().decode())`,
          ],
          { sandbox: net, timeoutMs: 60_000, env: { NO_PROXY: '', no_proxy: '' } },
        ).result;
        expect(fetch.stdout.head).toContain('from the host');
      } finally {
        await proxied.dispose();
      }
    }, 240_000);
  });

  it('leaves nothing of a killed fork loop behind a disposed manager', async () => {
    if (!existsSync('/proc/self')) return;
    const loop = run('bash', ['-c', 'while :; do sleep 1000 & done']);
    await loop.result;
    await manager.dispose();
    expect(survivors(manager.cookiePrefix)).toEqual([]);
  }, 120_000);
});
