// Owns how the host's rules (compiled in `host-rules.ts`) meet a command: the texts of each wrapper
// level they are matched against — as written and as resolved (the program's base name, the global
// options of git, npm, docker, kubectl … skipped to the subcommand) — which lists count at a given
// point (deny and ask always, allow only where the analysis says so), what an allow rule cannot
// vouch for (a protected path the command names), and whether a rule matches a whole line the way
// the gate uses it (for a rule's examples).
import { shellQuote, type Syntax } from '@conch/shell-syntax';
import { posix } from 'node:path';
import { GIT_HARMLESS_FLAGS } from '../commands/git.js';
import { unwrap } from '../commands/wrappers.js';
import type { Part } from '../facts.js';
import { allowHit, matchHostRules, ruleNames, type CommandTexts, type CompiledRule } from '../host-rules.js';
import { checkPatternTarget, checkTarget } from '../paths.js';
import { baseName, SYSTEM_DIRS } from '../program.js';
import { suggestRule } from '../suggest-rule.js';
import { evaluate, type Arg } from '../words.js';
import { parseOptions, type Add, type AnalysisContext, type State } from './context.js';
import { toShell, visitSimple } from './helpers.js';

/**
 * Host deny/ask rules on every wrapper level, in every spelling; allow rules (the host's, unless it
 * is in read-only mode, and the session's `always` answers) on the full and innermost command, when
 * `allowToo` and not `allowBlocked`. An allow rule does not cover a protected path the command
 * names (a write the gate cannot see, `git log --output=~/.bash_aliases`) unless the rule names
 * that path itself: that is denied. Adds the part of the rule that matched; returns whether one did.
 * `cwds` is where the command runs (session rules hold only in the directory they were given for).
 */
export function hostRules(
  ctx: AnalysisContext,
  levels: Arg[][],
  add: Add,
  allowToo: boolean,
  allowBlocked = false,
  cwds?: readonly string[],
): boolean {
  const o = ctx.options;
  const allowRules =
    allowToo && !allowBlocked ? [...(o.useAllowRules ? o.rules.allow : []), ...o.sessionAllow()] : [];
  if (o.rules.deny.length === 0 && o.rules.ask.length === 0 && allowRules.length === 0) return false;
  const texts = commandTexts(levels, cwds, allowRules.length > 0);
  const hit = matchHostRules(o.rules, texts, allowRules);
  if (!hit) return false;
  if (hit.verdict === 'allow' && hit.matched && ctx.options.safety.protectedPaths) {
    const named = protectedMention(ctx, levels[0] ?? [], cwds, hit.matched);
    if (named) {
      add(
        'deny',
        `it names ${named}; the rule "${hit.matched.text}" allows the command but cannot show it does not write there, and protected paths are refused whatever a rule allows unless the rule names the path itself`,
        'safety:protectedPaths',
      );
      return true;
    }
  }
  if (hit.verdict === 'allow') {
    // Every allow rule that matches: the gate checks that one of them still vouches for the files
    // the command executes (rule-grants.ts); the exact command is what an `always` would store.
    const grants = allowRules.filter((r) => allowHit(r, texts));
    add(hit.verdict, hit.reason, hit.rule, suggestRule(levels[0] ?? []), { grants });
  } else add(hit.verdict, hit.reason, hit.rule);
  return true;
}

/**
 * A command whose name is only known at run time (`$(which curl) x`, `"$tool" push`) cannot be
 * matched against the host's deny rules: while the host has any, it is asked — also in the sandbox,
 * like a host `ask` rule (`failClosed:hostRules`).
 */
export function unresolvedNameRules(ctx: AnalysisContext, nameArg: Arg, shown: string): Part[] {
  const deny = ctx.options.rules.deny;
  if (deny.length === 0) return [];
  return [
    {
      command: shown,
      verdict: 'ask',
      reason: `the command name ${nameArg.raw} is only known at run time, so the host's deny rules (${deny
        .slice(0, 3)
        .map((r) => `"${r.text}"`)
        .join(', ')}${deny.length > 3 ? ', …' : ''}) cannot be checked`,
      rule: 'failClosed:hostRules',
    },
  ];
}

/** Whether a compiled host rule matches `line` the way the gate uses it (for rule examples). */
export function ruleMatches(ctx: AnalysisContext, rule: CompiledRule, line: string): boolean {
  const o = ctx.options;
  const parsed = o.parser.parse(line, parseOptions(o));
  if (!parsed.ok || !parsed.syntax) return false;
  const texts: CommandTexts[] = [];
  const state: State = { cwds: undefined, vars: new Map() };
  const collect = (seq: Syntax.Sequence) => {
    for (const item of seq.items)
      visitSimple(item.statement, (cmd) => {
        if (cmd.words.length === 0) return;
        const args = cmd.words.map((w) => evaluate(w, toShell(state, o.paths.home)));
        texts.push(commandTexts(levelsOf(args), undefined));
      });
  };
  collect(parsed.syntax.body);
  if (texts.length === 0) return false;
  if (rule.list === 'allow') return texts.every((t) => t.allow.some((x) => rule.test(x)));
  return texts.some((t) => t.any.some((x) => rule.test(x)));
}

