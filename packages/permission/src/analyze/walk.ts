// Owns how bash reads the line: the walk of the syntax tree from the whole line through sequences,
// and-or lists, pipelines and compound commands (subshells, groups, if / for / while / case,
// functions, arithmetic, `[[ … ]]` tests) down to each simple command, which it hands to
// `simple-command.ts` through the context. Along the way it carries the shell state (working
// directories, variables) to where each branch leaves it, evaluates words and redirects, analyzes
// every command substitution as a command, and asks for every construct it does not know.
import { andOrChain, type ParsedCommand, type Syntax } from '@conch/shell-syntax';
import { dialectRisk } from '../dialect.js';
import { hasHidden } from '../display.js';
import type { CommandFacts, Verdict } from '../facts.js';
import { testArgvRisk } from '../commands/read-only.js';
import { literalOutput, splitFields } from '../interpreters.js';
import { namesEnviron } from '../needs/listing.js';
import { classifyName } from '../names.js';
import { HARMLESS_TARGET, shellGlob } from '../paths.js';
import { redirectRules, treeRules, unparsedLineRules } from '../rules/apply.js';
import { clip, evaluate, type Arg } from '../words.js';
import {
  NO_IO,
  parseOptions,
  type AnalysisContext,
  type Ends,
  type Io,
  type State,
  type Walk,
} from './context.js';
import { clone, emptyFacts, toShell, union } from './helpers.js';

/** Reads a command line (or a nested `-c` string): its parse, the line-level checks, its sequence. */
export function line(
  ctx: AnalysisContext,
  source: string,
  state: State,
  walk: Walk,
  given?: ParsedCommand,
): Ends {
  const shown = clip(source, 200);
  const add = (verdict: Verdict, reason: string, rule: string) =>
    walk.parts.push({ command: shown, verdict, reason, rule });
  const parsed = given ?? ctx.options.parser.parse(source, parseOptions(ctx.options));
  if (!parsed.ok || !parsed.syntax) {
    walk.parts.push(...unparsedLineRules(ctx, source, shown));
    // Over the parser's budget of work or its nesting limit: a command that big or that deep is
    // refused outright (the same command gets the same answer on any machine, and nobody reviews
    // it); a parse error or an oversize command asks as before.
    if (parsed.limit === 'work' || parsed.limit === 'depth')
      add(
        'deny',
        `the command is over the gate's limit: ${parsed.error ?? parsed.limit}`,
        'failClosed:limit',
      );
    else add('ask', `the command cannot be checked: ${parsed.error ?? 'parse error'}`, 'failClosed:parse');
    return { ok: state, fail: state };
  }
  const tree = parsed.syntax;
  if (hasHidden(parsed.source))
    add('ask', 'the command contains invisible or lookalike characters', 'failClosed:hiddenCharacters');
  if (parsed.normalizedSource !== undefined && continuationInsideWord(parsed.source))
    add(
      'ask',
      'a backslash-newline splits a word, which hides what really runs',
      'failClosed:lineContinuation',
    );
  if (tree.unknowns.length > 0) {
    const u = tree.unknowns[0]!;
    add(
      'ask',
      `the gate does not know the construct ${JSON.stringify(u.text)} (${u.nodeType})`,
      'failClosed:syntax',
    );
  }
  const dialect = dialectRisk(tree, walk.dialect);
  if (dialect) add('ask', dialect, 'failClosed:dialect');
  walk.parts.push(...treeRules(ctx, tree, parsed.normalizedSource ?? source));
  return sequence(ctx, tree.body, state, walk);
}

export function sequence(ctx: AnalysisContext, seq: Syntax.Sequence, state: State, walk: Walk): Ends {
  let current = state;
  let ends: Ends = { ok: state, fail: state };
  for (const item of seq.items) {
    if (item.background) {
      statement(ctx, item.statement, clone(current), walk, NO_IO);
      ends = { ok: current, fail: current };
      continue;
    }
    ends = statement(ctx, item.statement, current, walk, NO_IO);
    current = union(ends.ok, ends.fail);
  }
  return ends;
}

