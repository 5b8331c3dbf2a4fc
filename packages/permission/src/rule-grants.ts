// Owns the snapshots that pin a rule to what it let run when it was granted. A host allow rule is
// granted when the gate is made: everything the commands it matches could execute in the workspace
// is snapshotted then (executed-files.ts, over one bounded walk of the workspace). An `always`
// answer is granted when the human gives it: what the approved command executes is snapshotted.
// When a rule lets a command run with the user's rights, what that command executes now is
// compared with the rule's snapshot: a file that changed, is new or cannot be read means the rule
// no longer vouches for it, and the gate asks.
import type { Part } from './facts.js';
import type { CompiledRule } from './host-rules.js';
import { executedBy, grantedBy, type Executed, type Pattern } from './executed-files.js';
import { ABSENT, BEYOND_BOUND, GRANT_LIMITS, reader, UNREADABLE, type Reader } from './executed-pieces.js';
import { indexWorkspace, type IndexLimits, type WorkspaceIndex } from './workspace-index.js';

/** What a rule let run when it was granted: digests by piece, and what the snapshot did not reach. */
interface Snapshot {
  digests: Map<string, string>;
  incomplete?: string;
}

/** Why a rule no longer vouches for a command: the file, and a reason naming it. */
export interface Change {
  /** The file (relative to the workspace inside it), or undefined when the files cannot be told. */
  file?: string;
  reason: string;
}

export interface RuleGrantsOptions {
  workspaceRoot: string;
  home: string;
  /** Bounds of the walk and of the reads a grant makes (tests make them small). */
  limits?: { index?: IndexLimits; read?: { files: number; bytes: number } };
}

export class RuleGrants {
  private readonly snapshots = new Map<CompiledRule, Snapshot>();

  constructor(private readonly options: RuleGrantsOptions) {}

  /**
   * Grants the host's allow rules: snapshots, for each, everything the commands it matches could
   * execute in the workspace now. One walk of the workspace (only when a rule needs it) and one
   * budget of reads serve every rule; what lies beyond them is not in any snapshot, so commands
   * that would execute it ask.
   */
  grantHostRules(rules: readonly CompiledRule[]): void {
    if (rules.length === 0) return;
    const r = this.reader(this.options.limits?.read ?? GRANT_LIMITS);
    let index: WorkspaceIndex | undefined;
    const lazyIndex = () =>
      (index ??= indexWorkspace(this.options.workspaceRoot, this.options.limits?.index));
    for (const rule of rules) {
      try {
        const pieces = grantedBy(rulePattern(rule), lazyIndex, r);
        this.record(rule, { pieces }, index?.incomplete ?? r.budget.exceeded);
      } catch (error) {
        // Nothing is recorded: what the rule's commands execute is asked (a defect must not let code through).
        this.record(rule, { pieces: [] }, `the snapshot failed: ${String(error)}`);
      }
    }
  }

  /** Grants an `always` answer: snapshots what `parts` (the approved command) execute now. */
  grantApproved(rule: CompiledRule, parts: readonly Part[]): void {
    const r = this.reader();
    const executed = parts.map((p) => executedOf(p, r));
    this.record(rule, { pieces: executed.flatMap((e) => e.pieces) }, r.budget.exceeded);
  }

  /**
   * Which of `rules` still vouches for everything `parts` execute: the first whose snapshot holds,
   * or the change that stops the last one (undefined when `rules` is empty).
   */
  vouch(
    rules: readonly CompiledRule[],
    parts: readonly Part[],
  ): { rule: CompiledRule; change?: undefined } | { rule: CompiledRule; change: Change } | undefined {
    if (rules.length === 0) return undefined;
    const r = this.reader();
    const executed = parts.map((p): [Part, Executed] => [p, executedOf(p, r)]);
    // When none holds, the reason names the rule granted last (a session rule after the host's).
    let last: { rule: CompiledRule; change: Change } | undefined;
    for (const rule of rules) {
      const change = this.compare(rule, executed);
      if (!change) return { rule };
      last = { rule, change };
    }
    return last;
  }

