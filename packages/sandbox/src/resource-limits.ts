// eslint-disable-next-line no-restricted-imports -- reads /proc, cgroup files and the bwrap binary only (the system's, not a file the agent wrote)
import { accessSync, constants as fsConstants, existsSync, readdirSync, readFileSync } from 'node:fs';
import { release, totalmem } from 'node:os';
import { formatBytes, safeStatSync } from '@conch/core';
import { delimiter, join } from 'node:path';
import { findBwrap } from './find-bwrap.js';
import { InvalidSpawnOptionError } from './invalid-spawn-option-error.js';
import { settledSandboxStatus } from './probe.js';

/**
 * What an isolated sandbox (read-only, workspace-write) may take from the machine, so that nothing
 * run in it can starve the host (issue 34, item 5):
 *
 * - `tmpfsBytes`: the size of each private tmpfs (`/dev/shm`, `/run`, `/var/tmp`, and `/tmp` where
 *   it is a tmpfs): past it a write fails with ENOSPC. A tmpfs lives in RAM for as long as its
 *   mount namespace, i.e. as long as the sandbox: `idleMs` bounds that for a sandbox nothing runs in.
 *   0: the kernel's default size (half of RAM each).
 * - `memoryBytes`: with cgroup v2 (a systemd scope), `memory.max` of the whole sandbox (swap off);
 *   without, `RLIMIT_DATA` of each process in it (see limitSupport). 0: no limit.
 * - `processes`: tasks (threads count) the sandbox may hold: `pids.max`, else `RLIMIT_NPROC` of a
 *   user namespace, else the pid namespace's own `pid_max` (root). 0: no limit.
 * - `idleMs`: a sandbox with nothing running in it (no command, session, task or file operation)
 *   is closed after this long, which frees its tmpfs memory; the next command starts a new one
 *   (its /tmp, a host directory, is kept). 0: never.
 */
export interface SandboxResources {
  tmpfsBytes: number;
  memoryBytes: number;
  processes: number;
  idleMs: number;
}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/**
 * The smallest memory limit accepted: 1 GiB. Without cgroup v2 the limit is each process's
 * RLIMIT_DATA, and it applies to the sandbox's own supervisor (node) and path guard too. Node 24's
 * V8 reserves a 512 MiB code range at start-up, and that reservation counts: measured here, node
 * 24 aborts before running a line ("Failed to reserve virtual memory for CodeRange") under any
 * RLIMIT_DATA below ~560 MiB, node 20 and 22 start under 256 MiB. 1 GiB leaves node 24 ~450 MiB of
 * heap, and the floor is the same with cgroup v2 so that one config means the same everywhere.
 */
export const MIN_MEMORY_BYTES = GiB;
/** The fewest tasks accepted: the supervisor alone runs ~11 threads, the guard a few. */
export const MIN_PROCESSES = 64;
/** The smallest tmpfs accepted (a unix socket or a lock file in /run still fits). */
export const MIN_TMPFS_BYTES = MiB;

/**
 * The defaults, from this machine's RAM:
 *
 * - tmpfs: min(512 MiB, RAM / 8) each — /dev/shm for Chromium, Python's multiprocessing and
 *   PostgreSQL, a few files in /run and /var/tmp; big temporary files go to /tmp, which is a host
 *   directory (disk) in the workspace-write sandbox. Three of them at most 3/8 of RAM.
 * - memory: min(RAM / 2, 8 GiB) — a large build (tsc on a monorepo, webpack, a rustc link) fits in
 *   a few GiB; half of RAM stays for the host, its browser and the user's own programs.
 * - processes: 4096 — `make -j`, jest workers and a dev server use a few hundred at most; a fork
 *   loop stops there, far below the kernel's pid_max (32768 or 4194304) and threads-max.
 * - idle: 5 minutes — longer than a model's turn or a human reading, short enough that 3/8 of RAM
 *   written to the tmpfs does not stay taken for the rest of the day.
 */
export function defaultSandboxResources(ram: number = totalmem()): SandboxResources {
  const mib = (n: number) => Math.max(MiB, Math.floor(n / MiB) * MiB);
  return {
    tmpfsBytes: mib(Math.min(512 * MiB, ram / 8)),
    memoryBytes: Math.max(MIN_MEMORY_BYTES, mib(Math.min(8 * GiB, ram / 2))),
    processes: 4096,
    idleMs: 5 * 60_000,
  };
}

