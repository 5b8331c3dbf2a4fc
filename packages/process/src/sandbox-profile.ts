import { realpathSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { InvalidSpawnOptionError } from './errors.js';

/**
 * The kernel wall around a command (bubblewrap), set up once per profile around a supervisor:
 *
 * - `none`: no sandbox.
 * - `read-only`: the whole filesystem read-only, a private /tmp (an empty tmpfs), a minimal /dev
 *   and no network (a new network namespace with only its own loopback).
 * - `workspace`: the filesystem as the user sees it (writable wherever the user can write), the
 *   network shared, and every `readOnlyPaths` entry bind-mounted read-only over itself (e.g. shell
 *   rc files, `.git/hooks`). Entries that do not exist are skipped (reported by `status()`).
 */
export type SandboxProfile =
  { kind: 'none' } | { kind: 'read-only' } | { kind: 'workspace'; readOnlyPaths: readonly string[] };

/** Which sandbox really applied to a process. */
export type SandboxKind = SandboxProfile['kind'];

export const NO_SANDBOX: SandboxProfile = { kind: 'none' };

/** Checks a `sandbox` option; relative read-only paths resolve against `cwd`. */
export function normalizeSandboxProfile(value: unknown, cwd: string, field = 'sandbox'): SandboxProfile {
  if (value === undefined) return NO_SANDBOX;
  const expected =
    "{ kind: 'none' } | { kind: 'read-only' } | { kind: 'workspace', readOnlyPaths: string[] }";
  if (typeof value !== 'object' || value === null) throw new InvalidSpawnOptionError(field, expected, value);
  const kind = (value as { kind?: unknown }).kind;
  if (kind === 'none' || kind === 'read-only') return { kind };
  if (kind !== 'workspace') throw new InvalidSpawnOptionError(`${field}.kind`, expected, kind);
  const paths = (value as { readOnlyPaths?: unknown }).readOnlyPaths;
  if (!Array.isArray(paths) || paths.some((p) => typeof p !== 'string' || p.length === 0)) {
    throw new InvalidSpawnOptionError(`${field}.readOnlyPaths`, 'an array of non-empty path strings', paths);
  }
  const resolved = [
    ...new Set((paths as string[]).map((p) => (isAbsolute(p) ? resolve(p) : resolve(cwd, p)))),
  ];
  return { kind, readOnlyPaths: resolved.sort() };
}

/** One string per distinct profile (the manager keeps one supervisor per key). */
export function sandboxKey(profile: SandboxProfile): string {
  return profile.kind === 'workspace' ? `workspace:${JSON.stringify(profile.readOnlyPaths)}` : profile.kind;
}

export interface SandboxArgs {
  /** bwrap arguments before `--`. */
  args: string[];
  /** readOnlyPaths that do not exist (bwrap would create mount points for them on the real filesystem). */
  skipped: string[];
}

function existing(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

const underTmp = (path: string) => path === '/tmp' || path.startsWith('/tmp/');

/**
 * What must stay visible for code at `path` to load inside the read-only profile: the outermost
 * `node_modules` above its real path (a pnpm layout keeps a package's platform binaries in sibling
 * directories of that tree), else its directory. Matters when an install lives under /tmp, which
 * the profile replaces with an empty tmpfs.
 */
export function installRoot(path: string): string {
  const real = existing(path) ?? path;
  const at = real.indexOf('/node_modules/');
  return at >= 0 ? real.slice(0, at + '/node_modules'.length) : dirname(real);
}

/**
 * bwrap arguments for a profile. `keepVisible` lists paths the sandboxed supervisor and its
 * commands need (the workspace, node, this package, node-pty): in the read-only profile those under
 * /tmp are bound back (read-only) over the private /tmp, which would otherwise hide them.
 *
 * Why these mounts:
 * - No fresh procfs (`--proc /proc`): mounting one needs privilege over the PID namespace, i.e.
 *   `--unshare-pid` for an unprivileged user, and a private PID namespace would make the pids the
 *   supervisor reports meaningless to the host (kills, cookie sweeps, PTY tree walks). The
 *   recursive bind of `/` carries the host's /proc mount as it is, in the host's PID namespace.
 * - bwrap binds are `nodev`, so device nodes under a plain bind of `/` are unusable (no
 *   /dev/null, no /dev/ptmx). `read-only` mounts bwrap's minimal /dev (null, zero, random, tty, a
 *   private devpts for PTYs) — never the host's, whose block devices would be writable;
 *   `workspace` dev-binds the host's /dev, so PTYs live in the host's devpts (tty numbers agree
 *   with the host's view of /proc).
 * - No `--die-with-parent`: it would SIGKILL the supervisor the moment the host dies, before it
 *   could kill what it started (the children are not in a PID namespace that would take them along).
 */
export function sandboxArgs(profile: SandboxProfile, keepVisible: readonly string[] = []): SandboxArgs {
  const skipped: string[] = [];
  if (profile.kind === 'none') return { args: [], skipped };
  if (profile.kind === 'read-only') {
    const args = ['--ro-bind', '/', '/', '--dev', '/dev', '--tmpfs', '/tmp'];
    const rebound = new Set<string>();
    for (const path of keepVisible) {
      const real = existing(path);
      if (real && underTmp(real) && real !== '/tmp' && !rebound.has(real)) {
        rebound.add(real);
        args.push('--ro-bind', real, real);
      }
    }
    args.push('--unshare-net', '--new-session');
    return { args, skipped };
  }
  const args = ['--bind', '/', '/', '--dev-bind', '/dev', '/dev'];
  for (const path of profile.readOnlyPaths) {
    // A symlink is protected at its target (a mount follows it); the link itself stays replaceable.
    const real = existing(path);
    if (real === undefined) skipped.push(path);
    else args.push('--ro-bind', real, real);
  }
  args.push('--new-session');
  return { args, skipped };
}
