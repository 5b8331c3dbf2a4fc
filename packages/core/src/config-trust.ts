import { basename, dirname, join } from 'node:path';
import { UntrustedConfigError } from './errors/untrusted-config-error.js';
import { digestFile } from './package-digest.js';
import {
  isWithin,
  realPathOf,
  type TrustStore,
  UNTRUSTED_REASONS,
  type UntrustedItem,
  type UntrustedReason,
} from './trust-store.js';

/** A config file as checked against the trust store: its digest and the bytes to parse. */
export interface CheckedConfigFile {
  /** Where the pin is kept: the file's own place (its directory's real path plus its name). */
  path: string;
  /** `sha256:<hex>`, `none` (no file), `not-a-file`, `too-large` or `unreadable`. */
  digest: string;
  /** The bytes that were hashed (parse these: a second read could see another file). */
  bytes?: Buffer;
  /** What the pins alone would have refused and the host accepted (`accept: true`). */
  accepted?: UntrustedItem;
}

/** The config file's own place: its directory resolved, its name kept (a link there is its own entry). */
async function placeOf(file: string): Promise<string> {
  return join(await realPathOf(dirname(file)), basename(file));
}

function reasonFor(pinned: string | undefined, digest: string): UntrustedReason {
  if (digest === 'too-large') return UNTRUSTED_REASONS.tooLarge;
  if (pinned === undefined || pinned === 'none') return UNTRUSTED_REASONS.new;
  if (digest === 'none') return UNTRUSTED_REASONS.removed;
  return UNTRUSTED_REASONS.changed;
}

/**
 * Checks a conch.config.json before a host loads it. A file in a workspace conch has run in (where
 * its sandboxed commands could write) must match what conch last loaded from that place: a new,
 * changed or removed config throws `UntrustedConfigError` (`CONFIG_UNTRUSTED`) naming the file,
 * unless `accept` (the human said so). A file in no such workspace is not pinned and passes (a
 * workspace's first use, or a config kept elsewhere). Returns the bytes to parse; after the registry
 * exists, pinConfigFile() records them.
 */
export async function checkConfigFile(
  file: string,
  options: { store: TrustStore; accept?: boolean },
): Promise<CheckedConfigFile> {
  const path = await placeOf(file);
  const [state, read] = await Promise.all([options.store.read(), digestFile(path)]);
  const checked: CheckedConfigFile = {
    path,
    digest: read.digest,
    ...(read.bytes === undefined ? {} : { bytes: read.bytes }),
  };
  const containing = Object.keys(state.workspaces).filter((w) => isWithin(path, w));
  if (containing.length === 0) return checked;
  const pinned = state.pins[path]?.digest;
  if (pinned === read.digest && read.digest !== 'too-large') return checked;
  if (pinned === undefined && read.digest === 'none') return checked;
  const item: UntrustedItem = { kind: 'config', path, reason: reasonFor(pinned, read.digest) };
  if (options.accept) return { ...checked, accepted: item };
  // Named by the innermost workspace that holds it.
  const workspace = containing.reduce((a, b) => (b.length > a.length ? b : a));
  throw new UntrustedConfigError(item, workspace);
}

/**
 * Records a checked config as what conch loaded, once the registry has recorded its workspace: a
 * config inside a workspace conch has run in is pinned when it has no pin yet or the host accepted
 * it; one outside every workspace is left unpinned (no sandbox of conch's can write it).
 */
export async function pinConfigFile(
  checked: CheckedConfigFile,
  options: { store: TrustStore; accept?: boolean },
): Promise<void> {
  const state = await options.store.read();
  if (!Object.keys(state.workspaces).some((w) => isWithin(checked.path, w))) return;
  const pinned = state.pins[checked.path];
  if (pinned?.digest === checked.digest) return;
  if (pinned && !options.accept) return;
  await options.store.update((fresh) => {
    fresh.pins[checked.path] = { kind: 'config', digest: checked.digest, pinnedAt: new Date().toISOString() };
  });
}