function statement(ctx: AnalysisContext, st: Syntax.Statement, state: State, walk: Walk, io: Io): Ends {
  if (st.kind !== 'simple' && st.redirects.length > 0) compoundRedirects(ctx, st, state, walk);
  const same: Ends = { ok: state, fail: state };
  const ask = (reason: string, rule: string) =>
    walk.parts.push({ command: clip(st.text, 200), verdict: 'ask', reason, rule });
  switch (st.kind) {
    case 'simple':
      return ctx.simple(st, state, walk, io);
    case 'pipeline':
      st.stages.forEach((stage, i) => {
        const text =
          i > 0 ? literalOutput(st.stages[i - 1]!, toShell(state, ctx.options.paths.home)) : io.stdinText;
        statement(ctx, stage, clone(state), walk, {
          stdinPiped: i > 0 || io.stdinPiped,
          ...(text !== undefined ? { stdinText: text } : {}),
        });
      });
      return same;
    case 'and-or': {
      // Left to right along the list (thousands of `&&` must not recurse): each operand runs in
      // the state its operator leaves, `a && b` when a succeeded, `a || b` when it failed.
      const chain = andOrChain(st);
      let ends = statement(ctx, chain.items[0]!, state, walk, io);
      for (let i = 1; i < chain.items.length; i++) {
        const node = chain.nodes[i - 1]!;
        if (node !== st && node.redirects.length > 0) compoundRedirects(ctx, node, state, walk);
        if (chain.operators[i - 1] === '&&') {
          const right = statement(ctx, chain.items[i]!, ends.ok, walk, io);
          ends = { ok: right.ok, fail: union(ends.fail, right.fail) };
        } else {
          const right = statement(ctx, chain.items[i]!, ends.fail, walk, io);
          ends = { ok: union(ends.ok, right.ok), fail: right.fail };
        }
      }
      return ends;
    }
    case 'subshell':
      sequence(ctx, st.body, clone(state), walk);
      return same;
    case 'group':
      return sequence(ctx, st.body, state, walk);
    case 'negated': {
      const e = statement(ctx, st.body, state, walk, io);
      return { ok: e.fail, fail: e.ok };
    }
    case 'if': {
      const all: State[] = [];
      let current = state;
      for (const clause of st.clauses) {
        const cond = sequence(ctx, clause.condition, current, walk);
        const body = sequence(ctx, clause.body, cond.ok, walk);
        all.push(body.ok, body.fail);
        current = cond.fail;
      }
      if (st.otherwise) {
        const e = sequence(ctx, st.otherwise, current, walk);
        all.push(e.ok, e.fail);
      } else all.push(current);
      const end = all.reduce(union);
      return { ok: end, fail: end };
    }
    case 'for': {
      assignedName(st.variable, `a ${st.select ? 'select' : 'for'} loop variable`, clip(st.text, 200), walk);
      for (const w of st.values ?? []) {
        const value = evaluate(w, toShell(state, ctx.options.paths.home));
        wordRisks(ctx, value, clip(st.text, 200), state, walk);
        // `for f in /proc/*/environ; do cat "$f"; done`: the loop hands each reader a listing.
        if (namesEnviron(value, state.cwds))
          walk.parts.push({
            command: clip(st.text, 200),
            verdict: 'ask',
            reason: `the loop goes over ${value.raw}, a process's environment (a listing like env)`,
            rule: 'failClosed:environmentListing',
          });
      }
      const inner = clone(state);
      inner.vars.set(st.variable, null);
      const body = sequence(ctx, st.body, inner, walk);
      const end = [state, body.ok, body.fail].reduce(union);
      return { ok: end, fail: end };
    }
    case 'while': {
      const cond = sequence(ctx, st.condition, state, walk);
      const body = sequence(ctx, st.body, cond.ok, walk);
      const end = [state, cond.fail, body.ok, body.fail].reduce(union);
      return { ok: end, fail: end };
    }
    case 'case': {
      const shown = clip(st.text, 200);
      wordRisks(ctx, evaluate(st.value, toShell(state, ctx.options.paths.home)), shown, state, walk);
      const all: State[] = [state];
      for (const item of st.items) {
        for (const p of item.patterns)
          wordRisks(ctx, evaluate(p, toShell(state, ctx.options.paths.home)), shown, state, walk);
        const e = sequence(ctx, item.body, state, walk);
        all.push(e.ok, e.fail);
      }
      const end = all.reduce(union);
      return { ok: end, fail: end };
    }
    case 'function': {
      const shown = clip(st.text, 200);
      if (st.name.startsWith('__conch_'))
        walk.parts.push({
          command: shown,
          verdict: 'deny',
          reason: `it redefines ${st.name}, a function of conch's terminal protocol`,
          rule: 'protocol:terminal',
        });
      ask(
        `it defines a shell function (${st.name}), which can shadow any command`,
        'failClosed:functionDefinition',
      );
      statement(ctx, st.body, clone(state), walk, NO_IO);
      return same;
    }
    case 'test':
      test(ctx, st, state, walk);
      return same;
    case 'arithmetic':
      ask('arithmetic evaluation (( … )) can run commands through array subscripts', 'failClosed:arithmetic');
      if (st.body) sequence(ctx, st.body, clone(state), walk);
      return same;
    case 'unknown':
      ask(
        `the gate does not know the construct ${JSON.stringify(clip(st.text, 60))} (${st.nodeType})`,
        'failClosed:syntax',
      );
      return same;
  }
}

