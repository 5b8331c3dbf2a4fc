import { posix } from 'node:path';
import { unwrap } from './commands/wrappers.js';
import type { WriteTarget } from './facts.js';
import { baseName, SYSTEM_DIRS } from './program.js';
import { PRIVILEGE } from './rules/privilege-escalation.js';
import type { Arg } from './words.js';

/** Where unwrapping a command stopped. */
export type ResolutionEnd =
  /** The innermost command, to be judged on its own. */
  | { kind: 'command'; name: string; base: string; args: Arg[] }
  /** Its name is only known at run time (`$cmd`, `$(…)`, a glob). */
  | { kind: 'dynamicName'; arg: Arg }
  /** sudo and friends (`safety:privilegeEscalation`). */
  | { kind: 'privilege'; base: string; args: Arg[] }
  /** A wrapper runs a command line given as one string (`env -S`, `watch`, `flock -c`). */
  | { kind: 'string'; via: string; script: Arg; args: Arg[] }
  /** A wrapper whose arguments the gate cannot read. */
  | { kind: 'opaque'; via: string; reason: string; args: Arg[] }
  /** A wrapper with no command (`env`, `command -v x`, `time -o f`). */
  | { kind: 'alone'; via: string; readOnly: boolean; reason?: string; args: Arg[] };

export interface Resolution {
  /** The argv at every wrapper level, outermost first (host rules match each). */
  levels: Arg[][];
  /** The base name of every level's program, the innermost last. */
  programs: string[];
  /** Where the innermost command runs (`env -C dir` moves it; undefined when unknown). */
  cwds: string[] | undefined;
  /** xargs supplies arguments at run time. */
  dynamicArgs: boolean;
  /** `env NAME=value` assignments of the wrappers. */
  env: { name: string; arg: Arg }[];
  /** Files the wrappers themselves write (`time -o f`, `flock f`). */
  writes: WriteTarget[];
  /** A program name written with ANSI-C quoting on the way in (`$'\x72m'`). */
  quotedName?: Arg;
  end: ResolutionEnd;
}

/**
 * The one resolver: looks through a simple command's wrappers once, level by level (at most 8),
 * each read with its own option grammar (`commands/wrappers.ts`), and says where it stopped. A
 * program named by path outside the system directories is never taken for the wrapper it names.
 */
export function resolveCommand(args: Arg[], cwds: string[] | undefined, dynamicArgs: boolean): Resolution {
  const r: Resolution = {
    levels: [args],
    programs: [],
    cwds,
    dynamicArgs,
    env: [],
    writes: [],
    end: undefined!,
  };
  let argv = args;
  for (let level = 0; level < 8; level++) {
    const nameArg = argv[0]!;
    if (nameArg.value === undefined) {
      r.end = { kind: 'dynamicName', arg: nameArg };
      return r;
    }
    if (nameArg.word.parts.some((p) => p.kind === 'text' && p.quoting === 'ansi-c')) r.quotedName ??= nameArg;
    const name = nameArg.value;
    const base = baseName(name);
    r.programs.push(base);
    const rest = argv.slice(1);
    if (PRIVILEGE.has(base)) {
      r.end = { kind: 'privilege', base, args: rest };
      return r;
    }
    const systemOrBare = !name.includes('/') || SYSTEM_DIRS.has(posix.dirname(name));
    const u = systemOrBare ? unwrap(base, rest) : undefined;
    if (!u) {
      r.end = { kind: 'command', name, base, args: rest };
      return r;
    }
    if (u.kind === 'inner') {
      for (const e of u.env ?? []) r.env.push({ name: (e.value ?? e.raw).split('=')[0]!, arg: e });
      if (u.cwd) r.cwds = u.cwd.value === undefined ? undefined : resolveCwds(r.cwds, u.cwd.value);
      for (const w of u.writes ?? []) r.writes.push({ target: w, via: base, followFinal: true });
      if (u.dynamicArgs) r.dynamicArgs = true;
      argv = u.argv;
      r.levels.push(argv);
      continue;
    }
    for (const w of ('writes' in u ? u.writes : undefined) ?? [])
      r.writes.push({ target: w, via: base, followFinal: true });
    if (u.kind === 'string') r.end = { kind: 'string', via: base, script: u.script, args: rest };
    else if (u.kind === 'opaque') r.end = { kind: 'opaque', via: base, reason: u.reason, args: rest };
    else
      r.end = {
        kind: 'alone',
        via: base,
        readOnly: u.readOnly,
        ...(u.reason ? { reason: u.reason } : {}),
        args: rest,
      };
    return r;
  }
  const last = r.levels[r.levels.length - 1]!;
  r.end = {
    kind: 'opaque',
    via: r.programs[r.programs.length - 1] ?? '?',
    reason: 'wrappers nested deeper than 8 levels',
    args: last.slice(1),
  };
  return r;
}

/** The working directories after `cd target` (or `env -C target`) from each of `cwds`. */
export function resolveCwds(cwds: readonly string[] | undefined, target: string): string[] | undefined {
  if (posix.isAbsolute(target)) return [posix.resolve(target)];
  if (!cwds) return undefined;
  return [...new Set(cwds.map((c) => posix.resolve(c, target)))];
}
