/**
 * The host's side of a sandbox's resource limits (issue 34, item 5; the mechanisms are
 * @conch/sandbox's resource-limits.ts): how a sandboxed supervisor is started with them, the pid
 * namespace's pid_max set from the host where that is the process limit, what status() says, and
 * whether a finished command hit one (its result's `resourceLimit`).
 */
import { spawn } from 'node:child_process';
import {
  allocationFailure,
  cgroupCounters,
  limitSupport,
  limitWrap,
  resourcesOf,
  systemOomKills,
  tmpfsSizing,
  type LimitSupport,
  type SandboxProfile,
  type SandboxResources,
} from '@conch/sandbox';
import { OOM_SCORE_ADJ_VAR, PIDS_EVENTS_VAR, PROCESS_LIMIT_VAR } from './supervisor-limit-vars.js';

/** A limit a command ran into, and how conch knows (a result's `resourceLimit`). */
export interface ResourceLimitHit {
  kind: 'memory' | 'processes';
  /**
   * How the limit is enforced: 'cgroup-v2' (the sandbox's cgroup), 'rlimit' (each process's
   * RLIMIT_DATA, RLIMIT_NPROC of the sandbox's user namespace), 'pid-namespace' (its pid_max),
   * 'watch' (conch's process-limit watch alone), 'machine' (the whole machine ran out: the kernel's
   * OOM killer, not the sandbox's limit).
   */
  mechanism: 'cgroup-v2' | 'rlimit' | 'pid-namespace' | 'watch' | 'machine';
  /** The limit: bytes (memory) or tasks, threads included (processes). */
  limit: number;
  /** Memory: one budget for the sandbox, or for each process. */
  per?: 'sandbox' | 'process';
  /** What shows it: the kernel's OOM kill count, an allocation failure the command printed, the tasks the sandbox held. */
  evidence: string;
  /** The signal that ended the command, if one did (SIGKILL for an OOM kill or the process-limit watch). */
  signal?: string;
}

/** `registry.status().processes.limits`: what a sandbox may take from the machine here, and how it is held to it. */
export interface SandboxLimitsStatus {
  /** 'cgroup-v2': a systemd scope per sandbox; 'rlimit': limits on its processes; 'none': neither works here. */
  mechanism: 'cgroup-v2' | 'rlimit' | 'none';
  memory: { bytes: number; enforcedBy: LimitSupport['memory']; per?: 'sandbox' | 'process' };
  processes: {
    max: number;
    /** 'watch': no kernel limit here, conch's watch kills the biggest process group at the limit. */
    enforcedBy: LimitSupport['processes'] | 'watch';
    /** RLIMIT_NPROC without a user namespace counts the user's processes machine-wide ('user'). */
    scope?: 'sandbox' | 'user';
  };
  /** Each of these private tmpfs holds at most `bytes` (`sized` false: the kernel's default, half of RAM). */
  tmpfs: { bytes: number; paths: string[]; sized: boolean };
  /** An idle sandbox is closed after this long (0: never), freeing its tmpfs memory. */
  idleMs: number;
  /** What is weaker than it could be, and why (no delegated cgroup, root, an old bwrap, …). */
  reasons: string[];
}

/** How one sandbox's supervisor is started with its limits. */
export interface SupervisorLimits {
  resources: SandboxResources;
  /** argv before bwrap (systemd-run …). */
  outer: string[];
  /** argv after bwrap's `--` (prlimit …). */
  inner: string[];
  /** The pid namespace's pid_max to set once it runs, with nsenter at this path. */
  pidMax?: { value: number; nsenter: string };
  /** Variables the supervisor starts with (its process-limit watch, its oom_score_adj). */
  env: Record<string, string>;
  support: LimitSupport;
}

/** What a child started by a limited supervisor carries for its result (set by SupervisorClient.submit). */
export interface ChildLimits {
  config: SupervisorLimits;
  oom: OomCounter;
  cgroup: boolean;
}

/** A child's memory check for ManagedProcess's `resourceCheck` (undefined: no memory limit applies). */
export function memoryCheck(
  limits: ChildLimits | undefined,
):
  | ((outcome: {
      exitCode: number | null;
      signal: string | null;
      text: string;
    }) => ResourceLimitHit | undefined)
  | undefined {
  if (!limits || limits.config.resources.memoryBytes === 0) return undefined;
  return (outcome) =>
    memoryVerdict({
      limits: limits.config,
      oomRise: () => limits.oom.rise(),
      cgroup: limits.cgroup,
      ...outcome,
    });
}

/**
 * The oom_score_adj a sandbox's processes get: the kernel's OOM killer, when the machine runs out,
 * takes a sandboxed process before a host process of up to 1.5x its size.
 */