let defaults: SandboxResources | undefined;

/** The resources of a profile: its own, the defaults for an isolated one without, undefined otherwise. */
export function resourcesOf(profile: {
  kind: string;
  resources?: SandboxResources | undefined;
}): SandboxResources | undefined {
  if (profile.kind !== 'read-only' && profile.kind !== 'workspace-write') return undefined;
  return profile.resources ?? (defaults ??= defaultSandboxResources());
}

/** The part of a sandbox key the resources make (one supervisor per distinct set). */
export function resourcesKey(profile: { kind: string; resources?: SandboxResources | undefined }): string {
  const r = profile.resources;
  return r ? `|r:${r.tmpfsBytes},${r.memoryBytes},${r.processes},${r.idleMs}` : '';
}

const UNITS: Record<string, number> = { '': 1, k: 1024, m: MiB, g: GiB, t: 1024 * GiB };

/**
 * A size in bytes: a non-negative integer, or a string such as `512MiB`, `2G`, `1.5 GiB`, `64k`
 * (binary units; `B`, `iB` optional). Undefined when it is neither.
 */
export function parseByteSize(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(value);
  if (!m) return undefined;
  const bytes = Math.floor(Number(m[1]) * UNITS[m[2]!.toLowerCase()]!);
  return Number.isSafeInteger(bytes) ? bytes : undefined;
}

const EXPECTED_RESOURCES =
  '{ tmpfsBytes, memoryBytes, processes, idleMs } (numbers; 0 turns one off), or a partial object of them';

/**
 * Checks a profile's `resources`: an object of non-negative integers (byte sizes may be strings
 * such as '512MiB'), missing fields taking the defaults. Each field named in the error.
 */
export function normalizeSandboxResources(value: unknown, field = 'resources'): SandboxResources {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new InvalidSpawnOptionError(field, EXPECTED_RESOURCES, value);
  const v = value as Record<string, unknown>;
  for (const key of Object.keys(v)) {
    if (!['tmpfsBytes', 'memoryBytes', 'processes', 'idleMs'].includes(key))
      throw new InvalidSpawnOptionError(`${field}.${key}`, `no such field (${EXPECTED_RESOURCES})`, v[key]);
  }
  const base = defaultSandboxResources();
  const size = (key: 'tmpfsBytes' | 'memoryBytes', min: number): number => {
    if (v[key] === undefined) return base[key];
    const bytes = parseByteSize(v[key]);
    if (bytes === undefined || (bytes !== 0 && bytes < min))
      throw new InvalidSpawnOptionError(
        `${field}.${key}`,
        `0 (no limit) or a size of at least ${formatBytes(min)}, in bytes or as '512MiB' / '2GiB'`,
        v[key],
      );
    return bytes;
  };
  const count = (key: 'processes' | 'idleMs', min: number, what: string): number => {
    if (v[key] === undefined) return base[key];
    const n = v[key];
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0 || (n !== 0 && n < min))
      throw new InvalidSpawnOptionError(`${field}.${key}`, what, n);
    return n;
  };
  return {
    tmpfsBytes: size('tmpfsBytes', MIN_TMPFS_BYTES),
    memoryBytes: size('memoryBytes', MIN_MEMORY_BYTES),
    processes: count('processes', MIN_PROCESSES, `0 (no limit) or an integer of at least ${MIN_PROCESSES}`),
    idleMs: count('idleMs', 1, '0 (never) or a positive integer of milliseconds'),
  };
}

// ---- what this machine can enforce ----

