import { andOrChain, type Syntax } from '@conch/shell-syntax';
import type { Part } from '../facts.js';

/** A fork bomb in a text the gate could not parse: a function piping into itself in the background. */
const FORK_BOMB_TEXT = /(?<![\w:.-])([A-Za-z_:.][\w:.-]*)\s*\(\s*\)\s*\{[^}]*?\1\s*[|&]/;

/**
 * Rule `safety:forkBomb`: a function that calls itself in a pipeline or in the background (in
 * `f() { … }` or `function f { … }` syntax, `:(){ :|:& };:` included), or a loop that never ends
 * and starts background jobs (`while true; do x & done`), is denied: it exhausts the process
 * table.
 */
export function forkBomb(tree: Syntax.SyntaxTree | undefined, source: string): Part[] {
  const deny = (reason: string): Part[] => [
    { command: clip(source), verdict: 'deny', reason, rule: 'safety:forkBomb' },
  ];
  if (!tree) return FORK_BOMB_TEXT.test(source.slice(0, 1 << 16)) ? deny('this is a fork bomb') : [];
  let found: string | undefined;
  const visitSeq = (seq: Syntax.Sequence, fn: string | undefined, spawning: boolean) => {
    for (const item of seq.items) visit(item.statement, fn, spawning || item.background);
  };
  const visit = (st: Syntax.Statement, fn: string | undefined, spawning: boolean): void => {
    if (found) return;
    switch (st.kind) {
      case 'function':
        visit(st.body, st.name, false);
        return;
      case 'simple': {
        const name =
          st.words[0]?.parts.length === 1 && st.words[0].parts[0]!.kind === 'text'
            ? st.words[0].parts[0]!.value
            : undefined;
        if (fn !== undefined && name === fn && spawning)
          found = `the function ${fn} calls itself in a pipeline or in the background (a fork bomb)`;
        return;
      }
      case 'pipeline':
        for (const s of st.stages) visit(s, fn, true);
        return;
      case 'and-or':
        for (const item of andOrChain(st).items) visit(item, fn, spawning);
        return;
      case 'subshell':
      case 'group':
        visitSeq(st.body, fn, spawning);
        return;
      case 'negated':
        visit(st.body, fn, spawning);
        return;
      case 'if':
        for (const c of st.clauses) {
          visitSeq(c.condition, fn, spawning);
          visitSeq(c.body, fn, spawning);
        }
        if (st.otherwise) visitSeq(st.otherwise, fn, spawning);
        return;
      case 'for':
      case 'case':
        if (st.kind === 'for') visitSeq(st.body, fn, spawning);
        else for (const item of st.items) visitSeq(item.body, fn, spawning);
        return;
      case 'while':
        visitSeq(st.condition, fn, spawning);
        if (endless(st) && backgrounds(st.body))
          found = 'a loop that never ends starts background jobs on every turn (a fork bomb)';
        visitSeq(st.body, fn, spawning);
        return;
      case 'arithmetic':
        if (st.body) {
          if (/^for\s*\(\(\s*;\s*;\s*\)\)/.test(st.text) && backgrounds(st.body))
            found = 'a loop that never ends starts background jobs on every turn (a fork bomb)';
          visitSeq(st.body, fn, spawning);
        }
        return;
      default:
        return;
    }
  };
  visitSeq(tree.body, undefined, false);
  return found ? deny(found) : [];
}

function endless(st: Syntax.While): boolean {
  const items = st.condition.items;
  if (items.length !== 1) return false;
  const c = items[0]!.statement;
  if (c.kind !== 'simple' || c.words.length !== 1) return false;
  const w = c.words[0]!.text;
  return st.until ? w === 'false' : w === 'true' || w === ':';
}

function backgrounds(seq: Syntax.Sequence): boolean {
  return seq.items.some(
    (i) =>
      i.background ||
      (i.statement.kind === 'group' || i.statement.kind === 'subshell'
        ? backgrounds(i.statement.body)
        : false),
  );
}

function clip(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}… (${text.length} chars)` : text;
}