/**
 * `[[ … ]]` and `[ … ]`: operands evaluated; arithmetic comparisons and `-v` only with plain
 * operands. `[` is the test builtin reading its words at run time (tree-sitter's structure is not
 * bash's there): its words are judged as test's argv, run-time words included (`[ "$op" "$x" ]`).
 */
function test(ctx: AnalysisContext, st: Syntax.Test, state: State, walk: Walk): void {
  const shown = clip(st.text, 200);
  const shell = toShell(state, ctx.options.paths.home);
  let risky: string | undefined;
  if (st.bracket === '[') {
    const words: Syntax.Word[] = [];
    const flatten = (e: Syntax.TestExpression | undefined): boolean => {
      if (!e) return true;
      switch (e.kind) {
        case 'word':
          words.push(e.word);
          return true;
        case 'unary':
          words.push(operatorWord(e.operator));
          return flatten(e.operand);
        case 'binary':
          if (!flatten(e.left)) return false;
          words.push(operatorWord(e.operator));
          return flatten(e.right);
        default:
          return false;
      }
    };
    if (flatten(st.expression)) risky = testArgvRisk(splitFields(words.map((w) => evaluate(w, shell))));
  }
  const visit = (e: Syntax.TestExpression | undefined) => {
    if (!e) return;
    switch (e.kind) {
      case 'word':
        wordRisks(ctx, evaluate(e.word, shell), shown, state, walk);
        return;
      case 'regex':
        return;
      case 'unknown':
        risky ??= `the gate does not know ${JSON.stringify(clip(e.text, 40))} in a test`;
        return;
      case 'unary':
        if ((e.operator === '-v' || e.operator === '-R') && !plainName(e.operand))
          risky ??= `${e.operator} evaluates an array subscript as arithmetic, which can run commands; only a plain variable name is known to be harmless`;
        visit(e.operand);
        return;
      case 'binary':
        if (
          st.bracket === '[[' &&
          /^-(eq|ne|lt|le|gt|ge)$/.test(e.operator) &&
          (!integer(e.left) || !integer(e.right))
        )
          risky ??= `[[ … ${e.operator} … ]] evaluates its operands as arithmetic, which can run commands through array subscripts; only integer literals are known to be harmless`;
        visit(e.left);
        visit(e.right);
        return;
    }
  };
  visit(st.expression);
  walk.parts.push(
    risky
      ? { command: shown, verdict: 'ask', reason: risky, rule: 'failClosed:arithmetic' }
      : { command: shown, verdict: 'allow', reason: 'a test only reads', rule: 'readOnly:test' },
  );
}

/** Redirects of a compound statement (`{ …; } > f`, `for … done > f`): a write wherever it attaches. */
function compoundRedirects(ctx: AnalysisContext, st: Syntax.Statement, state: State, walk: Walk): void {
  const shown = clip(st.text, 200);
  const facts = emptyFacts(shown, state.cwds);
  for (const r of st.redirects) redirect(ctx, r, state, walk, facts, shown);
  if (facts.writes.length > 0) {
    walk.parts.push({
      command: shown,
      verdict: 'ask',
      reason: `it writes ${facts.writes.map((w) => w.target.raw).join(', ')} through a redirection`,
      rule: 'unknown',
    });
    walk.parts.push(...redirectRules(ctx, facts));
  }
}

