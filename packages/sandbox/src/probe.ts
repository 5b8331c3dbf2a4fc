import { execFile, spawnSync } from 'node:child_process';
// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { existsSync, readFileSync } from 'node:fs';
import { findBwrap } from './find-bwrap.js';

/** Whether bubblewrap can sandbox commands here. */
export interface SandboxStatus {
  available: boolean;
  /** The bwrap binary probed. */
  bwrap?: string;
  /** Its version (e.g. '0.8.0'). */
  version?: string;
  /** Why it is not available (bwrap missing, user namespaces refused, ...). */
  reason?: string;
  /**
   * The sandbox works here only inside a user namespace of its own (`--unshare-user`): root in a
   * container without CAP_SYS_ADMIN (podman's and Docker's default), where bwrap as root makes no
   * user namespace by itself and may not make the others. Every sandbox then gets `--unshare-user`.
   */
  userNamespace?: boolean;
  /** How to make it work here, when it does not (a container's flags, a package to install). */
  fix?: string;
}

const probes = new Map<string, Promise<SandboxStatus>>();
const settled = new Map<string, SandboxStatus>();

function firstLine(text: string): string {
  return text.trim().split('\n')[0] ?? '';
}

interface ProbeRun {
  ok: boolean;
  stdout: string;
  stderr: string;
  /** Why it failed (exit code, signal, timeout, spawn error), for a reason with no stderr. */
  failure?: string;
}

/** How long a probe command may take. */
const PROBE_TIMEOUT_MS = 10_000;

/** Why a probe command failed, in the same words for the synchronous and the asynchronous probe. */
function failureOf(
  file: string,
  end: { code?: number | null; signal?: string | null; timedOut?: boolean; error?: Error },
): string {
  if (end.timedOut) return `${file} did not finish within ${PROBE_TIMEOUT_MS / 1000} s`;
  if (typeof end.code === 'number') return `${file} exited with code ${end.code}`;
  if (end.signal) return `${file} was killed (${end.signal})`;
  return firstLine(end.error?.message ?? '') || `${file} failed`;
}

/**
 * Runs one probe command to its end; never rejects. node's execFile, not execa (which the design
 * names for one-off helpers): the probe sits on every conch-mcp start's path, where importing
 * execa alone costs ~60 ms (node 24, unbundled) against the probe's own ~10 ms.
 */
function runProbe(file: string, args: string[]): Promise<ProbeRun> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { encoding: 'utf8', timeout: PROBE_TIMEOUT_MS, killSignal: 'SIGKILL', maxBuffer: 1024 * 1024 },
      (error, stdout, stderr) => {
        if (!error) return resolve({ ok: true, stdout, stderr });
        const e = error as Error & { code?: unknown; killed?: boolean; signal?: string | null };
        const failure = failureOf(file, {
          code: typeof e.code === 'number' ? e.code : null,
          signal: e.signal ?? null,
          timedOut: e.killed === true && e.signal === 'SIGKILL',
          error: e,
        });
        resolve({ ok: false, stdout, stderr, failure });
      },
    );
  });
}

