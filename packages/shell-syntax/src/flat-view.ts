import { andOrChain } from './chains.js';
import type * as Syntax from './syntax-types.js';
import type { Assignment, Redirect, ShellOperator, SimpleCommand, SyntaxFlags } from './types.js';
import { hasGlob, literalValue } from './word-facts.js';

/**
 * Builtins that only exist inside a shell: running them as argv fails or does nothing. Every
 * bash 5 builtin (`compgen -b`) but those that are also programs in coreutils and procps (`[`,
 * `echo`, `false`, `kill`, `printf`, `pwd`, `test`, `true`). `command -v node`, the usual way to
 * ask whether a tool is installed, came back COMMAND_NOT_FOUND when `command` was missing here.
 * And `time`, the reserved word that times a pipeline in bash and zsh: as argv it ran GNU time where
 * that package is installed (another output and other options) and failed where it is not (most
 * images' base).
 */
const SHELL_ONLY_BUILTINS = new Set([
  '.',
  ':',
  'alias',
  'bg',
  'bind',
  'break',
  'builtin',
  'caller',
  'command',
  'cd',
  'compgen',
  'complete',
  'compopt',
  'continue',
  'declare',
  'dirs',
  'disown',
  'enable',
  'eval',
  'exec',
  'exit',
  'export',
  'fc',
  'fg',
  'getopts',
  'hash',
  'help',
  'history',
  'jobs',
  'let',
  'local',
  'logout',
  'mapfile',
  'popd',
  'pushd',
  'read',
  'readarray',
  'readonly',
  'return',
  'set',
  'shift',
  'shopt',
  'source',
  'suspend',
  'time',
  'times',
  'trap',
  'type',
  'typeset',
  'ulimit',
  'umask',
  'unalias',
  'unset',
  'wait',
]);

