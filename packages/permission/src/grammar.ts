import type { Arg } from './words.js';

/**
 * Option grammars: which options a program accepts and how it reads them, so the gate parses an
 * argv the way the program will. The parser follows getopt_long (GNU) and git's parse-options:
 * short options bundle (`-nO…`: `n` then `O` with the rest as its value), `--opt=value` and
 * `--opt value`, long options abbreviated to any unique prefix, options after operands (GNU
 * permutation) and `--` ending options. An option not in the grammar is an error, so a grammar
 * is an allow-list: the caller asks when parsing fails.
 */

/**
 * `lastDefault`: git's PARSE_OPT_LASTARG_DEFAULT (`git branch --merged [<commit>]`): the next word
 * is the value unless the option is the last word, then it takes its default.
 */
export type ArgKind = 'none' | 'required' | 'optional' | 'lastDefault';

export interface OptionDef {
  /** Canonical spelling for messages: `-n`, `--lines`. */
  name: string;
  arg: ArgKind;
  /** Another name for the same option (`-n` and `--lines`): the canonical key used by checks. */
  key: string;
}

export interface Grammar {
  short: ReadonlyMap<string, OptionDef>;
  long: ReadonlyMap<string, OptionDef>;
  /** Long options may be abbreviated to a unique prefix (getopt_long, git). Default true. */
  abbreviations: boolean;
  /** `-5` (head, tail, git log) is a numeric option. */
  numeric: boolean;
  /** Options are recognised after the first operand (GNU permutation). Default true. */
  permute: boolean;
  /** Every option the real program has is harmless: a word that may expand to an option is fine. */
  harmlessOptions: boolean;
  /** `--end-of-options` ends the options as `--` does (git). */
  endOfOptions: boolean;
}

export interface GrammarSpec {
  /** Short flags without a value, e.g. 'alh1'. */
  flags?: string;
  /** Short options with a required value (separate or attached), e.g. 'nc'. */
  values?: string;
  /** Short options with an optional value, attached only (`git status -uno`), e.g. 'u'. */
  optional?: string;
  /**
   * Long options, space separated: `all` (flag), `lines=` (required value), `color?` (optional,
   * only as `--color=x`), `merged~` (the next word, unless it is the last: see `lastDefault`),
   * `lines=:n` (an alias key: same option as `-n`).
   */
  long?: string;
  abbreviations?: boolean;
  numeric?: boolean;
  permute?: boolean;
  harmlessOptions?: boolean;
  endOfOptions?: boolean;
}

/**
 * Builds a grammar from a compact spec. Its option tables are built at first use, not here: the
 * command modules declare a few hundred grammars at import (git alone ~80), and building them all
 * was ~10 ms of every conch-mcp start on a slow VM for commands a session may never run.
 */
export function grammar(spec: GrammarSpec): Grammar {
  declared.push(spec);
  let tables: { short: Map<string, OptionDef>; long: Map<string, OptionDef> } | undefined;
  const built = () => (tables ??= optionTables(spec));
  return {
    get short() {
      return built().short;
    },
    get long() {
      return built().long;
    },
    abbreviations: spec.abbreviations ?? true,
    numeric: spec.numeric ?? false,
    permute: spec.permute ?? true,
    harmlessOptions: spec.harmlessOptions ?? false,
    endOfOptions: spec.endOfOptions ?? false,
  };
}

/** Every spec grammar() was given, so a test can build them all (a bad item throws only when built). */
const declared: GrammarSpec[] = [];

/** The option tables of every grammar declared so far, built now (for tests: a bad spec throws). */
export function buildDeclaredGrammars(): number {
  for (const spec of declared) optionTables(spec);
  return declared.length;
}

function optionTables(spec: GrammarSpec): { short: Map<string, OptionDef>; long: Map<string, OptionDef> } {
  const short = new Map<string, OptionDef>();
  const long = new Map<string, OptionDef>();
  for (const ch of spec.flags ?? '') short.set(ch, { name: `-${ch}`, arg: 'none', key: `-${ch}` });
  for (const ch of spec.values ?? '') short.set(ch, { name: `-${ch}`, arg: 'required', key: `-${ch}` });
  for (const ch of spec.optional ?? '') short.set(ch, { name: `-${ch}`, arg: 'optional', key: `-${ch}` });
  for (const item of (spec.long ?? '').split(/\s+/).filter(Boolean)) {
    const m = /^([A-Za-z0-9][A-Za-z0-9-]*)([=?~]?)(?::(.+))?$/.exec(item);
    if (!m) throw new Error(`bad grammar item ${item}`);
    const [, name, kind, alias] = m;
    const arg: ArgKind =
      kind === '=' ? 'required' : kind === '?' ? 'optional' : kind === '~' ? 'lastDefault' : 'none';
    long.set(name!, { name: `--${name}`, arg, key: alias ? `-${alias}` : `--${name}` });
  }
  return { short, long };
}