/** How a sandbox's memory and process limits are enforced here. */
export interface LimitSupport {
  /**
   * 'cgroup-v2': each sandbox in its own systemd scope (`memory.max`, `pids.max`, for the whole
   * sandbox); 'rlimit': resource limits of the sandbox's processes (and, for root, the pid
   * namespace's `pid_max`); 'none': neither works here.
   */
  mechanism: 'cgroup-v2' | 'rlimit' | 'none';
  memory: 'memory.max' | 'RLIMIT_DATA' | 'none';
  /** 'sandbox': one budget for all its processes; 'process': each process on its own. */
  memoryScope?: 'sandbox' | 'process';
  processes: 'pids.max' | 'RLIMIT_NPROC' | 'pid_max' | 'none';
  /**
   * 'sandbox': the sandbox's own tasks are counted; 'user': RLIMIT_NPROC without a user
   * namespace counts every process of the user on the machine.
   */
  processesScope?: 'sandbox' | 'user';
  /** Why the stronger mechanisms do not apply (no cgroup v2 delegation, root, an old kernel, …). */
  reasons: string[];
  /** cgroup-v2: `systemd-run` and whether it talks to the user's manager. */
  systemdRun?: { path: string; user: boolean; version: number };
  /** rlimit: `prlimit` (util-linux), which sets the limits on the sandbox's first process. */
  prlimit?: string;
  /** pid_max: `nsenter`, which writes the sandbox's pid_max from inside its pid namespace. */
  nsenter?: string;
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '/usr/bin:/bin').split(delimiter)) {
    if (!dir) continue;
    const file = join(dir, name);
    try {
      accessSync(file, fsConstants.X_OK);
      if (safeStatSync(file).isFile()) return file;
    } catch {
      // not here
    }
  }
  return undefined;
}

function controllersOf(dir: string): Set<string> {
  try {
    return new Set(readFileSync(join(dir, 'cgroup.controllers'), 'utf8').trim().split(/\s+/));
  } catch {
    return new Set();
  }
}

/** The kernel's major.minor as one number (6.14 -> 614). */
function kernelVersion(): number {
  const m = /^(\d+)\.(\d+)/.exec(release());
  return m ? Number(m[1]) * 100 + Number(m[2]) : 0;
}

/**
 * systemd's version, from the name of its shared library (`libsystemd-shared-255.so`, beside every
 * systemd binary): no process is started (this runs on the first sandbox's start). 0 when unknown.
 */
function systemdVersion(): number {
  for (const dir of [
    '/usr/lib/systemd',
    '/lib/systemd',
    '/usr/lib64/systemd',
    '/usr/lib/x86_64-linux-gnu/systemd',
    '/usr/lib/aarch64-linux-gnu/systemd',
  ]) {
    try {
      for (const name of readdirSync(dir)) {
        const m = /^libsystemd-shared-(\d+)/.exec(name);
        if (m) return Number(m[1]);
      }
    } catch {
      // not here
    }
  }
  return 0;
}

/**
 * Whether a systemd scope with memory and pids controllers can be made for a sandbox: cgroup v2
 * mounted alone (`/sys/fs/cgroup/cgroup.controllers`), `systemd-run`, and a systemd manager that
 * can delegate them — the system one for root (systemd is pid 1), the user's (its
 * `user@<uid>.service` has `memory` and `pids`) for anyone else. Why not, otherwise.
 */
function cgroupSupport(env: NodeJS.ProcessEnv): { systemdRun?: LimitSupport['systemdRun']; reason?: string } {
  if (env.CONCH_CGROUP === '0') return { reason: 'cgroup v2 switched off (CONCH_CGROUP=0)' };
  if (!existsSync('/sys/fs/cgroup/cgroup.controllers'))
    return { reason: 'no cgroup v2 hierarchy at /sys/fs/cgroup (cgroup v1 or hybrid)' };
  const systemdRun = onPath('systemd-run');
  if (!systemdRun) return { reason: 'systemd-run was not found on PATH' };
  const uid = process.geteuid?.() ?? -1;
  let dir: string;
  if (uid === 0) {
    if (!existsSync('/run/systemd/system')) return { reason: 'systemd is not the init system here' };
    dir = '/sys/fs/cgroup';
  } else {
    const runtime = env.XDG_RUNTIME_DIR || `/run/user/${uid}`;
    if (!existsSync(join(runtime, 'systemd', 'private')) && !existsSync(join(runtime, 'bus')))
      return { reason: `no systemd user manager reachable (${runtime}/systemd/private)` };
    dir = `/sys/fs/cgroup/user.slice/user-${uid}.slice/user@${uid}.service`;
  }
  const controllers = controllersOf(dir);
  const missing = ['memory', 'pids'].filter((c) => !controllers.has(c));
  if (missing.length) return { reason: `the ${missing.join(' and ')} controller is not delegated to ${dir}` };
  return { systemdRun: { path: systemdRun, user: uid !== 0, version: systemdVersion() } };
}

