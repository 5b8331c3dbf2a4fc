import { basename, dirname, join, relative, resolve } from 'node:path';
import type { PluginCandidate } from './discovery.js';
import { digestFile, digestPackage } from './package-digest.js';
import {
  isWithin,
  realPathOf,
  type TrustPin,
  type TrustStore,
  UNTRUSTED_REASONS,
  type UntrustedItem,
} from './trust-store.js';

/** Which found items the host accepts now: none (the pins decide), every one, or those at these paths. */
export type TrustAcceptance = 'pinned' | 'all' | readonly string[];

export interface PluginTrustVerdict {
  /** Real path of the registry's cwd. */
  workspace: string;
  /** Whether conch had never run in this workspace: what is there was trusted and pinned. */
  firstUse: boolean;
  /** Candidates to load. */
  trusted: PluginCandidate[];
  /** Candidates not loaded, with why. */
  untrusted: UntrustedItem[];
  /** Candidates loaded on the host's word that the pins alone would not have loaded (re-pinned). */
  accepted: UntrustedItem[];
  /** The pin paths of every candidate that lies in a workspace (judged against the pins). */
  checked: string[];
}

interface Judged {
  candidate: PluginCandidate;
  load: boolean;
  pin?: [string, TrustPin];
  untrusted?: UntrustedItem;
  accepted?: UntrustedItem;
}

interface Exposure {
  /** Where the pin is kept: the package's real directory, or the link's own place. */
  key: string;
  /** The workspaces it lies in (a sandbox in any of them could have written it). */
  containing: string[];
  /** Reached through a link inside a workspace to a directory outside every workspace. */
  link: boolean;
}

/**
 * Where a candidate lies relative to the workspaces conch has run in. A package whose real
 * directory lies in one is pinned by its contents; one outside them all but reached through an
 * entry inside one (a symbolic link a sandboxed command could have made) is pinned by where the link
 * leads; anything else (a global install, a host-named directory elsewhere) is not pinned.
 */
async function exposureOf(
  candidate: PluginCandidate,
  workspaces: readonly string[],
  workspace: string,
  lexicalCwd: string,
): Promise<Exposure | undefined> {
  const containing = workspaces.filter((w) => isWithin(candidate.dir, w));
  if (containing.length > 0) return { key: candidate.dir, containing, link: false };
  const found = resolve(candidate.path);
  if (isWithin(found, lexicalCwd)) {
    return { key: join(workspace, relative(lexicalCwd, found)), containing: [workspace], link: true };
  }
  const parent = await realPathOf(dirname(found));
  const through = workspaces.filter((w) => isWithin(parent, w));
  if (through.length > 0) return { key: join(parent, basename(found)), containing: through, link: true };
  return undefined;
}

/**
 * Decides which discovered plugin packages may be imported, against the trust store, and pins what
 * it trusts. In a workspace conch has never run in, everything in it is trusted and pinned (no
 * sandbox of conch's has written there yet), and the workspace's conch.config.json (or its absence)
 * is pinned too. Afterwards a package in a workspace loads when its pin matches; a new or changed one
 * does not, unless the host accepts it (`accept`), which re-pins it.
 */
export async function judgePluginCandidates(options: {
  store: TrustStore;
  cwd: string;
  candidates: readonly PluginCandidate[];
  accept?: TrustAcceptance;
}): Promise<PluginTrustVerdict> {
  const { store, candidates } = options;
  const accept = options.accept ?? 'pinned';
  const workspace = await realPathOf(options.cwd);
  const lexicalCwd = resolve(options.cwd);
  const state = await store.read();
  const firstUse = !Object.hasOwn(state.workspaces, workspace);
  const workspaces = [...new Set([...Object.keys(state.workspaces), workspace])];
  const acceptedPaths = new Set<string>();
  if (Array.isArray(accept)) {
    for (const path of accept as readonly string[]) {
      acceptedPaths.add(resolve(path));
      acceptedPaths.add(await realPathOf(path));
    }
  }
  const now = new Date().toISOString();
  const verdict: PluginTrustVerdict = {
    workspace,
    firstUse,
    trusted: [],
    untrusted: [],
    accepted: [],
    checked: [],
  };
  const pins: [string, TrustPin][] = [];

  const judged = await Promise.all(
    candidates.map(async (candidate): Promise<Judged> => {
      const exposure = await exposureOf(candidate, workspaces, workspace, lexicalCwd);
      if (!exposure) return { candidate, load: true };
      const { key, containing, link } = exposure;
      verdict.checked.push(key);
      const accepted =
        accept === 'all' ||
        acceptedPaths.has(key) ||
        acceptedPaths.has(candidate.dir) ||
        acceptedPaths.has(resolve(candidate.path));
      const item = (reason: UntrustedItem['reason']): UntrustedItem => ({
        kind: 'plugin',
        path: key,
        package: candidate.packageName,
        reason,
      });
      const digest = link ? { digest: `link:${candidate.dir}` } : await digestPackage(candidate.dir);
      if ('tooLarge' in digest) {
        // Never pinned: a host's accept loads it this once.
        const reported = item(UNTRUSTED_REASONS.tooLarge);
        return accepted
          ? { candidate, load: true, accepted: reported }
          : { candidate, load: false, untrusted: reported };
      }
      const pinned = state.pins[key];
      if (pinned?.kind === 'plugin' && pinned.digest === digest.digest) return { candidate, load: true };
      const pin: [string, TrustPin] = [
        key,
        { kind: 'plugin', digest: digest.digest, package: candidate.packageName, pinnedAt: now },
      ];
      // First use: only what lies in this workspace alone (another workspace's sandbox may have written the rest).
      if (!pinned && firstUse && containing.every((w) => w === workspace)) {
        return { candidate, load: true, pin };
      }
      const reported = item(pinned ? UNTRUSTED_REASONS.changed : UNTRUSTED_REASONS.new);
      return accepted
        ? { candidate, load: true, pin, accepted: reported }
        : { candidate, load: false, untrusted: reported };
    }),
  );
  for (const entry of judged) {
    if (entry.load) verdict.trusted.push(entry.candidate);
    if (entry.pin) pins.push(entry.pin);
    if (entry.untrusted) verdict.untrusted.push(entry.untrusted);
    if (entry.accepted) verdict.accepted.push(entry.accepted);
  }

  const configPath = join(workspace, 'conch.config.json');
  const config = firstUse && !state.pins[configPath] ? await digestFile(configPath) : undefined;
  if (firstUse || pins.length > 0) {
    await store.update((fresh) => {
      fresh.workspaces[workspace] ??= { since: now };
      for (const [key, pin] of pins) fresh.pins[key] = pin;
      if (config && !fresh.pins[configPath]) {
        fresh.pins[configPath] = { kind: 'config', digest: config.digest, pinnedAt: now };
      }
    });
  }
  return verdict;
}
