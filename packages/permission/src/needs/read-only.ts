// Owns what a command NEEDS to run, as opposed to what it intends (the deny rules in `rules/`).
// Today that is one judgement: whether a known command only reads, by the grammar of the options
// it accepts (`commands/read-only.ts`) and the effects of its arguments (assignments, `cd`, a git
// repository's config), and whether what it writes lands outside the workspace and /tmp. This is
// the place that will grow to classify each command as read-only / workspace / network / outside,
// for a runner to choose the sandbox it runs in.
import { READ_ONLY, VERSION_ONLY, type ReadOnlyEffects, type ReadOnlySpec } from '../commands/read-only.js';
import type { AnalysisContext, Ends, State } from '../analyze/context.js';
import { inside } from '../analyze/helpers.js';
import type { CommandFacts } from '../facts.js';
import { gitConfigRisk } from '../git-config.js';
import { namesEnviron, namesEnvironTree } from './listing.js';
import { parseArgs } from '../grammar.js';
import { classifyName } from '../names.js';
import { resolveCwds } from '../resolve.js';
import { resolveLikeKernel } from '../paths.js';
import { targetCheck } from '../rules/protected-paths.js';
import { RUNTIME_ARGUMENTS, runtimeArg, type Arg } from '../words.js';

/** The grammar of a command known to only read (with the right arguments), if it is one. */
export function readOnlySpec(base: string): ReadOnlySpec | undefined {
  return Object.hasOwn(READ_ONLY, base) ? READ_ONLY[base] : undefined;
}

/** Whether `base` is a command known to only read (with some arguments). */
export function isReadOnlyCommand(base: string): boolean {
  return Object.hasOwn(READ_ONLY, base);
}

/** Whether `base` with these arguments only prints its version (`node --version`). */
export function onlyPrintsVersion(base: string, args: readonly Arg[]): boolean {
  // Own names only: `toString x` or `constructor --version` are programs, not Object.prototype.
  const version = Object.hasOwn(VERSION_ONLY, base) ? VERSION_ONLY[base] : undefined;
  return !!(version && args.length === 1 && args[0]!.value !== undefined && version.includes(args[0]!.value));
}

/** The command a read-only one is judged in. */
export interface ReadOnlyInput {
  /** xargs / find -exec supply arguments at run time. */
  dynamicArgs: boolean;
  facts: CommandFacts;
  cwds: string[] | undefined;
  state: State;
}

/**
 * A read-only command's arguments against its grammar, its effects applied. The commands it runs
 * (`find -exec`) are handed to `runInner`, which judges them like any command.
 */
export function readOnly(
  ctx: AnalysisContext,
  spec: ReadOnlySpec,
  base: string,
  args: Arg[],
  j: ReadOnlyInput,
  runInner: (argv: Arg[], via: string, roots: Arg[]) => void,
): { ok: true; ends?: Ends } | { ok: false; reason: string } {
  let all = args;
  // xargs / find -exec supply arguments at run time: the command must be safe with any of them.
  if (j.dynamicArgs) all = [...args, runtimeArg(RUNTIME_ARGUMENTS)];
  let effects: ReadOnlyEffects | undefined;
  if (spec.custom) {
    const r = spec.custom(all);
    effects = r.effects;
    if (effects?.commands) for (const cmd of effects.commands) runInner(cmd.argv, cmd.via, cmd.roots ?? []);
    if (r.reason) return { ok: false, reason: r.reason };
  } else {
    const parsed = parseArgs(spec.grammar, all, base);
    if (!parsed.ok) return { ok: false, reason: parsed.reason };
    if (spec.maxOperands !== undefined && parsed.args.operands.length > spec.maxOperands)
      return {
        ok: false,
        reason: `${base} with ${parsed.args.operands.length} operands writes or changes something (at most ${spec.maxOperands} only read)`,
      };
    const why = spec.check?.(parsed.args, all);
    if (why) return { ok: false, reason: why };
    effects = spec.effects?.(parsed.args, all);
  }
  const environ = effects?.reads?.find((a) => namesEnviron(a, j.cwds));
  if (environ)
    return {
      ok: false,
      reason: `${base} reads ${environ.raw}, a process's environment (a listing like env)`,
    };
  // Reading every file under a directory that holds processes' environments lists them like env.
  const tree = effects?.recursiveReads?.find((a) => namesEnvironTree(a, j.cwds));
  if (tree)
    return {
      ok: false,
      reason: `${base} reads every file under ${tree.raw}, which holds processes' environments (/proc/<pid>/environ: a listing like env)`,
    };
  if (effects?.assigns) {
    for (const a of effects.assigns) {
      const n = a.name.value;
      if (n === undefined)
        return { ok: false, reason: `${a.how} assigns a variable whose name is only known at run time` };
      j.facts.names.push({ name: n, how: a.how });
      const c = classifyName(n);
      if (c.kind !== 'inert')
        return {
          ok: false,
          reason:
            c.kind === 'protocol'
              ? `${a.how} ${n} changes conch's terminal protocol`
              : `${a.how} ${n}: ${c.reason}`,
        };
    }
  }
  if (effects?.git || effects?.gitDir) {
    const dirs = effects.gitDir
      ? effects.gitDir.value === undefined
        ? undefined
        : resolveCwds(j.cwds, effects.gitDir.value)
      : j.cwds;
    if (!dirs)
      return {
        ok: false,
        reason:
          'git runs in a directory only known at run time, whose repository config the gate cannot check',
      };
    const repository = effects.repository;
    const named =
      repository && 'gitDir' in repository
        ? { gitDir: repository.gitDir.value! }
        : repository
          ? { bare: true as const }
          : undefined;
    for (const dir of dirs) {
      const risk = gitConfigRisk(dir, named);
      if (risk) return { ok: false, reason: risk };
    }
  }
  if (effects?.cd !== undefined) {
    const cd = effects.cd;
    const next =
      cd === 'home'
        ? [ctx.options.paths.home]
        : cd === 'unknown' || cd.value === undefined
          ? undefined
          : effects.cdPhysical
            ? physicalCwds(j.cwds, cd.value)
            : resolveCwds(j.cwds, cd.value);
    return { ok: true, ends: { ok: { cwds: next, vars: j.state.vars }, fail: j.state } };
  }
  return { ok: true };
}

/** Whether a command writes (by redirect or option) outside the workspace and /tmp. */
export function writesOutside(ctx: AnalysisContext, facts: CommandFacts): boolean {
  for (const w of facts.writes) {
    const check = targetCheck(w.target, facts.cwds, ctx.ruleContext, w.followFinal);
    if (check.kind === 'harmless') continue;
    if (check.kind !== 'ok') return true;
    const ws = ctx.options.paths.workspaceRoot;
    if (check.paths.some((p) => !(inside(p, ws) || inside(p, '/tmp')))) return true;
  }
  return false;
}

/** The working directories after `cd -P target`: each resolved as the kernel resolves it. */
function physicalCwds(cwds: readonly string[] | undefined, target: string): string[] | undefined {
  if (!target.startsWith('/') && !cwds) return undefined;
  const bases = target.startsWith('/') ? ['/'] : cwds!;
  return [...new Set(bases.map((c) => resolveLikeKernel(target, c, true)))];
}
