import { lstatSync, readlinkSync, realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, relative, resolve, sep } from 'node:path';
import { globToRegExp, hasGlobChars } from './glob.js';

/** Shell start-up files: writing one runs code in every later shell. */
const RC_FILES = new Set([
  '.bashrc',
  '.bash_profile',
  '.bash_login',
  '.bash_logout',
  '.profile',
  '.zshrc',
  '.zshenv',
  '.zprofile',
  '.zlogin',
  '.zlogout',
  '.kshrc',
  '.mkshrc',
  '.cshrc',
  '.tcshrc',
  '.inputrc',
  'config.fish',
]);
const RC_PATHS = ['/etc/profile', '/etc/bash.bashrc', '/etc/zsh/', '/etc/profile.d/', '/etc/environment'];
/** Base names a glob target is tested against: would `rm .e*` or `> .*rc` reach a protected file? */
const PROTECTED_SAMPLES = [
  '.env',
  '.env.local',
  '.envrc',
  '.ssh',
  '.bashrc',
  '.zshrc',
  '.profile',
  '.bash_profile',
];

export interface PathContext {
  cwd: string | undefined;
  home: string;
  workspaceRoot: string;
  extra: readonly { glob: string; re: RegExp }[];
}

/** Compiles the host's extra protected globs. */
export function compileProtected(globs: readonly string[]): { glob: string; re: RegExp }[] {
  return globs.map((glob) => ({ glob, re: globToRegExp(glob) }));
}

/** Why writing `abs` is refused, or undefined when it is not protected. */
export function protectedReason(abs: string, ctx: PathContext): string | undefined {
  const base = basename(abs);
  const parts = abs.split(sep);
  if (/^\.env(\..*|rc)?$/.test(base) || base.startsWith('.env'))
    return `${abs} is an environment file (.env*)`;
  if (parts.includes('.ssh')) return `${abs} is inside an .ssh directory`;
  const gitAt = parts.lastIndexOf('.git');
  if (gitAt >= 0) {
    const rest = parts.slice(gitAt + 1);
    if (rest[0] === 'hooks') return `${abs} is a git hook (.git/hooks)`;
    if (rest[0] === 'config' && rest.length === 1) return `${abs} is the git config (.git/config)`;
    if (rest.length === 0) return `${abs} is a .git directory`;
  }
  if (RC_FILES.has(base)) return `${abs} is a shell start-up file`;
  if (RC_PATHS.some((p) => abs === p.replace(/\/$/, '') || (p.endsWith('/') && abs.startsWith(p))))
    return `${abs} is a system shell start-up file`;
  for (const { glob, re } of ctx.extra) {
    const rel = relative(ctx.workspaceRoot, abs);
    if (re.test(abs) || re.test(rel) || (!glob.includes('/') && re.test(base)))
      return `${abs} matches the protected path pattern ${JSON.stringify(glob)}`;
  }
  return undefined;
}

/**
 * Expands what a path word can be proven to mean: `~`, `~/x`, `$HOME`, `${HOME}`, `$PWD`, quotes.
 * Returns undefined when the word depends on anything else (other variables, substitutions).
 */