  private compare(rule: CompiledRule, executed: readonly [Part, Executed][]): Change | undefined {
    const snapshot: Snapshot = this.snapshots.get(rule) ?? { digests: new Map() };
    const granted = `the rule "${rule.text}" was granted`;
    for (const [part, e] of executed) {
      if (e.unknown)
        return {
          reason: `the gate cannot tell which files \`${part.command}\` executes (${e.unknown}), so the rule "${rule.text}" cannot vouch for it`,
        };
      for (const p of e.pieces) {
        if (p.digest.startsWith(UNREADABLE)) {
          return {
            file: p.file,
            reason:
              p.digest === BEYOND_BOUND
                ? `${p.label} is more than conch reads to check it, so it cannot be shown unchanged since ${granted}`
                : `${p.label} cannot be read (${p.digest.slice(UNREADABLE.length)}), so it cannot be shown unchanged since ${granted}`,
          };
        }
        const then = snapshot.digests.get(p.key);
        if (then === p.digest || (then === undefined && p.digest === ABSENT)) continue;
        if (then === undefined && snapshot.incomplete)
          return {
            file: p.file,
            reason: `${p.label} is not in the snapshot taken when ${granted} (${snapshot.incomplete}), so it cannot be shown unchanged`,
          };
        return {
          file: p.file,
          reason:
            then === undefined || then === ABSENT
              ? `${p.label} is new since ${granted} (a sandboxed command may have written what it runs)`
              : `${p.label} changed since ${granted} (a sandboxed command may have rewritten what it runs)`,
        };
      }
    }
    return undefined;
  }

  private record(rule: CompiledRule, executed: Executed, incomplete: string | undefined): void {
    const digests = new Map<string, string>();
    // What could not be read is not recorded: a command that executes it is asked.
    for (const p of executed.pieces) if (!p.digest.startsWith(UNREADABLE)) digests.set(p.key, p.digest);
    this.snapshots.set(rule, { digests, ...(incomplete ? { incomplete } : {}) });
  }

  private reader(limits?: { files: number; bytes: number }): Reader {
    return reader(this.options.workspaceRoot, this.options.home, limits);
  }
}

/** What a part executes; a failure to tell is an unknown (it asks), never an empty answer. */
function executedOf(part: Part, r: Reader): Executed {
  if (!part.run) return { pieces: [] };
  try {
    return executedBy(part.run, r);
  } catch (error) {
    return { pieces: [], unknown: `reading them failed: ${String(error)}` };
  }
}

/**
 * A rule's text as the runners read it: prefix syntax split into words (`npm run test:*`: the
 * words `npm run test`, the last of which may go on, more may follow); a regex by its literal
 * start (`^make( …` is `make…`), or 'any' when it has none.
 */
export function rulePattern(rule: CompiledRule): Pattern | 'any' {
  if (rule.regex) {
    const m = /^\/(.*)\/([a-z]*)$/s.exec(rule.text);
    if (!m || m[2]!.includes('i') || !m[1]!.startsWith('^')) return 'any';
    const source = m[1]!.slice(1);
    let literal = '';
    let i = 0;
    for (; i < source.length; i++) {
      const c = source[i]!;
      if (c === '\\' && i + 1 < source.length && !/[A-Za-z0-9]/.test(source[i + 1]!)) literal += source[++i]!;
      else if (/[A-Za-z0-9 _/:=@%,~-]/.test(c)) literal += c;
      else break;
    }
    const rest = source.slice(i);
    // A quantifier makes the last literal character optional or repeated.
    if (/^[?*+{]/.test(rest)) literal = literal.slice(0, -1);
    const exact = rest === '$';
    const words = splitWords(literal);
    if (!words || words.length === 0) return 'any';
    return { words, partial: !exact && !literal.endsWith(' '), open: !exact };
  }
  let text = rule.text;
  let partial = false;
  let open = false;
  if (text.endsWith(' *')) {
    text = text.slice(0, -2);
    open = true;
  } else if (text.endsWith('*')) {
    // `npm run test:*`, `git log*`: the last word may go on, and more words may follow.
    text = text.slice(0, text.endsWith(':*') ? -2 : -1).trimEnd();
    partial = open = true;
  }
  const words = splitWords(text);
  if (!words || words.length === 0) return 'any';
  return { words, partial, open };
}

/** Words as the shell reads them: white space between, single and double quotes, backslashes. */
function splitWords(text: string): string[] | undefined {
  const words: string[] = [];
  let word: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === ' ' || c === '\t') {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) return undefined;
      word = (word ?? '') + text.slice(i + 1, end);
      i = end;
    } else if (c === '"') {
      let value = '';
      let j = i + 1;
      for (; j < text.length && text[j] !== '"'; j++) {
        if (text[j] === '\\' && j + 1 < text.length && '"\\$`'.includes(text[j + 1]!)) j++;
        value += text[j];
      }
      if (j >= text.length) return undefined;
      word = (word ?? '') + value;
      i = j;
    } else if (c === '\\' && i + 1 < text.length) {
      word = (word ?? '') + text[++i];
    } else word = (word ?? '') + c;
  }
  if (word !== undefined) words.push(word);
  return words;
}