/** One redirect: its write target (if it writes), its risks and substitutions. */
export function redirect(
  ctx: AnalysisContext,
  r: Syntax.Redirect,
  state: State,
  walk: Walk,
  facts: CommandFacts,
  shown: string,
): void {
  const shell = toShell(state, ctx.options.paths.home);
  if (r.heredoc) {
    const h = r.heredoc;
    if (!h.quoted) {
      // tree-sitter does not parse backticks in bodies, so no body substitution is judged: they ask.
      if (h.backtick || h.parts.some((p) => p.kind === 'command-sub' || p.kind === 'process-sub'))
        walk.parts.push({
          command: shown,
          verdict: 'ask',
          reason: 'the here-document body runs a command substitution ($(…) or `…`)',
          rule: 'failClosed:commandSubstitution',
        });
      const fake: Syntax.Word = { text: h.body, parts: h.parts, start: 0, end: 0 };
      wordRisks(ctx, evaluate(fake, shell), shown, state, walk);
    }
    return;
  }
  if (!r.target) return;
  const target = evaluate(r.target, shell);
  wordRisks(ctx, target, shown, state, walk);
  const op = r.operator;
  // bash opens a connection for /dev/tcp/HOST/PORT and /dev/udp/HOST/PORT in any redirection,
  // input included (`cat < /dev/tcp/h/80`, `exec 3<>/dev/udp/h/53`): a network access.
  if (networkPath(target)) {
    walk.line.downloads.push(shown);
    walk.parts.push({
      command: shown,
      verdict: 'ask',
      reason: `the redirection ${op} ${target.raw} opens a network connection (bash's /dev/tcp and /dev/udp)`,
      rule: 'failClosed:network',
    });
  }
  // Input from a process's environment (`read -d '' x < /proc/self/environ`) lists it like env.
  if ((op === '<' || op === '<>') && namesEnviron(target, state.cwds))
    walk.parts.push({
      command: shown,
      verdict: 'ask',
      reason: `it reads ${target.raw}, a process's environment (a listing like env)`,
      rule: 'failClosed:environmentListing',
    });
  if (op === '<<<' || op === '<' || op === '<&' || op === '>&-' || op === '<&-') return;
  if (op === '>&' || op === '&>' || op === '&>>' || op === '>' || op === '>>' || op === '>|' || op === '<>') {
    // `>&2`, `2>&1`, `>&-`: descriptors, not files.
    if (op === '>&' && target.value !== undefined && /^(\d+|-)$/.test(target.value)) return;
    if (target.value !== undefined && HARMLESS_TARGET.test(target.value)) return;
    facts.writes.push({ target, via: `the redirection ${op}`, followFinal: true });
  }
}

/** Risks of an evaluated word become asks; its substitutions are analyzed as commands. */
export function wordRisks(ctx: AnalysisContext, arg: Arg, shown: string, state: State, walk: Walk): void {
  for (const risk of arg.risks)
    walk.parts.push({ command: shown, verdict: 'ask', reason: risk.reason, rule: risk.rule });
  for (const sub of arg.subs) sequence(ctx, sub.body, clone(state), walk);
  for (const name of arg.assigns) assignedName(name, '${name:=value}', shown, walk);
}

/** A name assigned somehow: the protocol names are denied, special ones ask. */
export function assignedName(name: string, how: string, shown: string, walk: Walk): void {
  const c = classifyName(name);
  if (c.kind === 'protocol')
    walk.parts.push({
      command: shown,
      verdict: 'deny',
      reason: `it changes ${name} (${how}), a variable of conch's terminal protocol`,
      rule: 'protocol:terminal',
    });
  else if (c.kind !== 'inert')
    walk.parts.push({
      command: shown,
      verdict: 'ask',
      reason: `it assigns ${name} through ${how}: ${c.reason}`,
      rule: 'failClosed:environment',
    });
}

function operatorWord(text: string): Syntax.Word {
  return { text, parts: [{ kind: 'text', value: text, quoting: 'none' }], start: 0, end: 0 };
}

/** A redirect target that may be bash's /dev/tcp or /dev/udp (`/dev/tcp/$host/80` included). */
function networkPath(target: Arg): boolean {
  if (target.value !== undefined) return /^\/dev\/(tcp|udp)\//.test(target.value);
  const m = /^\/dev\/([^/]*)\//.exec(target.pattern);
  if (!m) return false;
  try {
    const re = shellGlob(m[1]!, true);
    return re.test('tcp') || re.test('udp');
  } catch {
    return true;
  }
}

function plainName(e: Syntax.TestExpression): boolean {
  if (e.kind !== 'word') return false;
  const p = e.word.parts;
  return p.length === 1 && p[0]!.kind === 'text' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(p[0]!.value);
}

function integer(e: Syntax.TestExpression): boolean {
  if (e.kind !== 'word') return false;
  const p = e.word.parts;
  return p.length === 1 && p[0]!.kind === 'text' && /^-?\d+$/.test(p[0]!.value);
}

function continuationInsideWord(source: string): boolean {
  for (let at = source.indexOf('\\\n'); at >= 0; at = source.indexOf('\\\n', at + 2)) {
    const before = source[at - 1];
    const after = source[at + 2];
    if (before !== undefined && !/\s/.test(before) && after !== undefined && !/\s/.test(after)) return true;
  }
  return false;
}
