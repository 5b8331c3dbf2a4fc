import { literalArg, runtimeArg, type Arg } from '../words.js';
import type { ReadOnlyEffects } from './read-only.js';

/** Primaries that only test or print (GNU find), without and with one argument. */
const TESTS_NO_ARG = new Set([
  '-empty',
  '-executable',
  '-false',
  '-nogroup',
  '-nouser',
  '-readable',
  '-true',
  '-writable',
  '-depth',
  '-mount',
  '-xdev',
  '-daystart',
  '-follow',
  '-ignore_readdir_race',
  '-noignore_readdir_race',
  '-noleaf',
  '-prune',
  '-quit',
  '-print',
  '-print0',
  '-ls',
  '-d',
  '-not',
  '-a',
  '-and',
  '-o',
  '-or',
  '!',
  '(',
  ')',
  ',',
  '-help',
  '--help',
  '-version',
  '--version',
]);
const TESTS_ONE_ARG = new Set([
  '-amin',
  '-anewer',
  '-atime',
  '-cmin',
  '-cnewer',
  '-ctime',
  '-fstype',
  '-gid',
  '-group',
  '-ilname',
  '-iname',
  '-inum',
  '-ipath',
  '-iregex',
  '-iwholename',
  '-links',
  '-lname',
  '-mmin',
  '-mtime',
  '-name',
  '-newer',
  '-path',
  '-perm',
  '-regex',
  '-samefile',
  '-size',
  '-type',
  '-uid',
  '-used',
  '-user',
  '-wholename',
  '-xtype',
  '-context',
  '-maxdepth',
  '-mindepth',
  '-regextype',
  '-printf',
  '-files0-from',
]);
/** Tests that select some files, not every file under a starting point. */
const NARROWING =
  /^-(i?name|i?path|i?regex|i?wholename|i?lname|newer.*|[acm](min|time)|used|samefile|inum|links|size|perm|user|group|uid|gid|context|fstype)$/;

/** Actions that write a file (the argument is the file). */
const WRITES = new Map([
  ['-fprint', 1],
  ['-fprint0', 1],
  ['-fls', 1],
  ['-fprintf', 2],
]);

export interface FindPlan {
  /** Starting points. */
  starts: Arg[];
  /** Commands run by -exec, -execdir, -ok, -okdir (`{}` is a file name supplied at run time). */
  execs: { action: string; argv: Arg[] }[];
  /** Files -fprint / -fprint0 / -fprintf / -fls write. */
  writes: { action: string; target: Arg }[];
  /** `-delete` is present. */
  deletes: boolean;
  /** A test narrows what is matched (`-name`, `-path`, `-newer` …): not everything under a start. */
  narrowed: boolean;
  /** Why the expression is not understood (an unknown primary, an argument only known at run time). */
  unknown?: string;
}

/**
 * Reads a find command line: leading options, starting points, then the expression. `-exec …`
 * ends at `;`, or at `+` only right after `{}` (any other `+` is an argument of the command).
 */
export function parseFind(args: readonly Arg[]): FindPlan {
  const plan: FindPlan = { starts: [], execs: [], writes: [], deletes: false, narrowed: false };
  let i = 0;
  // -H -L -P, -D debugopts, -Olevel
  while (i < args.length) {
    const v = args[i]!.value;
    if (v === '-H' || v === '-L' || v === '-P' || (v !== undefined && /^-O\d$/.test(v))) i++;
    else if (v === '-D') i += 2;
    else break;
  }
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (a.value === undefined) {
      if (a.mayBeOption) {
        plan.unknown ??= `find argument ${a.raw} is only known at run time and could be an expression`;
      }
      plan.starts.push(a);
      continue;
    }
    if (/^[-(!]/.test(a.value) && a.value !== '-') break;
    plan.starts.push(a);
  }
  for (; i < args.length; i++) {
    const a = args[i]!;
    const v = a.value;
    if (v === undefined) {
      plan.unknown ??= `find expression argument ${a.raw} is only known at run time`;
      continue;
    }
    if (TESTS_NO_ARG.has(v)) continue;
    if (TESTS_ONE_ARG.has(v) || /^-newer[aBcmt][aBcmt]$/.test(v)) {
      // A name or path pattern that matches everything (`-name '*'`, `-path '*'`) narrows nothing.
      const matchesAll = /^-i?(name|path|wholename)$/.test(v) && /^\**$/.test(args[i + 1]?.value ?? '');
      if (NARROWING.test(v) && !matchesAll) plan.narrowed = true;
      i++;
      continue;
    }
    if (v === '-delete') {
      plan.deletes = true;
      continue;
    }
    const writes = WRITES.get(v);
    if (writes !== undefined) {
      const target = args[i + 1];
      if (target) plan.writes.push({ action: v, target });
      i += writes;
      continue;
    }
    if (/^-(exec|execdir|ok|okdir)$/.test(v)) {
      const argv: Arg[] = [];
      let j = i + 1;
      for (; j < args.length; j++) {
        const w = args[j]!;
        if (w.value === ';') break;
        if (w.value === '+' && args[j - 1]?.value === '{}' && j - 1 > i + 1) break;
        argv.push(w);
      }
      if (j >= args.length) plan.unknown ??= `find ${v} has no terminating ';' or '{} +'`;
      // `{}` (also inside a word) is a path find supplies: it starts with a starting point, so it is
      // not an option unless a starting point is.
      const startsSafe = plan.starts.every((s) => s.value !== undefined && !s.value.startsWith('-'));
      plan.execs.push({
        action: v,
        argv: argv.map((w) =>
          w.value !== undefined && w.value.includes('{}')
            ? { ...runtimeArg(w.raw), mayBeOption: !startsSafe && w.value.startsWith('{}') }
            : w,
        ),
      });
      i = j;
      continue;
    }
    plan.unknown ??= `find ${v} is not known to be read-only`;
  }
  return plan;
}

/** find is read-only when its expression only tests and prints; -exec commands are judged separately. */
export function findCheck(all: readonly Arg[]): { reason?: string; effects?: ReadOnlyEffects } {
  const plan = parseFind(all);
  const effects: ReadOnlyEffects = {
    commands: plan.execs.map((e) => ({
      argv: e.argv,
      via: `find ${e.action}`,
      roots: plan.narrowed ? [] : plan.starts.length ? plan.starts : [literalArg('.')],
    })),
    // The commands it runs are handed every file found: each starting point is read recursively.
    ...(plan.execs.length > 0
      ? { recursiveReads: plan.starts.length ? plan.starts : [literalArg('.')] }
      : {}),
  };
  if (plan.unknown) return { reason: plan.unknown, effects };
  if (plan.deletes) return { reason: 'find -delete deletes files', effects };
  if (plan.writes.length > 0) return { reason: `find ${plan.writes[0]!.action} writes a file`, effects };
  return { effects };
}