/** The same, synchronously (the first exposure of a gate set up without awaiting). */
function runProbeSync(file: string, args: string[]): ProbeRun {
  const run = spawnSync(file, args, { encoding: 'utf8', timeout: PROBE_TIMEOUT_MS, killSignal: 'SIGKILL' });
  const stdout = run.stdout ?? '';
  const stderr = run.stderr ?? '';
  if (run.status === 0 && !run.error) return { ok: true, stdout, stderr };
  const timedOut = (run.error as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT';
  return {
    ok: false,
    stdout,
    stderr,
    failure: failureOf(file, {
      code: timedOut ? null : run.status,
      signal: timedOut ? null : run.signal,
      timedOut,
      ...(run.error ? { error: run.error } : {}),
    }),
  };
}

/**
 * What a probe found: the sandbox ran, or why not — `version` (`bwrap --version` outside, run only
 * when the sandbox failed) tells a broken or missing bwrap from namespaces refused here.
 */
function statusFrom(bwrap: string, run: ProbeRun, version?: ProbeRun): SandboxStatus {
  if (run.ok) return { available: true, bwrap, version: versionOf(run.stdout) };
  if (!version?.ok)
    return { available: false, bwrap, reason: firstLine(version?.stderr ?? '') || version?.failure };
  return {
    available: false,
    bwrap,
    version: versionOf(version.stdout),
    reason: firstLine(run.stderr) || run.failure,
  };
}

async function probe(bwrap: string): Promise<SandboxStatus> {
  const run = await runProbe(bwrap, probeArgs(bwrap));
  if (run.ok) return statusFrom(bwrap, run);
  // Root in a container: the namespaces may be allowed inside a user namespace of its own.
  const inUserNs = process.geteuid?.() === 0 ? await runProbe(bwrap, probeArgs(bwrap, true)) : undefined;
  if (inUserNs?.ok) return { ...statusFrom(bwrap, inUserNs), userNamespace: true };
  return withFix(statusFrom(bwrap, run, await runProbe(bwrap, ['--version'])), inUserNs);
}

/** Whether this process runs in a container (podman, Docker, Kubernetes, systemd-nspawn, LXC). */
export function inContainer(): boolean {
  if (existsSync('/run/.containerenv') || existsSync('/.dockerenv')) return true;
  if (process.env.container || process.env.KUBERNETES_SERVICE_HOST) return true;
  try {
    return /\/(docker|kubepods|libpod|lxc|containerd)/.test(readFileSync('/proc/1/cgroup', 'utf8'));
  } catch {
    return false;
  }
}

/**
 * A failed status with what would make it work here, measured (podman 4.3, bwrap 0.8, Linux 6.1):
 * root in a default container needs `--cap-add SYS_ADMIN --cap-add NET_ADMIN` (or `--security-opt
 * unmask=ALL`, with which conch runs the sandbox in a user namespace of its own); a non-root user
 * needs `--security-opt unmask=ALL` (the masked /proc paths forbid a fresh /proc). Outside a
 * container: unprivileged user namespaces (the kernel.unprivileged_userns_clone or
 * kernel.apparmor_restrict_unprivileged_userns sysctl).
 */
function withFix(status: SandboxStatus, inUserNs?: ProbeRun): SandboxStatus {
  if (status.available || !status.version) return status;
  const root = process.geteuid?.() === 0;
  const reason =
    inUserNs && !inUserNs.ok
      ? `${status.reason}; in a user namespace of its own: ${firstLine(inUserNs.stderr) || inUserNs.failure}`
      : status.reason;
  const fix = inContainer()
    ? root
      ? 'run the container with --cap-add SYS_ADMIN --cap-add NET_ADMIN, or (podman) --security-opt unmask=ALL, or --privileged'
      : 'run the container with --security-opt unmask=ALL (podman; Docker: --security-opt systempaths=unconfined --security-opt seccomp=unconfined --security-opt apparmor=unconfined)'
    : 'allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; Ubuntu 23.10+: an AppArmor profile for bwrap, or kernel.apparmor_restrict_unprivileged_userns=0)';
  return { ...status, ...(reason ? { reason } : {}), fix };
}

/**
 * Whether the sandboxes of `bwrap` (default: the one on PATH) must make a user namespace of their
 * own (the probe found the sandbox works only so). False before a probe finished.
 */
export function needsUserNamespace(bwrap: string | undefined = findBwrap()): boolean {
  return bwrap !== undefined && settled.get(bwrap)?.userNamespace === true;
}

/**
 * Probes bubblewrap once per process (per bwrap binary; cached): a real read-only sandbox without
 * network running `bwrap --version` (and, only when it fails, `bwrap --version` outside, to tell a
 * broken bwrap from refused namespaces). Never rejects.
 */
export function probeSandbox(options: { bwrap?: string } = {}): Promise<SandboxStatus> {
  const bwrap = options.bwrap ?? findBwrap();
  if (!bwrap) {
    return Promise.resolve({
      available: false,
      reason: 'bwrap was not found on PATH (apt-get install bubblewrap)',
    });
  }
  let result = probes.get(bwrap);
  if (!result) {
    result = probe(bwrap)
      .catch((error: unknown): SandboxStatus => ({ available: false, bwrap, reason: String(error) }))
      .then((status) => {
        settled.set(bwrap, status);
        return status;
      });
    probes.set(bwrap, result);
  }
  return result;
}

/** The probe result for a bwrap binary if a probe already finished (starts none). */
export function settledSandboxStatus(bwrap: string): SandboxStatus | undefined {
  return settled.get(bwrap);
}

/**
 * The probe's real sandbox, with the namespaces the isolated profiles use, runs `bwrap --version`
 * inside itself: one spawn both proves the sandbox works and names the version (a start of
 * conch-mcp pays for the probe before it answers).
 */
function probeArgs(bwrap: string, userNamespace = false): string[] {
  return [
    ...(userNamespace ? ['--unshare-user'] : []),
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--unshare-pid',
    '--unshare-net',
    '--',
    bwrap,
    '--version',
  ];
}

function versionOf(stdout: string): string {
  return firstLine(stdout)
    .replace(/^bubblewrap\s+/, '')
    .trim();
}

/**
 * The probe, synchronously (for a plugin's synchronous setup that must choose a default now): the
 * cached answer when a probe already ran, else one real sandbox (as probeSandbox), blocking for a
 * few milliseconds once per process. Shares the cache with probeSandbox().
 */
export function probeSandboxSync(options: { bwrap?: string } = {}): SandboxStatus {
  const bwrap = options.bwrap ?? findBwrap();
  if (!bwrap) return { available: false, reason: 'bwrap was not found on PATH (apt-get install bubblewrap)' };
  const known = settled.get(bwrap);
  if (known) return known;
  const run = runProbeSync(bwrap, probeArgs(bwrap));
  let status: SandboxStatus;
  if (run.ok) status = statusFrom(bwrap, run);
  else {
    const inUserNs = process.geteuid?.() === 0 ? runProbeSync(bwrap, probeArgs(bwrap, true)) : undefined;
    status = inUserNs?.ok
      ? { ...statusFrom(bwrap, inUserNs), userNamespace: true }
      : withFix(statusFrom(bwrap, run, runProbeSync(bwrap, ['--version'])), inUserNs);
  }
  settled.set(bwrap, status);
  if (!probes.has(bwrap)) probes.set(bwrap, Promise.resolve(status));
  return status;
}
