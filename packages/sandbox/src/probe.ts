import { execFile, spawnSync } from 'node:child_process';
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
  return statusFrom(bwrap, run, run.ok ? undefined : await runProbe(bwrap, ['--version']));
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
function probeArgs(bwrap: string): string[] {
  return [
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
  const status = statusFrom(bwrap, run, run.ok ? undefined : runProbeSync(bwrap, ['--version']));
  settled.set(bwrap, status);
  if (!probes.has(bwrap)) probes.set(bwrap, Promise.resolve(status));
  return status;
}