const supports = new Map<boolean, LimitSupport>();

/**
 * How memory and process limits are enforced on this machine (looked up once per process):
 *
 * - **cgroup v2** where a systemd manager delegates the memory and pids controllers (a desktop
 *   session's user manager, or root under systemd): the sandbox starts in its own transient scope
 *   (`systemd-run --scope`) with `MemoryMax`, `MemorySwapMax=0` and `TasksMax`; one budget for the
 *   whole sandbox; the kernel's OOM kills in it are counted in its `memory.events`.
 * - else **rlimits**, set on the sandbox's first process by `prlimit` (so the host is unaffected)
 *   and inherited by everything in it: `RLIMIT_DATA` (each process's private writable memory: a
 *   malloc, a V8 heap or a Python object past it fails; `RLIMIT_AS` is not used: V8 and wasm reserve
 *   tens of GiB of address space they never touch) and `RLIMIT_NPROC`, which since Linux 5.14
 *   counts per user namespace, so with bwrap's user namespace (unprivileged bwrap) it counts the
 *   sandbox's own tasks. The kernel never applies RLIMIT_NPROC to root (uid 0 is exempt whatever
 *   its capabilities), so for root the pid namespace's own `pid_max` (Linux 6.14+) is set instead,
 *   from the host with `nsenter`: it bounds the tasks the sandbox's pid namespace can hold.
 *
 * What rlimits cannot do, said in status(): memory is per process (N processes may hold N times
 * the limit; the process limit bounds N), shared memory (/dev/shm, memfd) is bounded by the tmpfs
 * size only, and a kernel OOM kill of the machine is not the sandbox's limit.
 */
export function limitSupport(options: { cgroup?: boolean } = {}): LimitSupport {
  const wantCgroup = options.cgroup !== false;
  let support = supports.get(wantCgroup);
  if (support) return support;
  const reasons: string[] = [];
  const cgroup = wantCgroup ? cgroupSupport(process.env) : { reason: 'cgroup v2 not used here' };
  if (cgroup.systemdRun) {
    support = {
      mechanism: 'cgroup-v2',
      memory: 'memory.max',
      memoryScope: 'sandbox',
      processes: 'pids.max',
      processesScope: 'sandbox',
      reasons,
      systemdRun: cgroup.systemdRun,
    };
    supports.set(wantCgroup, support);
    return support;
  }
  reasons.push(cgroup.reason!);
  const prlimit = onPath('prlimit');
  const root = process.geteuid?.() === 0;
  let processes: LimitSupport['processes'] = 'none';
  let processesScope: LimitSupport['processesScope'];
  let nsenter: string | undefined;
  if (root) {
    nsenter = onPath('nsenter');
    if (kernelVersion() < 614)
      reasons.push(
        `running as root, which RLIMIT_NPROC does not apply to, on Linux ${release()} (a pid namespace's own pid_max needs 6.14)`,
      );
    else if (!nsenter) reasons.push('running as root, and nsenter (util-linux) was not found on PATH');
    else {
      processes = 'pid_max';
      processesScope = 'sandbox';
    }
  } else if (prlimit) {
    processes = 'RLIMIT_NPROC';
    // A setuid bwrap makes no user namespace: the count is the user's, machine-wide.
    processesScope = bwrapIsSetuid() ? 'user' : 'sandbox';
    if (processesScope === 'user')
      reasons.push(
        "bwrap is setuid (no user namespace): RLIMIT_NPROC counts the user's processes machine-wide",
      );
  }
  if (!prlimit) reasons.push('prlimit (util-linux) was not found on PATH: no memory limit');
  const memory = prlimit ? 'RLIMIT_DATA' : 'none';
  support = {
    mechanism: memory === 'none' && processes === 'none' ? 'none' : 'rlimit',
    memory,
    ...(memory !== 'none' ? { memoryScope: 'process' as const } : {}),
    processes,
    ...(processesScope ? { processesScope } : {}),
    reasons,
    ...(prlimit ? { prlimit } : {}),
    ...(processes === 'pid_max' && nsenter ? { nsenter } : {}),
  };
  supports.set(wantCgroup, support);
  return support;
}