/** `${x@P}` and the other @-transforms, and `${!x}` indirection. */
const TRANSFORM = /@[QEPAaKkUuL]\}$|^\$\{!/;

export function emptyFlags(): SyntaxFlags {
  return {
    commandSubstitution: false,
    processSubstitution: false,
    arithmetic: false,
    parameterExpansion: false,
    parameterTransform: false,
    variables: false,
    subshell: false,
    braceGroup: false,
    heredoc: false,
    herestring: false,
    background: false,
    glob: false,
    braceExpansion: false,
    tilde: false,
    pipeline: false,
    chaining: false,
    multipleStatements: false,
    redirection: false,
    ansiCQuoting: false,
    localeString: false,
    lineContinuation: false,
    comment: false,
    functionDefinition: false,
    controlFlow: false,
    testCommand: false,
    negation: false,
    declaration: false,
    assignment: false,
    shellBuiltin: false,
    parseError: false,
  };
}

/** The flat view of a command line: every simple command, operator and redirect, and the flags. */
export interface FlatView {
  commands: SimpleCommand[];
  operators: ShellOperator[];
  redirects: Redirect[];
  flags: SyntaxFlags;
}

/** Where a statement sits: inside what, and in which pipeline stage. */
interface Context {
  nested: boolean;
  inSubstitution: boolean;
  stage: { id: number; stage: number } | undefined;
}

/**
 * Derives the flat view (`ParsedCommand.commands`, `operators`, `redirects`, `flags`) from the
 * typed syntax tree: a pure function of the tree, so a command is read from tree-sitter once.
 * Commands and redirects come out in source order; operators in the order they are written.
 */
export function flatView(tree: Syntax.SyntaxTree): FlatView {
  const builder = new FlatBuilder();
  builder.sequence(tree.body, { nested: false, inSubstitution: false, stage: undefined });
  const flags = builder.flags;
  if (tree.body.items.length > 1) flags.multipleStatements = flags.chaining = true;
  if (tree.comments.length > 0) flags.comment = true;
  if (tree.lineContinuations.length > 0) flags.lineContinuation = true;
  if (tree.errors.length > 0) flags.parseError = true;
  // A statement's parts are visited before the redirects hung on it, and redirects nested in a
  // substitution before the statement's own: sorting (stable) restores the order they are written.
  const byStart = (a: { start: number }, b: { start: number }) => a.start - b.start;
  builder.commands.sort(byStart);
  builder.redirects.sort(byStart);
  return {
    commands: builder.commands,
    operators: builder.operators,
    redirects: builder.redirects.map((r) => r.flat),
    flags,
  };
}

class FlatBuilder {
  readonly flags = emptyFlags();
  readonly commands: SimpleCommand[] = [];
  readonly operators: ShellOperator[] = [];
  readonly redirects: { start: number; flat: Redirect }[] = [];
  private pipelines = 0;

  sequence(seq: Syntax.Sequence, ctx: Context): void {
    for (const item of seq.items) {
      this.statement(item.statement, ctx);
      if (item.background) this.flags.background = true;
      if (item.separator) {
        this.operators.push(item.separator);
        if (item.separator === ';') this.flags.chaining = true;
      }
    }
  }

  private statement(st: Syntax.Statement, ctx: Context): void {
    const inner: Context = { ...ctx, nested: true };
    switch (st.kind) {
      case 'simple':
        this.simple(st, ctx);
        return;
      case 'pipeline': {
        this.flags.pipeline = true;
        const id = this.pipelines++;
        st.stages.forEach((stage, i) => {
          if (i > 0) this.operators.push(st.operators[i - 1] ?? '|');
          this.statement(stage, { ...ctx, stage: { id, stage: i } });
        });
        break;
      }
      case 'and-or': {
        // Left to right without recursing down the left spine (a list can be thousands long).
        const chain = andOrChain(st);
        chain.items.forEach((item, i) => {
          if (i > 0) this.operators.push(chain.operators[i - 1]!);
          this.statement(item, ctx);
        });
        this.flags.chaining = true;
        for (const node of chain.nodes)
          if (node !== st) for (const r of node.redirects) this.redirect(r, ctx);
        break;
      }
      case 'subshell':
        this.flags.subshell = true;
        this.sequence(st.body, inner);
        break;
      case 'group':
        this.flags.braceGroup = true;
        this.sequence(st.body, inner);
        break;
      case 'if':
        this.flags.controlFlow = true;
        for (const clause of st.clauses) {
          this.sequence(clause.condition, inner);
          this.sequence(clause.body, inner);
        }
        if (st.otherwise) this.sequence(st.otherwise, inner);
        break;
      case 'for':
        this.flags.controlFlow = true;
        for (const w of st.values ?? []) this.word(w, inner);
        this.sequence(st.body, inner);
        break;
      case 'while':
        this.flags.controlFlow = true;
        this.sequence(st.condition, inner);
        this.sequence(st.body, inner);
        break;
      case 'case':
        this.flags.controlFlow = true;
        this.word(st.value, inner);
        for (const item of st.items) {
          // Patterns are matched, not expanded into file names: no glob check.
          for (const p of item.patterns) this.parts(p.parts, inner);
          this.sequence(item.body, inner);
        }
        break;
      case 'function':
        this.flags.functionDefinition = true;
        this.statement(st.body, inner);
        break;
      case 'test':
        this.flags.testCommand = true;
        this.testExpression(st.expression, inner);
        break;
      case 'arithmetic':
        this.flags.arithmetic = true;
        this.parts(st.expansions, inner);
        if (st.body) {
          // `for (( … ))`
          this.flags.controlFlow = true;
          this.sequence(st.body, inner);
        }
        break;
      case 'negated':
        this.flags.negation = true;
        this.statement(st.body, inner);
        break;
      case 'unknown':
        break;
    }
    // Redirects of a compound statement (`{ …; } > f`) belong to no simple command.
    for (const r of st.redirects) this.redirect(r, ctx);
  }

  private simple(st: Syntax.SimpleCommand, ctx: Context): void {
    const words: string[] = [];
    const literal: boolean[] = [];
    const rawWords: string[] = [];
    // `declare a[i]=x`: an argument whose subscript is arithmetic is not a literal word.
    const subscripted = new Set(
      st.argumentAssignments.filter((a) => a.subscript !== undefined).map((a) => a.text),
    );
    for (const w of st.words) {
      const value = literalValue(w);
      const isLiteral = value !== undefined && !subscripted.has(w.text);
      words.push(isLiteral ? value : w.text);
      literal.push(isLiteral);
      rawWords.push(w.text);
    }
    const command: SimpleCommand = {
      text: st.text,
      words,
      literal,
      rawWords,
      assignments: st.assignments.map((a) => this.assignment(a)),
      redirects: [],
      nested: ctx.nested,
      inSubstitution: ctx.inSubstitution,
      start: st.start,
      end: st.end,
    };
    if (ctx.stage) command.pipeline = { ...ctx.stage };
    if (words.length > 0) {
      command.name = words[0]!;
      if (literal[0] && SHELL_ONLY_BUILTINS.has(words[0]!)) this.flags.shellBuiltin = true;
    }
    this.commands.push(command);
    if (st.declaration !== undefined) this.flags.declaration = true;
    if (st.assignments.length > 0) this.flags.assignment = true;
    for (const a of st.assignments) this.assignmentParts(a, ctx);
    for (const a of st.argumentAssignments) this.assignmentParts(a, ctx);
    // An argument assignment's value is also inside its word: visit the other words only.
    const assignmentTexts = new Set(st.argumentAssignments.map((a) => a.text));
    for (const w of st.words) if (!assignmentTexts.has(w.text)) this.word(w, ctx);
    for (const r of st.redirects) command.redirects.push(this.redirect(r, ctx));
  }

  private assignment(a: Syntax.Assignment): Assignment {
    const name = `${a.name}${a.subscript ?? ''}${a.append ? '+' : ''}`;
    if (a.array) {
      // The source text of the value, `(x y)`.
      const at = a.text.indexOf('=', a.name.length + (a.subscript?.length ?? 0));
      return { name, value: a.text.slice(at + 1), literal: false };
    }
    if (!a.value) return { name, value: '', literal: a.subscript === undefined };
    const value = literalValue(a.value);
    return value === undefined
      ? { name, value: a.value.text, literal: false }
      : { name, value, literal: a.subscript === undefined };
  }

  private assignmentParts(a: Syntax.Assignment, ctx: Context): void {
    if (a.subscript !== undefined) this.flags.arithmetic = true;
    if (a.value) this.word(a.value, ctx);
    for (const w of a.array ?? []) this.word(w, ctx);
  }

  /** Records a redirect (flat, globally) and visits what runs inside it. */
  private redirect(r: Syntax.Redirect, ctx: Context): Redirect {
    this.flags.redirection = true;
    let flat: Redirect;
    if (r.heredoc) {
      this.flags.heredoc = true;
      flat = { operator: r.operator, targetLiteral: true };
      if (r.fd !== undefined) flat.fd = r.fd;
      flat.target = r.heredoc.delimiter;
      flat.heredocBody = r.heredoc.body;
      this.parts(r.heredoc.parts, ctx);
    } else {
      if (r.operator === '<<<') this.flags.herestring = true;
      const value = r.target ? literalValue(r.target) : undefined;
      flat = { operator: r.operator, targetLiteral: !r.target || value !== undefined };
      if (r.fd !== undefined) flat.fd = r.fd;
      if (r.target) {
        flat.target = value ?? r.target.text;
        this.word(r.target, ctx);
      }
    }
    this.redirects.push({ start: r.start, flat });
    return flat;
  }

  private testExpression(e: Syntax.TestExpression | undefined, ctx: Context): void {
    if (!e) return;
    switch (e.kind) {
      case 'word':
        // Operands of a test are matched, not expanded into file names: no glob check.
        this.parts(e.word.parts, ctx);
        return;
      case 'unary':
        this.testExpression(e.operand, ctx);
        return;
      case 'binary':
        this.testExpression(e.left, ctx);
        this.testExpression(e.right, ctx);
        return;
      default:
        return;
    }
  }

  /** A word bash expands (argument, value, target): its globs, and everything its parts run. */
  private word(w: Syntax.Word, ctx: Context): void {
    if (hasGlob(w)) this.flags.glob = true;
    this.parts(w.parts, ctx);
  }

  private parts(parts: readonly Syntax.WordPart[], ctx: Context): void {
    for (const p of parts) {
      switch (p.kind) {
        case 'text':
          if (p.quoting === 'ansi-c') this.flags.ansiCQuoting = true;
          break;
        case 'tilde':
          this.flags.tilde = true;
          break;
        case 'param':
          this.flags.variables = true;
          if (p.braced) {
            this.flags.parameterExpansion = true;
            if (TRANSFORM.test(p.text)) this.flags.parameterTransform = true;
          }
          // `${x%.*}`: the words after the operator are values or patterns, not file-name globs.
          for (const arg of p.args) this.parts(arg.parts, ctx);
          break;
        case 'command-sub':
          this.flags.commandSubstitution = true;
          this.sequence(p.body, { ...ctx, nested: true, inSubstitution: true });
          break;
        case 'process-sub':
          this.flags.processSubstitution = true;
          this.sequence(p.body, { ...ctx, nested: true, inSubstitution: true });
          break;
        case 'arith':
          this.flags.arithmetic = true;
          this.parts(p.expansions, ctx);
          break;
        case 'locale':
          this.flags.localeString = true;
          this.parts(p.parts, ctx);
          break;
        case 'brace':
          this.flags.braceExpansion = true;
          if (hasGlob({ text: p.text, parts: p.parts, start: 0, end: 0 })) this.flags.glob = true;
          this.parts(p.parts, ctx);
          break;
        case 'unknown':
          break;
      }
    }
  }
}
