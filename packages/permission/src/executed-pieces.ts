// Owns the pieces a command executes and how each is read: a whole file, one `scripts` entry of a
// package.json, a hooks directory; their digests (sha256 of the counted part, ABSENT, or UNREADABLE
// and why), the keys that name them the same way at grant and at decision, and the bounded reads.
import { createHash } from 'node:crypto';
import { readdirSync, readlinkSync, type Stats } from 'node:fs';
import { posix } from 'node:path';
import { realpathOf } from './fs-snapshot.js';
import { readRegularFileSync, safeLstatSync, safeStatSync } from '@conch/core';

/** The digest of something that does not exist: nothing runs from it. */
export const ABSENT = 'absent';
/** Digests that start with this say why the thing cannot be read: it never matches a snapshot. */
export const UNREADABLE = 'unreadable: ';
/** The digest of what a bounded read did not reach. */
export const BEYOND_BOUND = `${UNREADABLE}beyond what conch reads`;

/** One thing a command executes: a file, or the part of one that counts. */
export interface Piece {
  /** What and where: `file:/ws/Makefile`, `script:/ws/package.json#test:unit`, `hooks:/ws/.git/hooks`. */
  key: string;
  /** How a reason names it: `Makefile`, `package.json's scripts["test:unit"]`, `.git/hooks`. */
  label: string;
  /** The file or directory, relative to the workspace when inside it. */
  file: string;
  /** `sha256:…` of the counted part, ABSENT, or UNREADABLE and why. */
  digest: string;
}

/** The reads of one computation: where, how much is left, and what was read already. */
export interface Reader {
  workspaceRoot: string;
  home: string;
  budget: { files: number; bytes: number; exceeded?: string };
  files: Map<string, Buffer | string>;
  scripts: Map<string, Record<string, unknown> | string>;
}

/** At most this much is read to decide on one command. */
export const DECISION_LIMITS = { files: 2_000, bytes: 64 * 1024 * 1024 };
/** At most this much is read to snapshot every host rule when the gate is made. */
export const GRANT_LIMITS = { files: 4_000, bytes: 64 * 1024 * 1024 };
/** A larger file is not read: it counts as unreadable. */
const MAX_FILE_BYTES = 8 * 1024 * 1024;

export function reader(
  workspaceRoot: string,
  home: string,
  limits: { files: number; bytes: number } = DECISION_LIMITS,
): Reader {
  return { workspaceRoot, home, budget: { ...limits }, files: new Map(), scripts: new Map() };
}

export function statQuiet(path: string): Stats | undefined | 'error' {
  try {
    return safeStatSync(path, { throwIfNoEntry: false });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOTDIR' || code === 'ENOENT' || code === 'ELOOP' ? undefined : 'error';
  }
}

/** A file's bytes, ABSENT, or UNREADABLE and why (read once per computation, within the budget). */
export function read(path: string, r: Reader): Buffer | string {
  const hit = r.files.get(path);
  if (hit !== undefined) return hit;
  let out: Buffer | string;
  const st = statQuiet(path);
  if (st === undefined) out = ABSENT;
  else if (st === 'error') out = `${UNREADABLE}it cannot be looked up`;
  else if (!st.isFile()) out = `${UNREADABLE}it is not a regular file`;
  else if (st.size > MAX_FILE_BYTES) out = `${UNREADABLE}it is larger than ${MAX_FILE_BYTES >> 20} MiB`;
  else if (r.budget.files <= 0 || r.budget.bytes < st.size) {
    r.budget.exceeded ??= 'there are more files or bytes to read than conch reads';
    out = BEYOND_BOUND;
  } else {
    try {
      // Regular and within the bound when it is opened, not only when it was stat'ed (a FIFO
      // swapped in between would block the host in open()).
      out = readRegularFileSync(path, { maxBytes: MAX_FILE_BYTES });
      r.budget.files--;
      r.budget.bytes -= out.length;
    } catch (error) {
      out = `${UNREADABLE}${(error as NodeJS.ErrnoException).code ?? 'it cannot be read'}`;
    }
  }
  r.files.set(path, out);
  return out;
}

function sha256(data: string | Buffer): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

function digestOf(bytes: Buffer | string): string {
  return typeof bytes === 'string' ? bytes : sha256(bytes);
}

/** A path as a reason shows it: relative to the workspace inside it, `~/…` in the home directory. */
export function shown(path: string, r: Reader): string {
  const ws = r.workspaceRoot;
  if (path === ws) return '.';
  if (path.startsWith(`${ws}/`)) return path.slice(ws.length + 1);
  if (path.startsWith(`${r.home}/`)) return `~/${path.slice(r.home.length + 1)}`;
  return path;
}

/**
 * A path as keys name it: its directory's real path, so a workspace reached through a symlink
 * (macOS's /tmp) names the same file at grant and at decision.
 */
function canonical(path: string): string {
  const dir = realpathOf(posix.dirname(path));
  return dir === undefined ? path : posix.join(dir, posix.basename(path));
}

export function wholeFile(path: string, r: Reader): Piece {
  const file = shown(path, r);
  return { key: `file:${canonical(path)}`, label: file, file, digest: digestOf(read(path, r)) };
}

