import { readdirSync } from 'node:fs';
import { basename, dirname, isAbsolute, posix, relative, resolve } from 'node:path';
import picomatch from 'picomatch';
import {
  ENV_FILE,
  ENV_TEMPLATE,
  HG_PROTECTED,
  RC_FILES,
  SYSTEM_RC,
  SYSTEM_RC_DIRS,
  isToolConfigFileName,
  TOOL_CONFIG_DIRS,
  TOOL_CONFIG_FILES,
} from '@conch/sandbox';
import { linkAt, realpathOf, statOf } from './fs-snapshot.js';
import { safeLstatSync } from '@conch/core';

/**
 * Base names a pattern target is tested against, whether or not such a file exists yet: would
 * `rm .e*` or `> .*rc` reach a protected file? Only names with a leading dot: a `*` does not match
 * them, so a pattern that does names them on purpose. A protected name without one (`mise.toml`)
 * is matched by every `*`; `rm -rf "$dir"` or `rm build/*` must not read as aimed at it. Where such
 * a file exists the pattern's expansion now finds it (globNow below), and the sandbox's guard
 * refuses to make one.
 */
const PROTECTED_SAMPLES = [
  ...RC_FILES,
  ...TOOL_CONFIG_DIRS,
  ...[...TOOL_CONFIG_FILES].filter((name) => name.startsWith('.')),
  '.env',
  '.env.local',
  '.env.production',
  '.envrc',
  '.ssh',
  '.git',
  '.hg',
  '.bashrc.d',
  '.zshrc.d',
];
/** Directory names a pattern's directory part is tested against. */
const PROTECTED_DIR_SAMPLES = [
  '.ssh',
  '.git',
  '.hg',
  '.bashrc.d',
  '.zshrc.d',
  'hooks',
  '.config',
  'git',
  'fish',
  'modules',
  ...TOOL_CONFIG_DIRS,
];
/** Writing these is harmless: they are not files. */
const HARMLESS = /^\/dev\/(null|zero|full|stdout|stderr|tty|fd\/[0-2])$/;

export interface ProtectedGlob {
  glob: string;
  test: (path: string) => boolean;
}

export interface PathContext {
  home: string;
  workspaceRoot: string;
  /** The host's extra protected globs. */
  extra: readonly ProtectedGlob[];
  /**
   * Names protected at any depth, a file or a directory with everything in it (config
   * `protectedFiles`, default `Gemfile`, `Gemfile.lock`, `.aws`).
   */
  names?: ReadonlySet<string>;
}

/**
 * Compiles the host's protected globs with picomatch (`{a,b}`, `**`, dotfiles matched). A glob
 * with a `/` matches absolute paths and paths relative to the workspace; one without matches the
 * base name anywhere.
 */
export function compileProtected(globs: readonly string[]): ProtectedGlob[] {
  return globs.map((glob) => {
    const matcher = picomatch(glob, { dot: true, basename: !glob.includes('/') });
    return { glob, test: (path: string) => matcher(path) };
  });
}

/**
 * The home directory of the user the command runs as, in a write target a command's grammar
 * names without the command line spelling it (`git config --global` writes `~/.gitconfig`): a
 * NUL, which no shell word can hold, then the path under HOME.
 */
export const HOME_MARK = '\u0000HOME';

