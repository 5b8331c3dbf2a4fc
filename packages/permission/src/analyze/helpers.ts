// Owns the small pieces the other modules of the analysis share: the summary of a line's parts
// into one verdict, copying and merging shell states, empty command facts and a writer's facts,
// the simple commands of a statement, and path containment.
import { andOrChain, type Syntax } from '@conch/shell-syntax';
import type { WriteFacts } from '../commands/writers.js';
import type { CommandFacts, Part, Verdict, WriteTarget } from '../facts.js';
import type { ShellState } from '../words.js';
import type { Analysis, State } from './context.js';

const RANK: Record<Verdict, number> = { allow: 0, ask: 1, deny: 2 };

/** The verdict of a line: deny beats ask beats allow; an empty line is allowed. */
export function summarize(parts: Part[]): Analysis {
  if (parts.length === 0) {
    const empty: Part = {
      command: '',
      verdict: 'allow',
      reason: 'the command is empty',
      rule: 'readOnly:empty',
    };
    return { verdict: 'allow', decisive: empty, parts: [empty], readOnly: true };
  }
  let decisive = parts[0]!;
  for (const p of parts) if (RANK[p.verdict] > RANK[decisive.verdict]) decisive = p;
  const readOnly = decisive.verdict === 'allow' && parts.every((p) => p.rule.startsWith('readOnly:'));
  return { verdict: decisive.verdict, decisive, parts, readOnly };
}

/** What a writer's arguments write, added to the facts of the command the rules judge. */
export function addWriteFacts(facts: CommandFacts, wf: WriteFacts): void {
  facts.writes.push(...wf.writes);
  facts.intoDirs.push(...wf.intoDirs);
  facts.trees.push(...wf.trees);
  if (wf.copies) facts.copies.push(...wf.copies);
  if (wf.gitExecKey) facts.gitExecKey = wf.gitExecKey;
}

export function emptyFacts(shown: string, cwds: readonly string[] | undefined): CommandFacts {
  return {
    shown,
    programs: [],
    args: [],
    cwds,
    writes: [] as WriteTarget[],
    intoDirs: [],
    copies: [],
    trees: [],
    names: [],
  };
}

export function toShell(state: State, home: string): ShellState {
  return { home, cwds: state.cwds, vars: state.vars };
}

export function clone(state: State): State {
  return { cwds: state.cwds, vars: new Map(state.vars) };
}

/** The state after one of two paths: what both agree on, the rest unknown. */
export function union(a: State, b: State): State {
  if (a === b) return a;
  const cwds = a.cwds && b.cwds ? [...new Set([...a.cwds, ...b.cwds])] : undefined;
  const vars = new Map<string, string | null>();
  for (const key of new Set([...a.vars.keys(), ...b.vars.keys()])) {
    const x = a.vars.get(key);
    const y = b.vars.get(key);
    vars.set(key, x !== undefined && x === y ? x : null);
  }
  return { cwds, vars };
}

export function inside(abs: string, dir: string): boolean {
  return abs === dir || abs.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

/** The simple commands of a statement through pipelines, lists, subshells and groups (not loops). */
export function visitSimple(st: Syntax.Statement, fn: (cmd: Syntax.SimpleCommand) => void): void {
  switch (st.kind) {
    case 'simple':
      fn(st);
      return;
    case 'pipeline':
      st.stages.forEach((s) => visitSimple(s, fn));
      return;
    case 'and-or':
      for (const item of andOrChain(st).items) visitSimple(item, fn);
      return;
    case 'subshell':
    case 'group':
      st.body.items.forEach((i) => visitSimple(i.statement, fn));
      return;
    case 'negated':
      visitSimple(st.body, fn);
      return;
    default:
      return;
  }
}
