// Owns how the host's rules (compiled in `host-rules.ts`) meet a command: the text of each wrapper
// level they are matched against, which lists count at a given point (deny and ask always, allow
// only where the analysis says so), and whether a rule matches a whole line the way the gate uses
// it (for a rule's examples).
import type { Syntax } from '@conch/shell-syntax';
import { unwrap } from '../commands/wrappers.js';
import { matchHostRules, type CompiledRule } from '../host-rules.js';
import { baseName } from '../program.js';
import { evaluate, type Arg } from '../words.js';
import type { Add, AnalysisContext, State } from './context.js';
import { toShell, visitSimple } from './helpers.js';

/**
 * Host deny/ask rules on every wrapper level; allow rules (the host's, unless it is in read-only
 * mode, and the session's `always` answers) on the full and innermost command, when `allowToo`
 * and not `allowBlocked`. Adds the part of the rule that matched; returns whether one did.
 */
export function hostRules(
  ctx: AnalysisContext,
  levels: Arg[][],
  add: Add,
  allowToo: boolean,
  allowBlocked = false,
): boolean {
  const o = ctx.options;
  const hit = matchHostRules(
    o.rules,
    levels.map(levelText),
    allowToo && !allowBlocked ? [...(o.useAllowRules ? o.rules.allow : []), ...o.sessionAllow()] : [],
  );
  if (!hit) return false;
  add(hit.verdict, hit.reason, hit.rule);
  return true;
}

/** Whether a compiled host rule matches `line` the way the gate uses it (for rule examples). */
export function ruleMatches(ctx: AnalysisContext, rule: CompiledRule, line: string): boolean {
  const o = ctx.options;
  const parsed = o.parser.parse(line, { maxBytes: o.maxBytes, timeoutMs: o.timeoutMs });
  if (!parsed.ok || !parsed.syntax) return false;
  const texts: string[][] = [];
  const state: State = { cwds: undefined, vars: new Map() };
  const collect = (seq: Syntax.Sequence) => {
    for (const item of seq.items)
      visitSimple(item.statement, (cmd) => {
        if (cmd.words.length === 0) return;
        const args = cmd.words.map((w) => evaluate(w, toShell(state, o.paths.home)));
        texts.push(levelsOf(args).map(levelText));
      });
  };
  collect(parsed.syntax.body);
  if (texts.length === 0) return false;
  if (rule.list === 'allow') return texts.every((levels) => levels.some((t) => rule.test(t)));
  return texts.some((levels) => levels.some((t) => rule.test(t)));
}

/** The argv at every wrapper level, outermost first (a lighter unwrapping than the resolver's). */
function levelsOf(args: Arg[]): Arg[][] {
  const levels: Arg[][] = [args];
  let argv = args;
  for (let i = 0; i < 8 && argv.length > 0; i++) {
    const name = argv[0]!.value;
    if (name === undefined) break;
    const u = unwrap(baseName(name), argv.slice(1));
    if (!u || u.kind !== 'inner') break;
    argv = u.argv;
    levels.push(argv);
  }
  return levels;
}

/** The text host rules match: the words after quote removal, joined by single spaces. */
function levelText(level: Arg[]): string {
  return level.map((a) => a.value ?? a.raw).join(' ');
}