/** Why writing `abs` (an absolute, normalized path) is refused, or undefined when it is not protected. */
export function protectedReason(abs: string, ctx: PathContext): string | undefined {
  const base = basename(abs);
  const parts = abs.split('/');
  if (ENV_FILE.test(base) && !ENV_TEMPLATE.test(base)) return `${abs} is an environment file (.env*)`;
  if (parts.includes('.ssh')) return `${abs} is inside an .ssh directory`;
  const toolDir = parts.find((p) => TOOL_CONFIG_DIRS.has(p));
  if (toolDir) return `${abs} is in ${toolDir}/, settings a tool of the user runs outside any sandbox`;
  if (isToolConfigFileName(base)) return `${abs} is read by a tool of the user outside any sandbox (${base})`;
  const named = ctx.names?.has(base) ? base : parts.find((p) => ctx.names?.has(p) === true);
  if (named !== undefined)
    return named === base
      ? `${abs} is a protected file (${base})`
      : `${abs} is inside a protected directory (${named})`;
  if (parts.some((p) => p === '.bashrc.d' || p === '.zshrc.d'))
    return `${abs} is sourced by a shell start-up file`;
  const bare = parts.findIndex((p, i) => p.endsWith('.git') && p !== '.git' && parts[i + 1] === 'hooks');
  if (bare >= 0) return `${abs} is a git hook of a bare repository`;
  const gitAt = parts.indexOf('.git');
  if (gitAt >= 0) {
    const rest = parts.slice(gitAt + 1).filter((p) => p !== '');
    if (rest.length === 0) return `${abs} is a .git directory`;
    if (rest[0] === 'hooks') return `${abs} is a git hook (.git/hooks)`;
    if ((rest[0] === 'config' || rest[0] === 'config.worktree') && rest.length === 1)
      return `${abs} is the git config (.git/${rest[0]})`;
    // Submodule and worktree git dirs inside .git: their hooks, configs and the pointers git follows.
    if (rest[0] === 'modules' || rest[0] === 'worktrees') {
      if (rest.includes('hooks')) return `${abs} is a git hook (.git/${rest[0]}/…/hooks)`;
      const last = rest[rest.length - 1]!;
      if (['config', 'config.worktree', 'commondir', 'gitdir'].includes(last))
        return `${abs} is a git config or pointer (.git/${rest[0]}/…/${last})`;
    }
  }
  const hgAt = parts.lastIndexOf('.hg');
  if (hgAt >= 0) {
    const rest = parts.slice(hgAt + 1).filter((p) => p !== '');
    if (rest.length === 0) return `${abs} is a Mercurial repository's .hg directory`;
    if (rest.length === 1 && HG_PROTECTED.includes(rest[0]!))
      return `${abs} is read by every hg command in that repository (.hg/${rest[0]})`;
  }
  if (RC_FILES.has(base)) return `${abs} is a shell, git or Mercurial start-up file`;
  const home = ctx.home.endsWith('/') ? ctx.home : `${ctx.home}/`;
  if (abs.startsWith(`${home}.config/git/`) || abs === `${home}.config/git`)
    return `${abs} is the user's git config`;
  if (abs.startsWith(`${home}.config/hg/`) || abs === `${home}.config/hg`)
    return `${abs} is the user's Mercurial config`;
  if (abs.startsWith(`${home}.config/fish/`)) return `${abs} is a fish start-up file`;
  if (abs.startsWith(`${home}.config/environment.d/`)) return `${abs} sets the user's session environment`;
  if (SYSTEM_RC.includes(abs) || SYSTEM_RC_DIRS.some((d) => abs.startsWith(d) || `${abs}/` === d))
    return `${abs} is a system shell start-up file`;
  for (const g of ctx.extra) {
    const rel = relative(ctx.workspaceRoot, abs);
    if (g.test(abs) || (!rel.startsWith('..') && !isAbsolute(rel) && g.test(rel)))
      return `${abs} matches the protected path pattern ${JSON.stringify(g.glob)}`;
  }
  return undefined;
}

/**
 * Resolves a path the way the kernel does: component by component from `/` or the working
 * directory, following each symlink before a later `..` applies (so `link/../x` lands next to the
 * link's target, not next to the link). The final component is followed only when `followFinal`
 * (a write through `>` follows it; `rm` and `mv` act on the link itself). Missing components are
 * kept as written (a `..` after one fails at run time anyway).
 */
export function resolveLikeKernel(path: string, cwd: string, followFinal = true): string {
  return walk(path, realCwd(cwd), followFinal, 0);
}

function walk(path: string, cwd: string, followFinal: boolean, hops: number): string {
  const components = path.split('/');
  while (components.length > 1 && components[components.length - 1] === '') components.pop();
  let current = path.startsWith('/') ? '/' : cwd;
  let missing = false;
  for (let i = 0; i < components.length; i++) {
    const c = components[i]!;
    if (c === '' || c === '.') continue;
    if (c === '..') {
      current = dirname(current);
      continue;
    }
    const next = current === '/' ? `/${c}` : `${current}/${c}`;
    const last = i === components.length - 1;
    if (missing) {
      current = next;
      continue;
    }
    const link = linkAt(next);
    if (link === undefined) {
      missing = true;
      current = next;
      continue;
    }
    if (link !== null && (!last || followFinal) && hops < 40) {
      current = walk(link, current, true, hops + 1);
      continue;
    }
    current = next;
  }
  return current;
}

function realCwd(cwd: string): string {
  return realpathOf(cwd) ?? resolve(cwd);
}

export type TargetCheck =
  | { kind: 'protected'; reason: string }
  | { kind: 'harmless' }
  | { kind: 'ok'; paths: string[] }
  | { kind: 'unknown'; reason: string };

/**
 * Checks a known write target against the protected paths, in every working directory the
 * command may run in: the lexical path, the kernel's resolution (symlinks before `..`), and — for
 * an existing file with several hard links — whether it is a protected file under another name.
 */