export interface ParsedOption {
  def: OptionDef;
  /** The value (attached or the next word); for optional-argument options only when attached. */
  value?: Arg | string;
  /** The word the option was written in. */
  word: Arg;
}

export interface ParsedArgs {
  options: ParsedOption[];
  operands: Arg[];
}

export type ParseResult = { ok: true; args: ParsedArgs } | { ok: false; reason: string };

/** Resolves a long option name (maybe abbreviated) the way getopt_long does. */
export function resolveLong(g: Grammar, name: string): OptionDef | 'ambiguous' | undefined {
  const exact = g.long.get(name);
  if (exact) return exact;
  if (!g.abbreviations) return undefined;
  const matches = new Set<OptionDef>();
  for (const [full, def] of g.long) if (full.startsWith(name)) matches.add(def);
  if (matches.size === 1) return [...matches][0];
  if (matches.size > 1) {
    // Aliases of one option are one option.
    const keys = new Set([...matches].map((d) => d.key));
    if (keys.size === 1) return [...matches][0];
    return 'ambiguous';
  }
  return undefined;
}

/**
 * Parses argv words (after the program name) against a grammar. A word only known at run time is
 * an operand when it cannot start with `-` (or when every option of the program is harmless); an
 * option whose name is written and whose value is dynamic (`--format=$f`, `-n$N`) is read as that
 * option. Anything else that could expand to an option fails the parse.
 */
export function parseArgs(g: Grammar, args: readonly Arg[], program: string): ParseResult {
  const options: ParsedOption[] = [];
  const operands: Arg[] = [];
  let optionsDone = false;
  const fail = (reason: string): ParseResult => ({ ok: false, reason });
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (optionsDone) {
      operands.push(a);
      continue;
    }
    const known = a.value !== undefined;
    const text = known ? a.value! : knownHead(a);
    if (known && (text === '--' || (g.endOfOptions && text === '--end-of-options'))) {
      optionsDone = true;
      continue;
    }
    if (!text.startsWith('-') || text === '-') {
      if (!known && a.mayBeOption && !g.harmlessOptions) {
        return fail(`${program} argument ${a.raw} is only known at run time and could expand to an option`);
      }
      operands.push(a);
      if (!g.permute) optionsDone = true;
      continue;
    }
    if (g.numeric && known && /^-\d+$/.test(text)) {
      options.push({ def: { name: '-NUM', arg: 'none', key: '-NUM' }, word: a, value: text.slice(1) });
      continue;
    }
    if (text.startsWith('--')) {
      const eq = text.indexOf('=');
      if (!known && eq < 0)
        return fail(`${program} argument ${a.raw} is only known at run time and could expand to an option`);
      const name = text.slice(2, eq < 0 ? undefined : eq);
      const def = resolveLong(g, name);
      if (def === 'ambiguous') return fail(`${program} option --${name} is ambiguous`);
      if (!def) return fail(`${program} option --${name} is not known to be harmless`);
      if (eq >= 0) {
        if (def.arg === 'none') return fail(`${program} option ${def.name} takes no value`);
        options.push({ def, word: a, value: known ? text.slice(eq + 1) : a });
        continue;
      }
      if (def.arg === 'required' || (def.arg === 'lastDefault' && i + 1 < args.length)) {
        const next = args[i + 1];
        if (!next) return fail(`${program} option ${def.name} needs a value`);
        options.push({ def, word: a, value: next });
        i++;
        continue;
      }
      options.push({ def, word: a });
      continue;
    }
    // A bundle of short options.
    let consumedValue = false;
    for (let j = 1; j < text.length; j++) {
      const ch = text[j]!;
      const def = g.short.get(ch);
      if (!def) return fail(`${program} option -${ch} is not known to be harmless`);
      if (def.arg === 'none') {
        options.push({ def, word: a });
        continue;
      }
      const rest = text.slice(j + 1);
      if (rest || !known) {
        options.push({ def, word: a, value: known ? rest : a });
      } else if (def.arg === 'required') {
        const next = args[i + 1];
        if (!next) return fail(`${program} option -${ch} needs a value`);
        options.push({ def, word: a, value: next });
        i++;
      } else {
        options.push({ def, word: a });
      }
      consumedValue = true;
      break;
    }
    if (!known && !consumedValue)
      return fail(`${program} argument ${a.raw} is only known at run time and could expand to more options`);
  }
  return { ok: true, args: { options, operands } };
}

/** The known text at the start of a word that is not fully known. */
function knownHead(a: Arg): string {
  const star = a.pattern.search(/(?<!\\)[*?[{]/);
  const head = star < 0 ? a.pattern : a.pattern.slice(0, star);
  return head.replace(/\\(.)/g, '$1');
}

/** The string value of an option's value, when known. */
export function optionValue(o: ParsedOption): string | undefined {
  if (o.value === undefined) return undefined;
  return typeof o.value === 'string' ? o.value : o.value.value;
}

/** Whether an option with this key was given. */
export function has(args: ParsedArgs, ...keys: string[]): boolean {
  return args.options.some((o) => keys.includes(o.def.key));
}
