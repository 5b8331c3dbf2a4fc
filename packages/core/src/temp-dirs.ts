import {
  closeSync,
  constants,
  fstatSync,
  mkdtempSync,
  openSync,
  readdirSync,
  // eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
  readFileSync,
  readlinkSync,
  readSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { removeSync, safeLstatSync } from './stale-stat.js';

/*
 * conch's temp dirs (`conch-*` in $TMPDIR) are removed by dispose() or by an exit hook. A host that
 * is SIGKILLed (or loses power) runs neither: its dirs, and what Chromium keeps beside them, stay in
 * /tmp for good. Each dir therefore carries an owner record, and the next conch host of the same
 * user removes the dirs whose owner is provably dead. No library does this for a directory we own
 * (tmp-promise / tmp clean up only at their own process's exit), hence this file.
 */

/** The file in each owned temp dir that names the process owning it. */
export const TEMP_OWNER_FILE = '.conch-owner';

interface Owner {
  /** The owning process's pid, in its own pid namespace. */
  pid: number;
  /** Its start time in clock ticks since boot (/proc/<pid>/stat field 22): tells a reused pid apart. */
  start: string;
  /** The kernel's boot id: a dir from an earlier boot has no live owner. */
  boot: string;
  /** The owner's pid namespace (`pid:[4026531836]`): pids are compared only within one. */
  pidns: string;
}

function readSmall(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** Field 22 of /proc/<pid>/stat (after the comm, which may hold spaces and parentheses). */
function startTime(pid: number | 'self'): string | undefined {
  const stat = readSmall(`/proc/${pid}/stat`);
  if (stat === undefined) return undefined;
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

let self: Owner | null | undefined;
/** This process as an owner, or null where /proc does not say (not Linux, /proc not mounted). */
function selfOwner(): Owner | null {
  if (self !== undefined) return self;
  try {
    // A /proc of another pid namespace (a process unshared without remounting it) would look pids up
    // among strangers: no records, no sweeps then.
    if (readlinkSync('/proc/self') !== String(process.pid)) return (self = null);
    const start = startTime('self');
    const boot = readSmall('/proc/sys/kernel/random/boot_id')?.trim();
    const pidns = readlinkSync('/proc/self/ns/pid');
    self = start && boot ? { pid: process.pid, start, boot, pidns } : null;
  } catch {
    self = null;
  }
  return self;
}

/** Reads a dir's owner record without following a link; undefined when absent or malformed. */
function readOwner(dir: string): Owner | undefined {
  let fd: number;
  try {
    fd = openSync(
      join(dir, TEMP_OWNER_FILE),
      constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
    );
  } catch {
    return undefined;
  }
  try {
    if (!fstatSync(fd).isFile()) return undefined;
    const buffer = Buffer.alloc(512);
    const n = readSync(fd, buffer, 0, buffer.length, 0);
    const value = JSON.parse(buffer.subarray(0, n).toString('utf8')) as Partial<Owner>;
    if (
      typeof value.pid !== 'number' ||
      typeof value.start !== 'string' ||
      typeof value.boot !== 'string' ||
      typeof value.pidns !== 'string'
    )
      return undefined;
    return value as Owner;
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * Whether `owner` is provably gone: from an earlier boot, or in this pid namespace with its pid
 * free or taken by a process started at another time. An owner in another pid namespace (a
 * container sharing /tmp) cannot be looked up, so it counts as alive.
 */
function ownerGone(owner: Owner, me: Owner): boolean {
  if (owner.boot !== me.boot) return true;
  if (owner.pidns !== me.pidns) return false;
  if (owner.pid === me.pid) return owner.start !== me.start;
  const start = startTime(owner.pid);
  return start === undefined ? !pidExists(owner.pid) : start !== owner.start;
}

/**
 * Whether any process (a zombie included: its pid is not free) has this pid. Not @conch/process's
 * pidAlive, which counts a zombie as gone and lives in a package that depends on this one.
 */
function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes the singleton dir (`org.chromium.Chromium.*`) that a Chromium profile's `SingletonSocket`
 * link names: Chromium keeps it in its $TMPDIR, outside the profile, and only its clean exit
 * removes it. The link is not trusted to name what gets removed: only a directory of this user,
 * directly in one of `parents` (default: $TMPDIR), with Chromium's prefix. Returns whether it
 * removed one. Used by the sweep below and by @conch/browser when it removes a profile.
 */
export function removeChromiumSingleton(
  profileDir: string,
  parents: readonly string[] = [tmpdir()],
): boolean {
  const uid = process.getuid?.();
  let target: string;
  try {
    target = readlinkSync(join(profileDir, 'SingletonSocket'));
  } catch {
    return false; // no link: nothing of it outside the profile
  }
  const singleton = dirname(target);
  if (!parents.includes(dirname(singleton))) return false;
  if (!basename(singleton).startsWith('org.chromium.Chromium.')) return false;
  try {
    const st = safeLstatSync(singleton);
    if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) return false;
    removeSync(singleton, { recursive: true, force: true });
    return true;
  } catch {
    return false; // gone already
  }
}

/** The singleton dirs of the Chromium profiles directly in `dir` (a dead host's temp dir). */
function removeChromiumSingletons(dir: string, root: string): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (name.startsWith('chrome-profile-')) removeChromiumSingleton(join(dir, name), [root, tmpdir()]);
  }
}

const swept = new Set<string>();

/**
 * Removes the `conch-*` dirs in `root` that this user's conch hosts left behind when they died
 * without cleaning up (SIGKILL, a crash of the machine): only directories owned by this uid whose
 * owner record names a process that is provably gone (see ownerGone). A dir without a record (an
 * older conch's, a `keepTempFiles` one) is never touched. Returns the paths removed. Runs once per
 * root and process through makeTempDir; callable directly.
 */
export function sweepStaleTempDirs(root: string = tmpdir()): string[] {
  const me = selfOwner();
  const uid = process.getuid?.();
  if (!me || uid === undefined) return [];
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!name.startsWith('conch-')) continue;
    const dir = join(root, name);
    try {
      const st = safeLstatSync(dir);
      if (!st.isDirectory() || st.uid !== uid) continue;
    } catch {
      continue;
    }
    const owner = readOwner(dir);
    if (!owner || !ownerGone(owner, me)) continue;
    removeChromiumSingletons(dir, root);
    try {
      removeSync(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      // another sweeper, or a file we cannot remove: left for the next one
    }
  }
  return removed;
}

/**
 * mkdtemp(`root/prefix`) that records this process as its owner, so that a later conch host can
 * remove it if this one dies without doing so (see sweepStaleTempDirs, run here once per root).
 * `owned: false` makes a dir no sweep ever removes (`keepTempFiles`).
 */
export function makeTempDir(prefix: string, options: { root?: string; owned?: boolean } = {}): string {
  const root = options.root ?? tmpdir();
  if (!swept.has(root)) {
    swept.add(root);
    sweepStaleTempDirs(root);
  }
  const dir = mkdtempSync(join(root, prefix));
  const me = options.owned === false ? null : selfOwner();
  if (me) {
    try {
      writeFileSync(join(dir, TEMP_OWNER_FILE), JSON.stringify(me), { flag: 'wx', mode: 0o600 });
    } catch {
      // a dir without a record is only never swept
    }
  }
  return dir;
}