export function checkTarget(
  value: string,
  cwds: readonly string[] | undefined,
  ctx: PathContext,
  options: { followFinal?: boolean } = {},
): TargetCheck {
  if (value.startsWith(HOME_MARK)) value = posix.join(ctx.home, value.slice(HOME_MARK.length));
  if (HARMLESS.test(value)) return { kind: 'harmless' };
  if (value === '') return { kind: 'unknown', reason: 'the target is empty' };
  const bases = isAbsolute(value) ? ['/'] : cwds;
  if (!bases) {
    const reason = protectedReason(`/${value}`.replace(/\/+/g, '/'), { ...ctx, extra: [] });
    if (reason) return { kind: 'protected', reason: `${value} is protected (${stripPath(reason)})` };
    return {
      kind: 'unknown',
      reason: `the working directory of ${value} is unknown (an earlier cd that cannot be resolved)`,
    };
  }
  const paths: string[] = [];
  for (const base of bases) {
    let lexical = posix.resolve(base, value);
    let from = value;
    if (lexical.startsWith('/proc/')) {
      // The command's own view of itself: /proc/self/root (or any pid's, in one mount namespace)
      // is `/`, /proc/self/cwd is its working directory. Anything else under /proc is unknown.
      const proc = /^\/proc\/(self|thread-self|\d+)\/(root|cwd)(\/.*)?$/.exec(lexical);
      if (!proc || (proc[2] === 'cwd' && /^\d/.test(proc[1]!)))
        return {
          kind: 'unknown',
          reason: `${value} is under /proc, which the gate cannot resolve for the command`,
        };
      from = `${proc[2] === 'root' ? '/' : base}${proc[3] ?? ''}`;
      lexical = posix.resolve(from);
    }
    const kernel = resolveLikeKernel(from, base, options.followFinal ?? true);
    for (const p of new Set([lexical, kernel])) {
      const reason = protectedReason(p, ctx);
      if (reason) {
        return {
          kind: 'protected',
          reason:
            p !== lexical && !protectedReason(lexical, ctx)
              ? `${lexical} resolves to ${p}: ${reason}`
              : reason,
        };
      }
    }
    const link = hardLinkOfProtected(kernel, ctx);
    if (link) return { kind: 'protected', reason: `${kernel} is a hard link of ${link}` };
    paths.push(kernel);
  }
  return { kind: 'ok', paths };
}

function stripPath(reason: string): string {
  return reason.replace(/^\/\S* /, '');
}

/** An existing file with more than one link: is it the same inode as a protected file we know? */
function hardLinkOfProtected(path: string, ctx: PathContext): string | undefined {
  const st = statOf(path);
  if (!st || !st.isFile() || st.nlink < 2) return undefined;
  for (const candidate of knownProtectedFiles(ctx)) {
    const other = statOf(candidate);
    if (other && other.ino === st.ino && other.dev === st.dev) return candidate;
  }
  return undefined;
}

/** knownProtectedFiles by home and workspace root: they depend on nothing else. */
const protectedFilesCache = new Map<string, readonly string[]>();

function knownProtectedFiles(ctx: PathContext): readonly string[] {
  const key = `${ctx.home}\u0000${ctx.workspaceRoot}`;
  const hit = protectedFilesCache.get(key);
  if (hit) return hit;
  const out: string[] = [];
  for (const name of RC_FILES) out.push(resolve(ctx.home, name));
  for (const name of ['.env', '.env.local', '.envrc', '.git/config', '.hg/hgrc'])
    out.push(resolve(ctx.workspaceRoot, name));
  for (const name of ['authorized_keys', 'id_rsa', 'id_ed25519', 'config'])
    out.push(resolve(ctx.home, '.ssh', name));
  if (protectedFilesCache.size > 64) protectedFilesCache.clear();
  protectedFilesCache.set(key, out);
  return out;
}

/**
 * Checks a write target only known as a glob pattern (an unquoted `*`, `?` or `[…]`): protected
 * when the directory part is protected or the name part can match a protected name.
 */
