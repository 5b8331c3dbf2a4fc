import { spawnSync } from 'node:child_process';
import { findBwrap } from './bubblewrap-executor.js';

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

async function probe(bwrap: string): Promise<SandboxStatus> {
  // execa, as the design names it for one-off helper processes: a few ms once per process, where
  // its ergonomics (reject: false, timeout, stripped output) matter more than spawn cost. Loaded
  // here, not at the top: importing it takes ~150 ms, which every host would pay at startup.
  const { execa } = await import('execa');
  const run = await execa(bwrap, probeArgs(bwrap), { reject: false, timeout: 10_000 });
  if (!run.failed) return { available: true, bwrap, version: versionOf(run.stdout) };
  // Why not: bwrap missing or broken (its --version fails too), or namespaces refused here.
  const version = await execa(bwrap, ['--version'], { reject: false, timeout: 10_000 });
  if (version.failed) {
    return { available: false, bwrap, reason: firstLine(version.stderr) || version.shortMessage };
  }
  return {
    available: false,
    bwrap,
    version: versionOf(version.stdout),
    reason: firstLine(run.stderr) || run.shortMessage,
  };
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
  const run = spawnSync(bwrap, probeArgs(bwrap), { encoding: 'utf8', timeout: 10_000 });
  let status: SandboxStatus;
  if (run.status === 0) {
    status = { available: true, bwrap, version: versionOf(run.stdout) };
  } else {
    const version = spawnSync(bwrap, ['--version'], { encoding: 'utf8', timeout: 10_000 });
    status =
      version.status !== 0
        ? {
            available: false,
            bwrap,
            reason: firstLine(version.stderr ?? '') || String(version.error ?? 'bwrap --version failed'),
          }
        : {
            available: false,
            bwrap,
            version: versionOf(version.stdout),
            reason: firstLine(run.stderr ?? '') || String(run.error ?? 'the probe sandbox failed'),
          };
  }
  settled.set(bwrap, status);
  if (!probes.has(bwrap)) probes.set(bwrap, Promise.resolve(status));
  return status;
}