export function expandKnown(word: string, literal: boolean, ctx: PathContext): string | undefined {
  if (literal) return word;
  let text = word;
  if (/^"[^"]*"$/.test(text)) text = text.slice(1, -1);
  if (text === '~' || text.startsWith('~/')) text = ctx.home + text.slice(1);
  text = text.replace(/\$\{HOME\}|\$HOME(?![A-Za-z0-9_])/g, ctx.home);
  if (ctx.cwd !== undefined) text = text.replace(/\$\{PWD\}|\$PWD(?![A-Za-z0-9_])/g, ctx.cwd);
  if (/[$`"'\\~]/.test(text)) return undefined;
  return text;
}

/** Absolute path of a target relative to the (possibly unknown) working directory. */
export function absolute(target: string, ctx: PathContext): string | undefined {
  if (isAbsolute(target)) return resolve(target);
  if (ctx.cwd === undefined) return undefined;
  return resolve(ctx.cwd, target);
}

/** The path with symlinks resolved as far as it exists, dangling links followed too. */
export function realish(abs: string, hops = 0): string {
  let head = abs;
  const tail: string[] = [];
  for (let i = 0; i < 256; i++) {
    try {
      const real = realpathSync(head);
      return tail.length ? resolve(real, ...[...tail].reverse()) : real;
    } catch {
      // A dangling symlink (`envlink -> .env` before .env exists) still says where a write lands.
      try {
        if (hops < 40 && lstatSync(head).isSymbolicLink()) {
          const target = resolve(dirname(head), readlinkSync(head));
          return realish(tail.length ? resolve(target, ...[...tail].reverse()) : target, hops + 1);
        }
      } catch {
        // not there at all: look at the parent
      }
      const parent = dirname(head);
      if (parent === head) return abs;
      tail.push(basename(head));
      head = parent;
    }
  }
  return abs;
}

export type WriteCheck =
  { kind: 'protected'; reason: string } | { kind: 'unknown'; reason: string } | { kind: 'ok'; abs: string };

/** Checks one write target (literal or not, maybe a glob) against the protected paths. */
export function checkWriteTarget(word: string, literal: boolean, ctx: PathContext): WriteCheck {
  const expanded = expandKnown(word, literal, ctx);
  if (expanded === undefined) {
    // Even an unresolvable word names a protected file when its last part is one (`$D/.env`).
    const tailBase = word.replace(/["']/g, '').split('/').pop() ?? '';
    if (tailBase && !/[$`*?[]/.test(tailBase)) {
      const reason = protectedReason(`/${tailBase}`, { ...ctx, extra: [] });
      if (reason)
        return {
          kind: 'protected',
          reason: `${word} names a protected file (${reason.replace(/^\/\S+ /, '')})`,
        };
    }
    return { kind: 'unknown', reason: `cannot tell where ${word} points` };
  }
  if (!literal && hasGlobChars(expanded)) {
    const dir = expanded.includes('/') ? expanded.slice(0, expanded.lastIndexOf('/')) || '/' : '.';
    const pattern = expanded.slice(expanded.lastIndexOf('/') + 1);
    const dirAbs = hasGlobChars(dir) ? undefined : absolute(dir, ctx);
    if (dirAbs) {
      const dirReason = protectedReason(dirAbs, ctx) ?? protectedReason(realish(dirAbs), ctx);
      if (dirReason && !dirReason.includes('environment file'))
        return { kind: 'protected', reason: dirReason };
    }
    const re = globToRegExp(pattern, { shellDot: true });
    const hit = PROTECTED_SAMPLES.find((name) => re.test(name));
    if (hit) return { kind: 'protected', reason: `the pattern ${word} can match ${hit}, a protected file` };
    return { kind: 'unknown', reason: `${word} is a pattern the shell expands at run time` };
  }
  const abs = absolute(expanded, ctx);
  if (abs === undefined) {
    const reason = protectedReason(`/${expanded}`, { ...ctx, extra: [] });
    if (reason)
      return { kind: 'protected', reason: `${expanded} is protected (${reason.replace(/^\/\S+ /, '')})` };
    return {
      kind: 'unknown',
      reason: `the working directory of ${word} is unknown (an earlier non-literal cd)`,
    };
  }
  const reason = protectedReason(abs, ctx) ?? protectedReason(realish(abs), ctx);
  if (reason) {
    const real = realish(abs);
    return {
      kind: 'protected',
      reason: real !== abs && !protectedReason(abs, ctx) ? `${abs} resolves to ${real}: ${reason}` : reason,
    };
  }
  return { kind: 'ok', abs };
}

/** Whether `abs` is `/`, the home directory, the workspace root, or an ancestor of one of them. */
export function isRootLike(abs: string, ctx: PathContext): string | undefined {
  const candidates = [abs, realish(abs)];
  for (const p of candidates) {
    if (p === '/') return 'the filesystem root';
    if (p === ctx.home) return 'the home directory';
    if (p === ctx.workspaceRoot) return 'the workspace root';
    const rel = relative(p, ctx.workspaceRoot);
    if (rel && !rel.startsWith('..') && !isAbsolute(rel)) return `${p}, which contains the workspace root`;
    const relHome = relative(p, ctx.home);
    if (relHome && !relHome.startsWith('..') && !isAbsolute(relHome))
      return `${p}, which contains the home directory`;
  }
  return undefined;
}