export function checkPatternTarget(
  pattern: string,
  cwds: readonly string[] | undefined,
  ctx: PathContext,
): TargetCheck {
  const slash = pattern.lastIndexOf('/');
  const dir = slash > 0 ? pattern.slice(0, slash) : slash === 0 ? '/' : '.';
  const namePattern = pattern.slice(slash + 1);
  if (namePattern !== '') {
    const re = shellGlob(namePattern);
    const hit = PROTECTED_SAMPLES.find((name) => re.test(name));
    if (hit)
      return { kind: 'protected', reason: `the pattern ${pattern} can match ${hit}, a protected file` };
  }
  if (!/[*?[]/.test(dir)) {
    const check = checkTarget(dir, cwds, ctx);
    if (check.kind === 'protected' && !/environment file/.test(check.reason)) return check;
  } else {
    for (const part of dir.split('/')) {
      if (part === '') continue;
      const partRe = shellGlob(part);
      const hit = PROTECTED_DIR_SAMPLES.find((n) => partRe.test(n));
      if (hit)
        return {
          kind: 'protected',
          reason: `the pattern ${pattern} can reach a protected directory (${hit})`,
        };
    }
  }
  // What the shell would make of it now: every existing path the pattern matches.
  for (const base of cwds ?? []) {
    for (const match of globNow(pattern, base)) {
      const check = checkTarget(match, [base], ctx);
      if (check.kind === 'protected')
        return { kind: 'protected', reason: `the pattern ${pattern} matches ${match}: ${check.reason}` };
    }
  }
  return { kind: 'unknown', reason: `${pattern} is a pattern the shell expands at run time` };
}

/**
 * The paths a glob matches now, segment by segment from `base` as bash matches them (a leading
 * dot only by a dot; at most `limit` paths). Hand-written: picomatch matches names, and fs.glob
 * is not in Node 20.
 */
function globNow(pattern: string, base: string, limit = 512): string[] {
  let current = [pattern.startsWith('/') ? '/' : base];
  for (const seg of pattern.split('/')) {
    if (seg === '') continue;
    const next: string[] = [];
    if (!/[*?[]/.test(seg)) {
      const name = seg.replace(/\\(.)/g, '$1');
      for (const c of current) next.push(posix.join(c, name));
    } else {
      const re = shellGlob(seg);
      for (const c of current) {
        let names: string[];
        try {
          names = readdirSync(c);
        } catch {
          continue;
        }
        for (const n of names) if (re.test(n) && next.length < limit) next.push(posix.join(c, n));
      }
    }
    current = next;
    if (current.length === 0) break;
  }
  return current;
}

/** Whether `abs` is `/`, the home directory, the workspace root, or an ancestor of one of them. */
export function rootLike(abs: string, ctx: PathContext): string | undefined {
  const candidates = new Set([normalize(abs), normalize(realish(abs))]);
  for (const p of candidates) {
    if (p === '/') return 'the filesystem root';
    if (p === normalize(ctx.home)) return 'the home directory';
    if (p === normalize(ctx.workspaceRoot)) return 'the workspace root';
    if (isAncestor(p, ctx.workspaceRoot)) return `${p}, which contains the workspace root`;
    if (isAncestor(p, ctx.home)) return `${p}, which contains the home directory`;
  }
  return undefined;
}

function normalize(p: string): string {
  const n = posix.normalize(p);
  return n.length > 1 && n.endsWith('/') ? n.slice(0, -1) : n;
}

function isAncestor(dir: string, of: string): boolean {
  const rel = relative(dir, of);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}

/** The path with symlinks resolved as far as it exists. */
export function realish(abs: string): string {
  // When lstat fails (a missing component), realpath fails too: skip it (and its exception).
  const real = linkAt(abs) === undefined ? undefined : realpathOf(abs);
  return real ?? resolveLikeKernel(abs, '/', true);
}

export { HARMLESS as HARMLESS_TARGET };

/**
 * The paths inside an existing directory tree, relative to it, breadth first (symlinks are not
 * followed; at most `limit` entries): what a recursive copy of it brings along.
 */
export function treeEntries(root: string, limit = 4096): string[] {
  const out: string[] = [];
  let st;
  try {
    st = safeLstatSync(root);
  } catch {
    return out;
  }
  if (!st.isDirectory()) return out;
  const queue = [''];
  while (queue.length > 0 && out.length < limit) {
    const rel = queue.shift()!;
    let entries;
    try {
      entries = readdirSync(posix.join(root, rel), { withFileTypes: true });
    } catch {
      continue;
    }
    for (const e of entries) {
      if (out.length >= limit) break;
      const child = rel ? `${rel}/${e.name}` : e.name;
      out.push(child);
      if (e.isDirectory()) queue.push(child);
    }
  }
  return out;
}

/**
 * A bash glob (one path component) as a regular expression: picomatch with bash's `[!…]`
 * negation read as `[^…]` (picomatch takes `!` literally there); dotfiles only by a leading dot,
 * as bash matches file names, unless `dot`.
 */
export function shellGlob(pattern: string, dot = false): RegExp {
  return picomatch.makeRe(pattern.replace(/(^|[^\\])\[!/g, '$1[^'), { dot });
}
