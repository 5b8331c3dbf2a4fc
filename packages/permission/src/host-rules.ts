import type { RuleInput } from './config.js';

export type RuleList = 'allow' | 'ask' | 'deny';

/** A host rule ready to match: `text` is how it is shown and suggested. */
export interface CompiledRule {
  list: RuleList;
  text: string;
  index: number;
  test(commandText: string): boolean;
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

/**
 * Host rules on one command: deny and ask rules match any wrapper level (`timeout 5 git push`
 * is `git push` too); allow rules only the full command or its innermost level. Deny beats ask
 * beats allow. Returns the decision of the first rule that matches, or undefined.
 */
export function matchHostRules(
  rules: HostRules,
  levelTexts: readonly string[],
  allowRules: readonly CompiledRule[],
): { verdict: 'allow' | 'ask' | 'deny'; reason: string; rule: string } | undefined {
  for (const rule of rules.deny) {
    if (levelTexts.some((t) => rule.test(t)))
      return { verdict: 'deny', reason: `the host rule "${rule.text}" denies it`, rule: `deny:${rule.text}` };
  }
  for (const rule of rules.ask) {
    if (levelTexts.some((t) => rule.test(t)))
      return { verdict: 'ask', reason: `the host rule "${rule.text}" asks for it`, rule: `ask:${rule.text}` };
  }
  if (levelTexts.length === 0) return undefined;
  const candidates = [levelTexts[0]!, levelTexts[levelTexts.length - 1]!];
  for (const rule of allowRules) {
    if (candidates.some((t) => rule.test(t)))
      return { verdict: 'allow', reason: `the rule "${rule.text}" allows it`, rule: `allow:${rule.text}` };
  }
  return undefined;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
