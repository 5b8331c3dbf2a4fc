import type { CommandFacts, Part, RuleContext } from '../facts.js';
import { posix } from 'node:path';
import { statOf } from '../fs-snapshot.js';
import { checkPatternTarget, checkTarget, treeEntries, type TargetCheck } from '../paths.js';
import { escapeGlob, type Arg } from '../words.js';

/**
 * Rule `safety:protectedPaths`: no command writes, removes, moves, links or changes the mode of a
 * protected path — `.env*`, anything in `.ssh/`, `.git/hooks/`, `.git/config`, shell and git
 * start-up files, the host's globs — however the path is spelled (quotes, `~`, `$HOME`, `..`
 * after a symlink, a hard link, a target-directory option, a download's output option, a glob
 * that can match one). `git config` of a key that makes git run a program counts as a write to
 * the git config.
 */
export function protectedPaths(facts: CommandFacts, ctx: RuleContext): Part[] {
  const parts: Part[] = [];
  const deny = (reason: string) =>
    parts.push({ command: facts.shown, verdict: 'deny', reason, rule: 'safety:protectedPaths' });
  for (const w of facts.writes) {
    const check = targetCheck(w.target, facts.cwds, ctx, w.followFinal);
    if (check.kind === 'protected') {
      deny(`${w.via} would modify ${check.reason}`);
      return parts;
    }
  }
  for (const d of facts.intoDirs) {
    const check = targetCheck(d.dir, facts.cwds, ctx, true);
    if (check.kind === 'protected') {
      deny(`${d.via} writes files into ${check.reason}`);
      return parts;
    }
  }
  for (const c of facts.copies) {
    const reason = copyIntoProtected(c, facts.cwds, ctx);
    if (reason) {
      deny(reason);
      return parts;
    }
  }
  if (facts.gitExecKey) deny(`it sets ${facts.gitExecKey} in a git config, which makes git run a program`);
  return parts;
}

export function targetCheck(
  target: Arg,
  cwds: readonly string[] | undefined,
  ctx: RuleContext,
  followFinal: boolean,
): TargetCheck {
  if (target.fields) {
    const paths: string[] = [];
    for (const field of target.fields) {
      const check = checkTarget(field, cwds, ctx.paths, { followFinal });
      if (check.kind === 'protected' || check.kind === 'unknown') return check;
      if (check.kind === 'ok') paths.push(...check.paths);
    }
    return paths.length === 0 ? { kind: 'harmless' } : { kind: 'ok', paths };
  }
  return checkPatternTarget(target.pattern, cwds, ctx.paths);
}

/**
 * Where a copy into a directory lands: `dir/<name>` for each source, and for a recursive copy
 * every path of the source's tree as it exists now, under `dir/` (`cp -r dots/. ~`) and under
 * `dir/<name>/`. A protected landing place makes the copy a protected write.
 */
function copyIntoProtected(
  copy: CommandFacts['copies'][number],
  cwds: readonly string[] | undefined,
  ctx: RuleContext,
): string | undefined {
  const dir = copy.dir.value;
  if (dir === undefined) return undefined;
  if (!copy.mustBeDir && !(cwds ?? []).some((base) => isDirectory(posix.resolve(base, dir))))
    return undefined;
  const landed = (target: string, followFinal: boolean): string | undefined => {
    const check = checkTarget(target, cwds, ctx.paths, { followFinal });
    return check.kind === 'protected' ? `${copy.via} would modify ${check.reason}` : undefined;
  };
  for (const source of copy.sources) {
    if (source.value === undefined) {
      const name = source.pattern.replace(/\/+$/, '').split('/').pop() ?? '';
      if (name === '' || name === '*') continue;
      const check = checkPatternTarget(`${escapeGlob(dir)}/${name}`, cwds, ctx.paths);
      if (check.kind === 'protected') return `${copy.via} would modify ${check.reason}`;
      continue;
    }
    const last = posix.basename(source.value.replace(/\/+$/, ''));
    // `dots/.` and `..` copy their contents, not a directory of that name.
    const name = last === '' || last === '.' || last === '..' ? undefined : last;
    if (name) {
      const hit = landed(posix.join(dir, name), true);
      if (hit) return hit;
    }
    if (!copy.recursive) continue;
    for (const base of cwds ?? []) {
      for (const rel of treeEntries(posix.resolve(base, source.value))) {
        const hit =
          landed(posix.join(dir, rel), false) ??
          (name ? landed(posix.join(dir, name, rel), false) : undefined);
        if (hit) return hit;
      }
    }
  }
  return undefined;
}

function isDirectory(path: string): boolean {
  return statOf(path)?.isDirectory() ?? false;
}
