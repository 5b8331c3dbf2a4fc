import type { RuleInput } from './config.js';

export type RuleList = 'allow' | 'ask' | 'deny';

/** A host rule ready to match: `text` is how it is shown and suggested. */
export interface CompiledRule {
  list: RuleList;
  text: string;
  index: number;
  test(commandText: string): boolean;
  /** Prefix syntax without a wildcard: it matches exactly its own text. */
  exact: boolean;
  /** A regex rule (`text` is `/source/flags`). */
  regex: boolean;
  /**
   * A session rule (an `always` answer): the directory the approved command ran in. It holds only
   * for the same command, exactly as written, run in that same directory.
   */
  cwd?: string;
  examples?: { match: string[]; notMatch: string[] };
}

/**
 * Compiles one rule. Prefix syntax: `git status` matches exactly that command; `npm run test:*`
 * matches `npm run test` followed by nothing, a space or `:` and anything; `ls *` matches `ls`
 * with any arguments; `git log*` is a plain prefix. `*` is only allowed at the end. The text is
 * matched against each simple command's words (after quote removal) joined by single spaces.
 */
export function compileRule(list: RuleList, index: number, input: RuleInput): CompiledRule | string {
  if (typeof input === 'string' || 'pattern' in input) {
    const pattern = (typeof input === 'string' ? input : input.pattern).trim().replace(/\s+/g, ' ');
    const star = pattern.indexOf('*');
    if (star >= 0 && star !== pattern.length - 1)
      return `'*' is only allowed at the end of a rule (got ${JSON.stringify(pattern)})`;
    let re: RegExp;
    if (pattern.endsWith(':*')) {
      const head = escapeRegExp(pattern.slice(0, -2).trimEnd());
      re = new RegExp(`^${head}(?:$|[ :].*$)`, 's');
    } else if (pattern.endsWith(' *')) {
      re = new RegExp(`^${escapeRegExp(pattern.slice(0, -2))}(?:$| .*$)`, 's');
    } else if (pattern.endsWith('*')) {
      re = new RegExp(`^${escapeRegExp(pattern.slice(0, -1))}.*$`, 's');
    } else {
      re = new RegExp(`^${escapeRegExp(pattern)}$`, 's');
    }
    if (pattern === '*' || pattern === ':*') re = /^.*$/s;
    const examples = typeof input === 'string' ? undefined : input.examples;
    return {
      list,
      text: pattern,
      index,
      test: (t) => re.test(t),
      exact: !pattern.endsWith('*'),
      regex: false,
      ...(examples ? { examples: norm(examples) } : {}),
    };
  }
  let re: RegExp;
  try {
    re = new RegExp(input.regex, input.flags);
  } catch (error) {
    return `invalid regex ${JSON.stringify(input.regex)}: ${(error as Error).message}`;
  }
  return {
    list,
    text: `/${input.regex}/${input.flags ?? ''}`,
    index,
    test: (t) => re.test(t),
    exact: false,
    regex: true,
    ...(input.examples ? { examples: norm(input.examples) } : {}),
  };
}

function norm(examples: { match?: string[] | undefined; notMatch?: string[] | undefined }) {
  return { match: examples.match ?? [], notMatch: examples.notMatch ?? [] };
}

export interface HostRules {
  allow: CompiledRule[];
  ask: CompiledRule[];
  deny: CompiledRule[];
}

/** The texts of one simple command that host rules are matched against (see `analyze/host-match.ts`). */
export interface CommandTexts {
  /**
   * What deny and ask rules match: every wrapper level, each as written and as resolved (the
   * program's base name, git's / npm's / docker's / kubectl's global options skipped to the
   * subcommand), so any spelling of a denied command is denied.
   */
  any: readonly string[];
  /**
   * What host allow rules match: the full command and its innermost level, words quoted where
   * they hold spaces or shell syntax, and resolved only where resolving changes nothing that runs.
   */
  allow: readonly string[];
  /** What session rules match: the full command exactly as written (words quoted), or undefined. */
  exact: string | undefined;
  /** Where the command runs (undefined: not known). Session rules hold only in their own directory. */
  cwds: readonly string[] | undefined;
}

/**
 * Host rules on one command: deny and ask rules match any spelling at any wrapper level
 * (`timeout 5 git push`, `git -C . push`, `/usr/bin/git push` are `git push`); allow rules the
 * full command or its innermost level; session rules only the exact command they were approved
 * for, in the directory it ran in. Deny beats ask beats allow. Returns the decision of the first
 * rule that matches, or undefined.
 */
export function matchHostRules(
  rules: HostRules,
  texts: CommandTexts,
  allowRules: readonly CompiledRule[],
): { verdict: 'allow' | 'ask' | 'deny'; reason: string; rule: string; matched?: CompiledRule } | undefined {
  for (const rule of rules.deny) {
    if (texts.any.some((t) => rule.test(t)))
      return { verdict: 'deny', reason: `the host rule "${rule.text}" denies it`, rule: `deny:${rule.text}` };
  }
  for (const rule of rules.ask) {
    if (texts.any.some((t) => rule.test(t)))
      return { verdict: 'ask', reason: `the host rule "${rule.text}" asks for it`, rule: `ask:${rule.text}` };
  }
  for (const rule of allowRules) {
    if (allowHit(rule, texts))
      return {
        verdict: 'allow',
        reason: `the rule "${rule.text}" allows it`,
        rule: `allow:${rule.text}`,
        matched: rule,
      };
  }
  return undefined;
}

/**
 * Whether an allow rule matches: a host rule the full or innermost command, a session rule only the
 * exact command it was approved for, in the directory it ran in.
 */
export function allowHit(rule: CompiledRule, texts: CommandTexts): boolean {
  return rule.cwd === undefined
    ? texts.allow.some((t) => rule.test(t))
    : texts.exact !== undefined &&
        rule.test(texts.exact) &&
        texts.cwds !== undefined &&
        texts.cwds.length > 0 &&
        texts.cwds.every((c) => c === rule.cwd);
}

/**
 * Whether a rule names `word` literally: one of its words is that word, or ends with it after an
 * `=` (`--output=~/.bash_aliases`). A regex rule names it when its source holds it verbatim.
 */
export function ruleNames(rule: CompiledRule, word: string): boolean {
  if (word === '') return false;
  if (rule.regex) return rule.text.replace(/\\(.)/g, '$1').includes(word);
  return rule.text
    .replace(/(:\*|\s\*|\*)$/, '')
    .split(' ')
    .some((w) => w === word || w.replace(/^'(.*)'$/s, '$1') === word || w.endsWith(`=${word}`));
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