/** Forgets what limitSupport() found (tests that change PATH or the environment). */
export function forgetLimitSupport(): void {
  supports.clear();
  sizing = undefined;
}

function bwrapIsSetuid(): boolean {
  const bwrap = findBwrap();
  if (!bwrap) return false;
  try {
    return (safeStatSync(bwrap).mode & 0o4000) !== 0;
  } catch {
    return false;
  }
}

let sizing: { ok: boolean; reason?: string } | undefined;

/**
 * Whether bwrap can size a tmpfs (`--size`: bubblewrap 0.7.0+, and refused by a setuid bwrap run by
 * another user than root). Asked once: the probe's version when it ran, else whether the binary
 * holds `--size`'s usage line (its help text is compiled in) — no process is started for it: this
 * runs on the first sandbox's start, where a host that forks would stall its event loop.
 */
export function tmpfsSizing(): { ok: boolean; reason?: string } {
  if (sizing) return sizing;
  const bwrap = findBwrap();
  if (!bwrap) return (sizing = { ok: false, reason: 'bwrap was not found' });
  const version = settledSandboxStatus(bwrap)?.version;
  const m = /^(\d+)\.(\d+)/.exec(version ?? '');
  let known: boolean;
  if (m) known = Number(m[1]) * 100 + Number(m[2]) >= 7;
  else {
    try {
      known = readFileSync(bwrap).includes('--size BYTES');
    } catch {
      known = false;
    }
  }
  if (!known)
    return (sizing = {
      ok: false,
      reason: `bubblewrap ${version ?? `at ${bwrap}`} cannot size a tmpfs (--size needs 0.7.0)`,
    });
  if (bwrapIsSetuid() && process.geteuid?.() !== 0)
    return (sizing = { ok: false, reason: 'a setuid bwrap refuses --size' });
  return (sizing = { ok: true });
}

/**
 * The bwrap arguments that mount a private tmpfs at `dir` of `bytes` (0 or no sizing here: the
 * kernel's default size), world-writable with the sticky bit where the directory is a shared temp
 * dir (/tmp, /var/tmp, /dev/shm), 0755 otherwise.
 */
export function tmpfsArgs(dir: string, bytes: number): string[] {
  const shared = dir === '/tmp' || dir === '/var/tmp' || dir === '/dev/shm';
  const size = bytes > 0 && tmpfsSizing().ok ? ['--size', String(bytes)] : [];
  return [...(shared ? ['--perms', '1777'] : []), ...size, '--tmpfs', dir];
}

/**
 * /dev/shm as its own sized tmpfs and the rest of bwrap's /dev read-only: bwrap's `--dev` is a
 * tmpfs of half the RAM that root (or the sandbox's user, owning it in a user namespace) could fill
 * at /dev/anything. Device nodes stay usable on a read-only mount; /dev/pts is its own mount.
 */
export function devArgs(bytes: number): string[] {
  return [...tmpfsArgs('/dev/shm', bytes), '--remount-ro', '/dev'];
}

/** What wraps a sandbox's bwrap to enforce its limits. */
export interface LimitWrap {
  /** argv before bwrap's own path (systemd-run …), or empty. */
  outer: string[];
  /** argv after bwrap's `--`, before the sandbox's first program (prlimit …), or empty. */
  inner: string[];
  /** The pid_max to set in the sandbox's pid namespace once it runs (root, rlimit mode). */
  pidMax?: number;
}

/**
 * How to start a sandbox with `resources` under `support`. `unit` names the systemd scope.
 * With cgroup v2: `systemd-run --scope … -- bwrap …` (systemd puts the process in the new scope,
 * then execs bwrap: same pid, nothing forked outside it). With rlimits: `bwrap … -- prlimit
 * --data=N --nproc=M -- guard …` (prlimit sets its own limits, then execs the guard or the
 * supervisor: nothing outside the sandbox gets them, and bwrap's user namespace is made before
 * RLIMIT_NPROC applies).
 */
