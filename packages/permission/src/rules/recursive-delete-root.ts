import { posix } from 'node:path';
import type { CommandFacts, Part, RuleContext } from '../facts.js';
import { rootLike, shellGlob } from '../paths.js';
import type { Arg } from '../words.js';

/** Names a pattern that can match "anything" in a directory is tested against. */
const ANY_NAMES = ['src', 'README.md', '.git', '.ssh', 'a'];

/**
 * Rule `safety:recursiveDeleteRoot`: no recursive delete, move-away or mirror-delete (`rm -r`,
 * `find -delete`, `find -exec rm -r`, `mv`, `rsync --delete`, `chmod -R`) of `/`, the home
 * directory, the workspace root or a directory containing one of them — in every spelling
 * (`~`, `~/`, `"$HOME"/`, `${HOME:?}`, `~+`, `.`, `..`, `/*`, `./*`, `--recur`), and in every
 * working directory the command may run in (`cd x; rm -rf .` runs in the workspace if cd fails).
 */
export function recursiveDeleteRoot(facts: CommandFacts, ctx: RuleContext): Part[] {
  for (const t of facts.trees) {
    const what = rootTarget(t.target, facts.cwds, ctx);
    if (what) {
      return [
        {
          command: facts.shown,
          verdict: 'deny',
          reason: `${t.via} would remove ${what}`,
          rule: 'safety:recursiveDeleteRoot',
        },
      ];
    }
  }
  return [];
}

function rootTarget(target: Arg, cwds: readonly string[] | undefined, ctx: RuleContext): string | undefined {
  if (target.fields) {
    for (const field of target.fields) {
      const hit = knownRoot(field, cwds, ctx);
      if (hit) return hit;
    }
    return undefined;
  }
  // Entirely unknown (`$dir`): nothing to prove either way; the command asks.
  if (target.opaque && target.pattern === '*') return undefined;
  // A pattern: the directory before the first component that is not known, and that component.
  const components = target.pattern.split('/');
  let i = 0;
  const known: string[] = [];
  for (; i < components.length; i++) {
    if (/(?<!\\)[*?[]/.test(components[i]!)) break;
    known.push(components[i]!.replace(/\\(.)/g, '$1'));
  }
  if (i >= components.length) return undefined;
  const dir = known.length === 0 ? '.' : known.join('/') || '/';
  const component = components[i]!;
  const dirs = posix.isAbsolute(dir) ? ['/'] : cwds;
  if (!dirs) return `everything under a directory of an unknown working directory (${target.raw})`;
  for (const base of dirs) {
    const abs = posix.resolve(base, dir);
    const root = rootLike(abs, ctx.paths);
    if (!root) continue;
    const re = shellGlob(component);
    // The next component on the way from `abs` to the home or workspace root, if inside it.
    const toward = [ctx.paths.home, ctx.paths.workspaceRoot]
      .map((p) => posix.relative(abs, p).split('/')[0]!)
      .filter((c) => c && c !== '..');
    if (ANY_NAMES.some((n) => re.test(n)) || toward.some((n) => re.test(n))) return `everything in ${root}`;
  }
  return undefined;
}

function knownRoot(field: string, cwds: readonly string[] | undefined, ctx: RuleContext): string | undefined {
  if (posix.isAbsolute(field)) return rootLike(posix.resolve(field), ctx.paths);
  if (!cwds) {
    const first = field.split('/')[0];
    return first === '.' || first === '..' || field === ''
      ? `a directory under an unknown working directory (${field || "''"})`
      : undefined;
  }
  for (const base of cwds) {
    const hit = rootLike(posix.resolve(base, field), ctx.paths);
    if (hit) return hit;
  }
  return undefined;
}