/**
 * The texts host rules match for a command whose wrapper levels are `levels` (outermost first);
 * the allow texts only when allow rules are consulted.
 */
export function commandTexts(
  levels: readonly Arg[][],
  cwds: readonly string[] | undefined,
  withAllow = true,
): CommandTexts {
  const any = new Set<string>();
  for (const level of levels) for (const t of denyVariants(level)) any.add(t);
  if (!withAllow) return { any: [...any], allow: [], exact: undefined, cwds };
  const allow = new Set<string>();
  const full = levels[0] ?? [];
  const inner = levels[levels.length - 1] ?? [];
  for (const level of full === inner ? [full] : [full, inner])
    for (const t of allowVariants(level)) allow.add(t);
  return {
    any: [...any],
    allow: [...allow],
    exact: full.length ? exactText(full) : undefined,
    cwds,
  };
}

/** The text a session rule matches and `always` stores: every word as written, quoted when it must be. */
export function exactText(level: readonly Arg[]): string | undefined {
  if (level.length === 0 || level.some((a) => a.value === undefined)) return undefined;
  return level.map((a) => quoteWord(a.value!)).join(' ');
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

/**
 * Programs whose global options come before a subcommand. `values`: the options that take the
 * next word as their value, when known exactly (git reads its global options by exact spelling);
 * otherwise any option without `=` may take one, and every reading is tried. `permute`: options
 * may also follow the subcommand (so `npm --prefix x publish` is `npm publish --prefix x`).
 * `harmless`: global flags an allow rule may look through (they change nothing that runs).
 */
interface SubcommandSpec {
  values?: ReadonlySet<string>;
  permute: boolean;
  harmless: ReadonlySet<string>;
}

const NPM_LIKE: SubcommandSpec = {
  permute: true,
  harmless: new Set(['--silent', '-s', '-q', '--quiet', '--no-color', '--no-progress', '--no-fund']),
};
const DOCKER_LIKE: SubcommandSpec = { permute: false, harmless: new Set(['-D', '--debug']) };

const SUBCOMMANDS: Record<string, SubcommandSpec> = {
  git: {
    values: new Set([
      '-C',
      '-c',
      '--git-dir',
      '--work-tree',
      '--namespace',
      '--config-env',
      '--super-prefix',
      '--attr-source',
    ]),
    permute: false,
    harmless: GIT_HARMLESS_FLAGS,
  },
  npm: NPM_LIKE,
  pnpm: NPM_LIKE,
  yarn: NPM_LIKE,
  bun: NPM_LIKE,
  docker: DOCKER_LIKE,
  podman: DOCKER_LIKE,
  nerdctl: DOCKER_LIKE,
  kubectl: { permute: true, harmless: new Set() },
  oc: { permute: true, harmless: new Set() },
  helm: { permute: true, harmless: new Set(['--debug']) },
  terraform: { permute: false, harmless: new Set(['-no-color']) },
  tofu: { permute: false, harmless: new Set(['-no-color']) },
  cargo: { permute: false, harmless: new Set(['-q', '--quiet', '-v', '--verbose']) },
  gh: { permute: true, harmless: new Set() },
};

/** One reading of where a program's subcommand starts: the index, and the global words before it. */
interface Split {
  at: number;
  skipped: string[];
}

/** Every index where the subcommand may start, after global options (most likely first). */
function splits(words: readonly string[], spec: SubcommandSpec, program: string): Split[] {
  const out: Split[] = [];
  let maybeValue = false;
  for (let k = 1; k < words.length && k <= 12; k++) {
    const w = words[k]!;
    if (program === 'cargo' && w.startsWith('+') && k === 1) continue; // `cargo +nightly publish`
    if (w === '--') break;
    if (w.startsWith('-') && w !== '-') {
      if (spec.values) {
        if (spec.values.has(w)) k++;
      } else maybeValue = !w.includes('=');
      continue;
    }
    if (k === 1) return [];
    out.push({ at: k, skipped: words.slice(1, k) });
    if (spec.values || !maybeValue) break;
    maybeValue = false;
  }
  return out;
}

/** The spellings of one level deny and ask rules match: as written, by base name, at its subcommand. */
function denyVariants(level: readonly Arg[]): string[] {
  if (level.length === 0) return [];
  const words = level.map((a) => a.value ?? a.raw);
  const out = [words.join(' ')];
  const name = words[0]!;
  const base = baseName(name);
  const resolved = [base, ...words.slice(1)];
  if (base !== name) out.push(resolved.join(' '));
  const spec = Object.hasOwn(SUBCOMMANDS, base) ? SUBCOMMANDS[base] : undefined;
  if (spec) {
    for (const s of splits(resolved, spec, base)) {
      const sub = resolved.slice(s.at);
      out.push([base, ...sub].join(' '));
      if (spec.permute) out.push([base, sub[0]!, ...s.skipped, ...sub.slice(1)].join(' '));
    }
  }
  return out;
}

/**
 * The spellings of one level allow rules match: as written (words quoted where they must be), by
 * base name only for a program in a system directory, and at its subcommand only past global
 * flags that change nothing that runs (`git --no-pager log`, `npm --silent test`).
 */
function allowVariants(level: readonly Arg[]): string[] {
  if (level.length === 0) return [];
  const words = level.map((a) => (a.value === undefined ? a.raw : quoteWord(a.value)));
  const out = [words.join(' ')];
  const name = level[0]!.value;
  if (name === undefined) return out;
  const base = baseName(name);
  const system = !name.includes('/') || SYSTEM_DIRS.has(posix.dirname(name));
  if (!system) return out;
  const resolved = [quoteWord(base), ...words.slice(1)];
  if (base !== name) out.push(resolved.join(' '));
  const spec = Object.hasOwn(SUBCOMMANDS, base) ? SUBCOMMANDS[base] : undefined;
  if (spec) {
    const [first] = splits(resolved, spec, base);
    if (first && first.skipped.every((w) => spec.harmless.has(w))) {
      const sub = resolved.slice(first.at);
      out.push([resolved[0]!, ...sub].join(' '));
      if (spec.permute) out.push([resolved[0]!, sub[0]!, ...first.skipped, ...sub.slice(1)].join(' '));
    }
  }
  return out;
}

/**
 * A word as allow and session rules see it: as it is, unless it holds what would blur where words
 * begin and end (white space, quotes, a backslash) or is empty — then single-quoted like the
 * shell reads it. So `git commit -m "a b"` is not `git commit -m a b`.
 */
function quoteWord(value: string): string {
  if (value !== '' && !/[\s'"\\]/.test(value)) return value;
  try {
    return shellQuote(value);
  } catch {
    return JSON.stringify(value);
  }
}

/**
 * The first protected path a command allowed by `rule` names in its arguments (a word, the value of
 * `--opt=value`, or of `-Xvalue`), that the rule does not name itself; undefined when none.
 */
function protectedMention(
  ctx: AnalysisContext,
  words: readonly Arg[],
  cwds: readonly string[] | undefined,
  rule: CompiledRule,
): string | undefined {
  const paths = ctx.options.paths;
  for (const a of words.slice(1)) {
    if (a.value !== undefined) {
      for (const candidate of mentionCandidates(a.value)) {
        for (const path of candidate.startsWith('~/')
          ? [candidate, `${paths.home}${candidate.slice(1)}`]
          : [candidate]) {
          const check = checkTarget(path, cwds, paths);
          if (check.kind === 'protected' && !ruleNames(rule, a.value) && !ruleNames(rule, candidate))
            return `the protected path ${candidate} (${check.reason})`;
        }
      }
      continue;
    }
    // A word only partly known: its pattern, when the name it ends in is known (`$HOME/.bashrc`).
    const pattern =
      a.pattern.includes('=') && a.pattern.startsWith('-')
        ? a.pattern.slice(a.pattern.indexOf('=') + 1)
        : a.pattern;
    const last = pattern.slice(pattern.lastIndexOf('/') + 1);
    if (a.opaque && (last === '' || /[*?[]/.test(last))) continue;
    const check = checkPatternTarget(pattern, cwds, paths);
    if (check.kind === 'protected' && !ruleNames(rule, a.raw)) return `a protected path (${check.reason})`;
  }
  return undefined;
}

/** The paths an argument may name: itself, the value after an option's `=`, a short option's attached value. */
function mentionCandidates(value: string): string[] {
  if (value === '' || value === '-' || value === '--') return [];
  // A URL names no file here (`curl https://host/.env` reads a remote path).
  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(value)) return [];
  // `make install DESTDIR=~/.ssh`, `dd of=…`: a variable or operand whose value is a path.
  const assignment = /^[A-Za-z_][A-Za-z0-9_]*=(.+)$/s.exec(value);
  if (assignment) return [value, assignment[1]!];
  if (!value.startsWith('-')) return [value];
  const out: string[] = [];
  const eq = value.indexOf('=');
  if (eq > 0 && eq < value.length - 1) out.push(value.slice(eq + 1));
  if (/^-[A-Za-z0-9]./.test(value)) out.push(value.slice(2));
  return out;
}
