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
  const version = await execa(bwrap, ['--version'], { reject: false, timeout: 10_000 });
  if (version.failed) {
    return { available: false, bwrap, reason: firstLine(version.stderr) || version.shortMessage };
  }
  const v = version.stdout.replace(/^bubblewrap\s+/, '').trim();
  // bwrap may exist where it cannot work (unprivileged user namespaces disabled, seccomp):
  // only a real sandbox with the namespaces the profiles use tells.
  const run = await execa(bwrap, ['--ro-bind', '/', '/', '--dev', '/dev', '--unshare-net', '--', 'true'], {
    reject: false,
    timeout: 10_000,
  });
  if (run.failed) {
    return { available: false, bwrap, version: v, reason: firstLine(run.stderr) || run.shortMessage };
  }
  return { available: true, bwrap, version: v };
}

/**
 * Probes bubblewrap once per process (per bwrap binary; cached): `bwrap --version`, then a real
 * read-only sandbox without network running `true`. Never rejects.
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
