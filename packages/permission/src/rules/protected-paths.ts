import type { CommandFacts, Part, RuleContext } from '../facts.js';
import { checkPatternTarget, checkTarget, type TargetCheck } from '../paths.js';
import type { Arg } from '../words.js';

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