/** A package.json's `scripts`, or why it cannot be read (a missing file has none). */
export function scriptsOf(pkg: string, r: Reader): Record<string, unknown> | string {
  const hit = r.scripts.get(pkg);
  if (hit !== undefined) return hit;
  const bytes = read(pkg, r);
  let out: Record<string, unknown> | string;
  if (typeof bytes === 'string') out = bytes === ABSENT ? {} : bytes;
  else {
    try {
      const json = JSON.parse(bytes.toString('utf8').replace(/^\uFEFF/, '')) as unknown;
      const scripts =
        json !== null && typeof json === 'object' ? (json as { scripts?: unknown }).scripts : null;
      if (json === null || typeof json !== 'object' || Array.isArray(json))
        out = `${UNREADABLE}it is not a JSON object`;
      else if (scripts === undefined) out = {};
      else if (scripts === null || typeof scripts !== 'object' || Array.isArray(scripts))
        out = `${UNREADABLE}its scripts are not an object`;
      else out = scripts as Record<string, unknown>;
    } catch {
      out = `${UNREADABLE}it is not valid JSON`;
    }
  }
  r.scripts.set(pkg, out);
  return out;
}

/** One top-level key of a package.json (husky 4's `husky`): only it counts, not the rest of the file. */
export function packageKey(pkg: string, name: string, r: Reader): Piece {
  const file = shown(pkg, r);
  const piece = {
    key: `package:${canonical(pkg)}#${name}`,
    label: `${file}'s ${JSON.stringify(name)}`,
    file,
  };
  const bytes = read(pkg, r);
  if (typeof bytes === 'string') return { ...piece, digest: bytes };
  try {
    const json = JSON.parse(bytes.toString('utf8').replace(/^\uFEFF/, '')) as unknown;
    if (json === null || typeof json !== 'object' || Array.isArray(json))
      return { ...piece, digest: `${UNREADABLE}it is not a JSON object` };
    const value = Object.hasOwn(json, name) ? (json as Record<string, unknown>)[name] : undefined;
    return { ...piece, digest: value === undefined ? ABSENT : sha256(JSON.stringify(value)) };
  } catch {
    return { ...piece, digest: `${UNREADABLE}it is not valid JSON` };
  }
}

/** One `scripts` entry of a package.json: only it counts, not the rest of the file. */
export function scriptEntry(pkg: string, name: string, r: Reader): Piece {
  const file = shown(pkg, r);
  const piece = {
    key: `script:${canonical(pkg)}#${name}`,
    label: `${file}'s scripts[${JSON.stringify(name)}]`,
    file,
  };
  const scripts = scriptsOf(pkg, r);
  if (typeof scripts === 'string') return { ...piece, digest: scripts };
  const value = Object.hasOwn(scripts, name) ? scripts[name] : undefined;
  return { ...piece, digest: value === undefined ? ABSENT : sha256(JSON.stringify(value)) };
}

/**
 * A hooks directory: the names, modes and contents of every entry but `*.sample` (what git may run),
 * symlinks by their text and target, subdirectories two levels deep.
 */
export function hooksDir(dir: string, r: Reader): Piece {
  const file = shown(dir, r);
  return { key: `hooks:${canonical(dir)}`, label: file, file, digest: listing(dir, r, 0) };
}

function listing(dir: string, r: Reader, depth: number): string {
  const st = statQuiet(dir);
  if (st === undefined) return ABSENT;
  if (st === 'error') return `${UNREADABLE}it cannot be looked up`;
  if (!st.isDirectory()) return `${UNREADABLE}it is not a directory`;
  let names: string[];
  try {
    names = readdirSync(dir)
      .filter((n) => !n.endsWith('.sample'))
      .sort();
  } catch (error) {
    return `${UNREADABLE}${(error as NodeJS.ErrnoException).code ?? 'it cannot be listed'}`;
  }
  if (names.length > 256) return `${UNREADABLE}it holds more than 256 entries`;
  const hash = createHash('sha256');
  for (const name of names) {
    const path = posix.join(dir, name);
    hash.update(`${name}\0`);
    try {
      const l = safeLstatSync(path);
      if (l.isSymbolicLink()) hash.update(`link\0${readlinkSync(path)}\0`);
    } catch {
      hash.update('gone\0');
      continue;
    }
    const target = statQuiet(path);
    if (target === undefined || target === 'error') {
      hash.update('dangling\0');
      continue;
    }
    if (target.isDirectory()) {
      if (depth >= 2) return `${UNREADABLE}it nests directories deeper than conch reads`;
      const sub = listing(path, r, depth + 1);
      if (sub.startsWith(UNREADABLE)) return sub;
      hash.update(`dir\0${sub}\0`);
    } else if (target.isFile()) {
      const bytes = read(path, r);
      if (typeof bytes === 'string' && bytes !== ABSENT) return bytes;
      hash.update(`file\0${(target.mode & 0o7777).toString(8)}\0${digestOf(bytes)}\0`);
    } else hash.update(`other\0${target.mode}\0`);
  }
  return `sha256:${hash.digest('hex')}`;
}

/** Pieces by key, the first of each kept. */
export function unique(pieces: Iterable<Piece>): Piece[] {
  const out = new Map<string, Piece>();
  for (const p of pieces) if (!out.has(p.key)) out.set(p.key, p);
  return [...out.values()];
}