const SANDBOX_OOM_SCORE_ADJ = 500;

let units = 0;

/** The limits a profile's sandboxed supervisor starts with (undefined: not an isolated profile). */
export function supervisorLimits(
  profile: SandboxProfile,
  managerId: string,
  cgroup = true,
): SupervisorLimits | undefined {
  const resources = resourcesOf(profile);
  if (!resources) return undefined;
  const support = limitSupport({ cgroup });
  const unit = `conch-${managerId}-${process.pid}-${++units}.scope`;
  const wrap = limitWrap(resources, support, unit);
  const env: Record<string, string> = {};
  if (resources.processes > 0) {
    env[PROCESS_LIMIT_VAR] = String(resources.processes);
    if (wrap.outer.length) env[PIDS_EVENTS_VAR] = '1';
  }
  if (resources.memoryBytes > 0) env[OOM_SCORE_ADJ_VAR] = String(SANDBOX_OOM_SCORE_ADJ);
  return {
    resources,
    outer: wrap.outer,
    inner: wrap.inner,
    ...(wrap.pidMax !== undefined && support.nsenter
      ? { pidMax: { value: wrap.pidMax, nsenter: support.nsenter } }
      : {}),
    env,
    support,
  };
}

/**
 * Sets the pid_max of the pid namespace `pid` lives in: `nsenter` joins it and forks (a process
 * joining a pid namespace does not enter it itself, its children do), and the child writes the
 * sysctl, which is looked up in the writer's own pid namespace. Needs CAP_SYS_ADMIN over the
 * namespace (root: the sandbox's namespaces are its own). Resolves to why it failed, or undefined.
 */
export function setPidMax(nsenter: string, pid: number, value: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    let stderr = '';
    let child;
    try {
      child = spawn(
        nsenter,
        ['-t', String(pid), '-p', '--', '/bin/sh', '-c', `echo ${value} > /proc/sys/kernel/pid_max`],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
    } catch (error) {
      resolve(`nsenter could not start: ${(error as Error).message}`);
      return;
    }
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (text: string) => (stderr = (stderr + text).slice(-500)));
    child.on('error', (error) => resolve(`nsenter could not start: ${error.message}`));
    child.on('exit', (code, signal) =>
      resolve(
        code === 0
          ? undefined
          : `setting pid_max in the sandbox's pid namespace failed (${signal ?? `exit ${code}`}${stderr.trim() ? `: ${stderr.trim().split('\n').pop()}` : ''})`,
      ),
    );
  });
}

/**
 * The rlimit part alone (`prlimit …` to put after bwrap's `--`), for a sandbox bwrap the host
 * starts per command (no supervisor): no scope, no pid_max there.
 */
export function commandLimits(profile: SandboxProfile): string[] {
  const resources = resourcesOf(profile);
  return resources ? limitWrap(resources, limitSupport({ cgroup: false }), '').inner : [];
}

/** What status() says for sandboxes with `resources`. */
export function limitsStatus(
  resources: SandboxResources,
  extraReasons: readonly string[] = [],
  cgroup = true,
): SandboxLimitsStatus {
  const support = limitSupport({ cgroup });
  const sizing = tmpfsSizing();
  const processesBy: SandboxLimitsStatus['processes']['enforcedBy'] =
    resources.processes === 0 ? 'none' : support.processes === 'none' ? 'watch' : support.processes;
  return {
    mechanism: support.mechanism,
    memory: {
      bytes: resources.memoryBytes,
      enforcedBy: resources.memoryBytes === 0 ? 'none' : support.memory,
      ...(resources.memoryBytes > 0 && support.memoryScope ? { per: support.memoryScope } : {}),
    },
    processes: {
      max: resources.processes,
      enforcedBy: processesBy,
      ...(resources.processes > 0 && support.processesScope ? { scope: support.processesScope } : {}),
    },
    tmpfs: {
      bytes: resources.tmpfsBytes,
      paths: ['/dev/shm', '/run', '/var/tmp'],
      sized: sizing.ok && resources.tmpfsBytes > 0,
    },
    idleMs: resources.idleMs,
    reasons: [...support.reasons, ...(sizing.reason ? [sizing.reason] : []), ...extraReasons],
  };
}

/** The OOM kill counter a command's result is judged by: its sandbox's cgroup's, else the machine's. */
export function oomKills(cgroupDir: string | undefined): number | undefined {
  if (cgroupDir) return cgroupCounters(`${cgroupDir}/memory.events`)?.oom_kill;
  return systemOomKills();
}

/**
 * A sandbox's OOM kill counter, read only when a command died by a SIGKILL conch did not send (the
 * machine's /proc/vmstat costs ~0.1 ms to read: not for every command): `rise()` says how many
 * kills were counted since the previous look (the first look is when the sandbox became ready).
 */