export function limitWrap(resources: SandboxResources, support: LimitSupport, unit: string): LimitWrap {
  const wrap: LimitWrap = { outer: [], inner: [] };
  if (resources.memoryBytes === 0 && resources.processes === 0) return wrap;
  if (support.mechanism === 'cgroup-v2' && support.systemdRun) {
    const { path, user, version } = support.systemdRun;
    const props: string[] = [];
    if (resources.memoryBytes > 0) props.push(`MemoryMax=${resources.memoryBytes}`, 'MemorySwapMax=0');
    if (resources.processes > 0) props.push(`TasksMax=${resources.processes}`);
    // systemd 253+ stops a scope at its first OOM kill by default: one command's OOM would take the
    // sandbox with it. Older releases do not know the property for scopes (and do not stop them);
    // an unknown version (0) leaves it out rather than risk a scope that cannot start.
    if (version >= 253) props.push('OOMPolicy=continue');
    wrap.outer = [
      path,
      ...(user ? ['--user'] : []),
      '--scope',
      '--quiet',
      '--collect',
      `--unit=${unit}`,
      ...props.flatMap((p) => ['-p', p]),
      '--',
    ];
    return wrap;
  }
  if (support.prlimit) {
    const flags: string[] = [];
    if (resources.memoryBytes > 0 && support.memory === 'RLIMIT_DATA')
      flags.push(`--data=${resources.memoryBytes}`);
    if (resources.processes > 0 && support.processes === 'RLIMIT_NPROC')
      flags.push(`--nproc=${resources.processes}`);
    if (flags.length) wrap.inner = [support.prlimit, ...flags, '--'];
  }
  // The kernel allocates pids cyclically from 300 once the first 300 were used: pid_max N + 300
  // lets the namespace hold about N tasks after its pids wrapped (up to N + 300 before).
  if (resources.processes > 0 && support.processes === 'pid_max')
    wrap.pidMax = resources.processes + PID_RESERVED;
  return wrap;
}

/** The pids a pid namespace keeps below its cyclic range (the kernel's RESERVED_PIDS). */
export const PID_RESERVED = 300;

/**
 * Messages programs print when an allocation failed (Python's MemoryError, node's heap and
 * ArrayBuffer failures (node 24: `RangeError: Failed to allocate memory`, ERR_MEMORY_ALLOCATION_FAILED), C's ENOMEM text, Rust, Go, Java, C++, GCC, bash's xmalloc). Under a
 * per-process RLIMIT_DATA this is the only trace an exhausted limit leaves: the kernel refuses the
 * mapping and the program reports it (or aborts) itself.
 */
const ALLOCATION_FAILURE =
  /MemoryError|OutOfMemoryError|out of memory|Cannot allocate memory|std::bad_alloc|memory allocation of \d+ bytes failed|virtual memory exhausted|xmalloc: .*cannot allocate|Array buffer allocation failed|Failed to allocate memory|ERR_MEMORY_ALLOCATION_FAILED|Unable to grow instance memory|Fatal process OOM/i;

/** The line of `text` that says an allocation failed, if one does (at most 200 characters). */
export function allocationFailure(text: string): string | undefined {
  const m = ALLOCATION_FAILURE.exec(text);
  if (!m) return undefined;
  const start = text.lastIndexOf('\n', m.index) + 1;
  const end = text.indexOf('\n', m.index);
  const line = text.slice(start, end === -1 ? undefined : end).trim();
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}

/** The machine's count of kernel OOM kills since boot (`oom_kill` in /proc/vmstat, Linux 4.13+). */
export function systemOomKills(): number | undefined {
  try {
    const text = readFileSync('/proc/vmstat', 'latin1');
    const m = /(?:^|\n)oom_kill (\d+)/.exec(text);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** `key value` lines of a cgroup file (memory.events, pids.events) as numbers. */
export function cgroupCounters(file: string): Record<string, number> | undefined {
  try {
    const out: Record<string, number> = {};
    for (const line of readFileSync(file, 'latin1').split('\n')) {
      const [key, value] = line.split(' ');
      if (key && value !== undefined) out[key] = Number(value);
    }
    return out;
  } catch {
    return undefined;
  }
}

/** The cgroup v2 directory of a process (`0::/path` in /proc/<pid>/cgroup), when it is in one. */
export function cgroupDirOf(pid: number | 'self'): string | undefined {
  try {
    const line = readFileSync(`/proc/${pid}/cgroup`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('0::'));
    return line ? join('/sys/fs/cgroup', line.slice(3)) : undefined;
  } catch {
    return undefined;
  }
}