export class OomCounter {
  private seen: number | undefined;
  private readonly source: () => string | undefined;
  constructor(cgroupDir: () => string | undefined) {
    this.source = cgroupDir;
  }

  /** The first look: when the sandbox is ready. */
  start(): void {
    this.seen = oomKills(this.source());
  }

  rise(): number {
    const now = oomKills(this.source());
    if (now === undefined) return 0;
    const before = this.seen ?? now;
    this.seen = now;
    return Math.max(0, now - before);
  }
}

/**
 * Whether a finished sandboxed command ran into its sandbox's memory limit, from the evidence
 * there is:
 *
 * - it ended by SIGKILL (or a shell reported 137) that conch did not send, and the OOM kill count
 *   rose since the sandbox's previous look: its cgroup's `memory.events` (the kill was in the
 *   sandbox, at its memory.max), or the machine's `/proc/vmstat` (the machine ran out; the kill
 *   may have been of another process, but this one died by SIGKILL meanwhile, which little else
 *   does);
 * - under a per-process RLIMIT_DATA the kernel refuses the allocation and the program reports it
 *   itself: it failed and its output ends with an allocation failure (MemoryError, "JavaScript heap
 *   out of memory", "Cannot allocate memory", …). This cannot be told for certain from a program
 *   that prints the same words for another reason; it is said as what the output shows.
 *
 * What cannot be known: which process the machine's OOM killer chose, when it was not this one;
 * and with two commands killed at once, the count is given to the first whose result is made.
 */
export function memoryVerdict(input: {
  limits: SupervisorLimits;
  /** OOM kills counted (its sandbox's cgroup's, or the machine's) since the previous look. */
  oomRise: () => number;
  cgroup: boolean;
  exitCode: number | null;
  signal: string | null;
  /** The end of its output (stderr, then stdout). */
  text: string;
}): ResourceLimitHit | undefined {
  const { limits, exitCode, signal } = input;
  const memory = limits.resources.memoryBytes;
  const killed = signal === 'SIGKILL' || exitCode === 137;
  const kills = killed ? input.oomRise() : 0;
  if (kills > 0) {
    return input.cgroup
      ? {
          kind: 'memory',
          mechanism: 'cgroup-v2',
          limit: memory,
          per: 'sandbox',
          evidence: `the kernel's OOM killer ended ${kills} process${kills > 1 ? 'es' : ''} in the sandbox at its memory limit (memory.events oom_kill)`,
          signal: 'SIGKILL',
        }
      : {
          kind: 'memory',
          mechanism: 'machine',
          limit: memory,
          ...(limits.support.memoryScope ? { per: limits.support.memoryScope } : {}),
          evidence: `the machine ran out of memory while it ran: the kernel's OOM killer ended ${kills} process${kills > 1 ? 'es' : ''} (/proc/vmstat oom_kill), and this command was ended by SIGKILL`,
          signal: 'SIGKILL',
        };
  }
  if (memory === 0 || limits.support.memory !== 'RLIMIT_DATA' || (exitCode === 0 && !signal))
    return undefined;
  const line = allocationFailure(input.text);
  if (!line) return undefined;
  return {
    kind: 'memory',
    mechanism: 'rlimit',
    limit: memory,
    per: 'process',
    evidence: `an allocation failed under the per-process memory limit (RLIMIT_DATA), as its output says: "${line}"`,
    ...(signal
      ? { signal }
      : exitCode !== null && exitCode > 128
        ? { signal: signalName(exitCode - 128) }
        : {}),
  };
}

/** The process-limit watch's report, as a result's resourceLimit. */
export function processVerdict(
  limits: SupervisorLimits,
  report: { tasks: number; groupTasks: number; limit: number },
): ResourceLimitHit {
  const by = limits.support.processes;
  return {
    kind: 'processes',
    mechanism:
      by === 'pids.max'
        ? 'cgroup-v2'
        : by === 'RLIMIT_NPROC'
          ? 'rlimit'
          : by === 'pid_max'
            ? 'pid-namespace'
            : 'watch',
    limit: report.limit,
    evidence: `the sandbox held ${report.tasks} tasks (processes and threads) at its limit of ${report.limit}; this command's process group held ${report.groupTasks} of them and was stopped`,
    signal: 'SIGKILL',
  };
}

const SIGNALS: Record<number, string> = { 6: 'SIGABRT', 9: 'SIGKILL', 11: 'SIGSEGV', 15: 'SIGTERM' };
function signalName(n: number): string {
  return SIGNALS[n] ?? `signal ${n}`;
}
