import { decodeAnsiC } from './ansi-c.js';
import { NestingLimitError, type PlainNode } from './plain-tree.js';
import type {
  Assignment,
  HereDoc,
  Redirect,
  Sequence,
  SequenceItem,
  SimpleCommand,
  Statement,
  SyntaxTree,
  TestExpression,
  Word,
  WordPart,
} from './syntax-types.js';
import { hasBraceExpansion } from './word-facts.js';

const REDIRECT_TYPES = new Set(['file_redirect', 'heredoc_redirect', 'herestring_redirect']);
/** Named node kinds that only separate or decorate statements. */
const SKIPPED = new Set(['comment', 'heredoc_body', 'heredoc_end']);
/** Word-level node kinds whose expansions an arithmetic expression can hold. */
const EXPANSIONS = new Set([
  'simple_expansion',
  'expansion',
  'command_substitution',
  'process_substitution',
  'arithmetic_expansion',
]);

/**
 * The node types whose children's fields the converter reads (through `field()` or `.field`):
 * `readTree` reads fields only under these, one WASM call saved per other node. A test converts
 * every sample command with all fields read too and expects the same tree.
 */
export const FIELD_PARENTS: ReadonlySet<string> = new Set([
  'binary_expression',
  'c_style_for_statement',
  'case_item',
  'case_statement',
  'expansion',
  'file_redirect',
  'for_statement',
  'function_definition',
  'heredoc_redirect',
  'herestring_redirect',
  'redirected_statement',
  'subscript',
  'unary_expression',
  'variable_assignment',
]);

/** `name=`, `name+=`, `name[sub]=` at the start of a word, the name unquoted. */
const ASSIGNMENT_LIKE = /^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=/;

/** Leaf-like nodes whose text is one token: an escaped blank inside them is part of a word. */
const TOKEN_TYPES = new Set([
  'word',
  'raw_string',
  'string',
  'string_content',
  'ansi_c_string',
  'translated_string',
  'comment',
  'heredoc_body',
  'heredoc_content',
  'heredoc_start',
  'regex',
  'extglob_pattern',
]);

const SUBSTITUTION_DELIMITERS = new Set(['$(', '`', ')', '<(', '>(']);

/** Runs of one and-or operator at least this long are grouped as a balanced tree (see `list`). */
const BALANCE_FROM = 16;
/** Most alternations between `&&` and `||` in one list (each one is a level of the tree). */
export const MAX_AND_OR_RUNS = 256;

type Continuation = { type: 'pipe' | 'and-or'; operator: string; node: PlainNode };

/**
 * Converts a tree-sitter-bash tree (read once into plain nodes, see `plain-tree.ts`) into a
 * `SyntaxTree` by an allow-list of node kinds. Every kind not handled below becomes an `unknown`
 * statement or word part and is recorded in `unknowns`, so nothing the converter was not taught
 * can pass as understood. Pure TypeScript: no WASM call happens here.
 */
export class SyntaxConverter {
  private readonly unknowns: SyntaxTree['unknowns'] = [];

  constructor(private readonly source: string) {}

  convert(root: PlainNode): SyntaxTree {
    const comments: SyntaxTree['comments'] = [];
    const errors: SyntaxTree['errors'] = [];
    this.scan(root, comments, errors);
    this.escapedBlanks(root);
    return {
      body: this.sequence(root.children),
      unknowns: this.unknowns,
      comments,
      errors,
      lineContinuations: this.lineContinuations(root),
    };
  }

  private text(node: PlainNode): string {
    return this.source.slice(node.start, node.end);
  }

  private unknown(node: PlainNode): void {
    this.unknowns.push({ nodeType: node.type, text: clip(this.text(node)), start: node.start });
  }

  /** Comments and syntax errors anywhere in the tree, in source order. */
  private scan(node: PlainNode, comments: SyntaxTree['comments'], errors: SyntaxTree['errors']): void {
    if (node.type === 'comment') comments.push({ text: this.text(node), start: node.start });
    if (node.error)
      errors.push({ kind: node.error, nodeType: node.type, text: clip(this.text(node)), start: node.start });
    for (const child of node.children) this.scan(child, comments, errors);
  }

  /**
   * Offsets of the backslash-newline pairs the shell removes before it splits words: every one
   * outside single quotes, here-document bodies and comments, and not itself escaped.
   */
  private lineContinuations(root: PlainNode): number[] {
    const out: number[] = [];
    for (let at = this.source.indexOf('\\\n'); at >= 0; at = this.source.indexOf('\\\n', at + 2)) {
      if (isEscapedBackslash(this.source, at)) continue;
      const { node, inHeredoc } = smallestAt(root, at);
      const type = node.type;
      if (
        inHeredoc ||
        type === 'raw_string' ||
        type === 'heredoc_body' ||
        type === 'heredoc_content' ||
        type === 'comment'
      )
        continue;
      out.push(at);
    }
    return out;
  }

  /**
   * tree-sitter skips a backslash-blank between words as if it were space (`echo \ x` gives the
   * word `x`, `a\<tab>b` two words), where bash reads an escaped blank inside one word (` x`,
   * `a<tab>b`): where that happens the words in the tree are not bash's, so it is listed as unknown.
   */
  private escapedBlanks(root: PlainNode): void {
    for (const m of this.source.matchAll(/\\[ \t\v\f]/g)) {
      const at = m.index;
      if (isEscapedBackslash(this.source, at)) continue;
      const { node, inHeredoc } = smallestAt(root, at);
      if (inHeredoc || !node.named || TOKEN_TYPES.has(node.type)) continue;
      this.unknowns.push({
        nodeType: 'escaped-blank',
        text: clip(this.source.slice(at, at + 20)),
        start: at,
      });
    }
  }

  // ---------------------------------------------------------------------------------------------
  // statements

  /** Statements among `nodes`, split by `;`, `&` and newlines; `&` marks the one before it. */
  private sequence(nodes: readonly PlainNode[]): Sequence {
    const items: SequenceItem[] = [];
    for (const node of nodes) {
      if (!node.named) {
        const last = items[items.length - 1];
        if (node.type === '&' && last) {
          last.background = true;
          last.separator = '&';
        } else if (node.type === ';' && last) {
          last.separator ??= ';';
        } else if (node.type !== ';' && node.type !== '\n' && node.type !== ';;' && node.type !== '&;') {
          // Keywords (`do`, `then`, `{`) are filtered by callers; anything else is unexpected.
          if (!/^[a-z{}()]+$/.test(node.type)) this.unknown(node);
        }
        continue;
      }
      if (SKIPPED.has(node.type)) continue;
      items.push({ statement: this.statement(node), background: false });
    }
    return { items };
  }

  private base(node: PlainNode) {
    return { redirects: [] as Redirect[], text: this.text(node), start: node.start, end: node.end };
  }

  private missing(node: PlainNode): Statement {
    return { kind: 'unknown', ...this.base(node), nodeType: 'missing' };
  }

  private statement(node: PlainNode): Statement {
    switch (node.type) {
      case 'command':
        return this.command(node);
      case 'declaration_command':
      case 'unset_command':
        return this.declaration(node);
      case 'variable_assignment':
      case 'variable_assignments': {
        const list = node.type === 'variable_assignments' ? named(node) : [node];
        const assignments: Assignment[] = [];
        for (const n of list) {
          if (n.type === 'variable_assignment') assignments.push(this.assignment(n));
          else this.unknown(n);
        }
        return { kind: 'simple', ...this.base(node), assignments, words: [], argumentAssignments: [] };
      }
      case 'pipeline':
        return this.pipeline(node);
      case 'list':
        return this.list(node);
      case 'redirected_statement':
        return this.redirected(node);
      case 'subshell':
        return { kind: 'subshell', ...this.base(node), body: this.sequence(inner(node, '(', ')')) };
      case 'compound_statement': {
        if (node.children[0]?.type === '((')
          return { kind: 'arithmetic', ...this.base(node), expansions: this.arithmeticParts(node) };
        return { kind: 'group', ...this.base(node), body: this.sequence(inner(node, '{', '}')) };
      }
      case 'if_statement':
        return this.ifStatement(node);
      case 'for_statement':
        return this.forStatement(node);
      case 'c_style_for_statement': {
        const body = field(node, 'body');
        return {
          kind: 'arithmetic',
          ...this.base(node),
          // Everything but the body is the `(( init; test; step ))` header.
          expansions: this.arithmeticParts(node, body),
          ...(body ? { body: this.doGroup(body) } : {}),
        };
      }
      case 'while_statement': {
        const keyword = node.children[0]?.type;
        const condition: PlainNode[] = [];
        let body: PlainNode | undefined;
        for (const child of node.children.slice(1)) {
          if (child.type === 'do_group') body = child;
          else condition.push(child);
        }
        return {
          kind: 'while',
          ...this.base(node),
          until: keyword === 'until',
          condition: this.sequence(condition),
          body: body ? this.doGroup(body) : { items: [] },
        };
      }
      case 'case_statement':
        return this.caseStatement(node);
      case 'function_definition': {
        const name = field(node, 'name');
        const body = field(node, 'body');
        const fn: Statement = {
          kind: 'function',
          ...this.base(node),
          name: name ? this.text(name) : '',
          body: body ? this.statement(body) : this.missing(node),
        };
        const redirect = field(node, 'redirect');
        if (redirect) fn.redirects.push(...this.redirectList(redirect));
        return fn;
      }
      case 'test_command':
        return this.test(node);
      case 'negated_command': {
        const body = node.children.find((n) => n.named && !SKIPPED.has(n.type));
        return {
          kind: 'negated',
          ...this.base(node),
          body: body ? this.statement(body) : this.missing(node),
        };
      }
      default:
        this.unknown(node);
        return { kind: 'unknown', ...this.base(node), nodeType: node.type };
    }
  }

  private doGroup(node: PlainNode): Sequence {
    if (node.type === 'do_group') return this.sequence(inner(node, 'do', 'done'));
    if (node.type === 'compound_statement') return this.sequence(inner(node, '{', '}'));
    return { items: [{ statement: this.statement(node), background: false }] };
  }

  private command(node: PlainNode): Statement {
    // `time ( … )` / `time { … }`: the keyword times a compound command; what runs is the compound.
    const compound = node.children.find(
      (c) => c.named && (c.type === 'subshell' || c.type === 'compound_statement'),
    );
    const first = node.children.find((c) => c.named);
    if (compound && first?.type === 'command_name' && /^(time|coproc)$/.test(this.text(first))) {
      const inner = this.statement(compound);
      for (const child of node.children)
        if (REDIRECT_TYPES.has(child.type)) inner.redirects.push(...this.redirectList(child));
      return { ...inner, text: this.text(node), start: node.start, end: node.end };
    }
    const cmd: SimpleCommand = {
      kind: 'simple',
      ...this.base(node),
      assignments: [],
      words: [],
      argumentAssignments: [],
    };
    // `$"…"` parses as an anonymous `$` before a string; a `$` on its own is the word `$`.
    let dollar: PlainNode | undefined;
    for (const child of node.children) {
      if (dollar) {
        if (child.type === 'string' && child.start === dollar.end) {
          const text = this.source.slice(dollar.start, child.end);
          cmd.words.push({
            text,
            parts: [{ kind: 'locale', text, parts: this.doubleQuoted(child) }],
            start: dollar.start,
            end: child.end,
          });
          dollar = undefined;
          continue;
        }
        cmd.words.push(this.literalWord(dollar));
        dollar = undefined;
      }
      if (!child.named) {
        if (child.type === '$') dollar = child;
        else this.unknown(child);
        continue;
      }
      if (child.type === 'variable_assignment' && cmd.words.length === 0) {
        cmd.assignments.push(this.assignment(child));
        continue;
      }
      if (REDIRECT_TYPES.has(child.type)) {
        cmd.redirects.push(...this.redirectList(child));
        continue;
      }
      if (child.type === 'comment') continue;
      if (child.type === 'command_name') {
        const name = child.children.find((c) => c.named);
        cmd.words.push(name ? this.word(name) : this.unknownWord(child));
        continue;
      }
      // bash (not in POSIX mode) expands `~` after the `=` and each `:` of an argument that looks
      // like an assignment: `dd of=~/x` writes $HOME/x.
      cmd.words.push(this.word(child, ASSIGNMENT_LIKE.test(this.text(child))));
    }
    if (dollar) cmd.words.push(this.literalWord(dollar));
    return cmd;
  }

  /** `export A=1 b`, `declare -a x=(…)`, `local z`, `unset -f y`. */
  private declaration(node: PlainNode): SimpleCommand {
    const cmd: SimpleCommand = {
      kind: 'simple',
      ...this.base(node),
      assignments: [],
      words: [],
      argumentAssignments: [],
    };
    for (const child of node.children) {
      if (!child.named) {
        if (cmd.words.length === 0 && /^[a-z]+$/.test(child.type)) {
          cmd.declaration = child.type;
          cmd.words.push(this.literalWord(child));
        } else this.unknown(child);
        continue;
      }
      if (child.type === 'variable_assignment') {
        const a = this.assignment(child);
        cmd.argumentAssignments.push(a);
        cmd.words.push(this.assignmentWord(child, a));
        continue;
      }
      if (REDIRECT_TYPES.has(child.type)) {
        cmd.redirects.push(...this.redirectList(child));
        continue;
      }
      if (child.type === 'variable_name') {
        cmd.words.push(this.literalWord(child));
        continue;
      }
      if (child.type === 'comment') continue;
      cmd.words.push(this.word(child));
    }
    return cmd;
  }

  /** The word an assignment argument reads as (`A=1` as one argv word). */
  private assignmentWord(node: PlainNode, a: Assignment): Word {
    const parts: WordPart[] = [
      { kind: 'text', value: `${a.name}${a.subscript ?? ''}${a.append ? '+=' : '='}`, quoting: 'none' },
    ];
    if (a.value) parts.push(...a.value.parts);
    if (a.array) parts.push({ kind: 'unknown', nodeType: 'array', text: this.text(node) });
    return { text: this.text(node), parts, start: node.start, end: node.end };
  }

  private assignment(node: PlainNode): Assignment {
    const nameNode = field(node, 'name');
    const valueNode = field(node, 'value');
    const append = node.children.some((c) => !c.named && c.type === '+=');
    let name = nameNode ? this.text(nameNode) : '';
    let subscript: string | undefined;
    if (nameNode?.type === 'subscript') {
      const base = field(nameNode, 'name');
      const index = field(nameNode, 'index');
      name = base ? this.text(base) : '';
      subscript = `[${index ? this.text(index) : ''}]`;
    } else if (nameNode && nameNode.type !== 'variable_name') {
      this.unknown(nameNode);
    }
    const a: Assignment = { name, append, text: this.text(node) };
    if (subscript !== undefined) a.subscript = subscript;
    if (valueNode) {
      if (valueNode.type === 'array') {
        a.array = valueNode.children
          .filter((n) => n.named && n.type !== 'comment')
          .map((n) => this.word(n, true));
      } else a.value = this.word(valueNode, true);
    }
    return a;
  }

  private pipeline(node: PlainNode): Statement {
    const { stages, operators } = this.stages(node);
    return this.makePipeline(stages, operators, node.start, node.end);
  }

  /**
   * A pipeline binds tighter than `&&`/`||`, and `!` negates a whole pipeline; tree-sitter gets
   * both wrong when a redirect ends a list (`a && b 2>&1 | c` parses as `(a && b 2>&1) | c`, and
   * so does a here-document's `| cmd`) and for `! a | b` (read as `(! a) | b`). A first stage that
   * is an and-or list or a negation is therefore lifted above the pipeline: `a && (b 2>&1 | c)`.
   */
  private makePipeline(
    stages: Statement[],
    operators: ('|' | '|&')[],
    start: number,
    end: number,
  ): Statement {
    const [first, ...rest] = stages;
    if (first && rest.length > 0 && first.redirects.length === 0) {
      if (first.kind === 'and-or') {
        const right = this.makePipeline([first.right, ...rest], operators, first.right.start, end);
        return { ...first, text: this.source.slice(first.start, end), end, right };
      }
      if (first.kind === 'negated') {
        const body = this.makePipeline([first.body, ...rest], operators, first.body.start, end);
        return { ...first, text: this.source.slice(first.start, end), end, body };
      }
      // `a | b > f | c` parses as `(a | b > f) | c`, and lifting `a &&` out of
      // `(a && b | c 2>&1) | d` leaves `(b | c) | d`: one pipeline either way.
      if (first.kind === 'pipeline')
        return this.makePipeline([...first.stages, ...rest], [...first.operators, ...operators], start, end);
    }
    return {
      kind: 'pipeline',
      redirects: [],
      text: this.source.slice(start, end),
      start,
      end,
      stages,
      operators,
    };
  }

  private stages(node: PlainNode): { stages: Statement[]; operators: ('|' | '|&')[] } {
    const stages: Statement[] = [];
    const operators: ('|' | '|&')[] = [];
    for (const child of node.children) {
      if (!child.named) {
        if (child.type === '|' || child.type === '|&') operators.push(child.type);
        else this.unknown(child);
        continue;
      }
      if (SKIPPED.has(child.type)) continue;
      stages.push(this.statement(child));
    }
    return { stages, operators };
  }

  /**
   * An and-or list, grouped as bash groups it: `a && b || c` is `(a && b) || c`. A long run of one
   * operator is grouped as a balanced tree instead (`&&` and `||` are each associative: `a && b &&
   * c` runs and ends the same as `a && (b && c)`), so 16,000 `&&` nest about 14 levels, not 16,000,
   * and readers that recurse through the tree do not overflow; runs shorter than BALANCE_FROM keep
   * the plain left-nested shape. A list that alternates its operators more than MAX_AND_OR_RUNS
   * times nests that deep whatever the grouping: it is refused (a NestingLimitError).
   */
  private list(node: PlainNode): Statement {
    const items: Statement[] = [];
    const operators: ('&&' | '||')[] = [];
    let operator: '&&' | '||' | undefined;
    for (const child of node.children) {
      if (child.named && SKIPPED.has(child.type)) continue;
      if (!child.named) {
        if (child.type === '&&' || child.type === '||') operator = child.type;
        else this.unknown(child);
        continue;
      }
      if (items.length > 0) operators.push(operator ?? '&&');
      items.push(this.statement(child));
      operator = undefined;
    }
    const first = items[0];
    if (!first) return { kind: 'unknown', ...this.base(node), nodeType: 'list' };
    let left: Statement = first;
    let runs = 0;
    for (let i = 0; i < operators.length;) {
      const op = operators[i]!;
      let j = i;
      while (j < operators.length && operators[j] === op) j++;
      // items[i + 1 .. j] follow `left`, each after `op`.
      const run = items.slice(i + 1, j + 1);
      if (++runs > MAX_AND_OR_RUNS) throw new NestingLimitError(MAX_AND_OR_RUNS);
      if (run.length >= BALANCE_FROM) left = this.andOr(left, op, this.balanced(run, op));
      else for (const right of run) left = this.andOr(left, op, right);
      i = j;
    }
    return left;
  }

  private andOr(left: Statement, operator: '&&' | '||', right: Statement): Statement {
    return {
      kind: 'and-or',
      redirects: [],
      text: this.source.slice(left.start, right.end),
      start: left.start,
      end: right.end,
      left,
      operator,
      right,
    };
  }

  /** `a op b op c …` as a balanced tree (built bottom-up: no recursion as deep as the run). */
  private balanced(run: Statement[], op: '&&' | '||'): Statement {
    let level = run;
    while (level.length > 1) {
      const next: Statement[] = [];
      for (let k = 0; k < level.length; k += 2)
        next.push(k + 1 < level.length ? this.andOr(level[k]!, op, level[k + 1]!) : level[k]!);
      level = next;
    }
    return level[0]!;
  }

  /**
   * `body > f`. tree-sitter hangs what follows a here-document's start on the heredoc node: a
   * pipeline continuation (`cat <<EOF | sh`), an and-or continuation (`cat <<EOF && rm x`), extra
   * redirects and even extra arguments (`cat <<EOF file`); they are put back where bash reads them.
   */
  private redirected(node: PlainNode): Statement {
    const bodyNode = field(node, 'body');
    // `> f` alone is a simple command of nothing but a redirection (it creates or truncates f).
    let statement: Statement = bodyNode
      ? this.statement(bodyNode)
      : { kind: 'simple', ...this.base(node), assignments: [], words: [], argumentAssignments: [] };
    const redirects: Redirect[] = [];
    const continuations: Continuation[] = [];
    const extraArgs: PlainNode[] = [];
    for (const child of node.children) {
      if (child === bodyNode) continue;
      if (!child.named) {
        this.unknown(child);
        continue;
      }
      if (REDIRECT_TYPES.has(child.type)) {
        redirects.push(...this.redirectList(child, continuations, extraArgs));
        continue;
      }
      if (child.type === 'comment') continue;
      this.unknown(child);
    }
    if (extraArgs.length > 0) {
      if (statement.kind === 'simple') for (const a of extraArgs) statement.words.push(this.word(a));
      else for (const a of extraArgs) this.unknown(a);
    }
    attachToLast(statement, redirects);
    statement = { ...statement, text: this.text(node), start: node.start, end: node.end };
    for (const c of continuations) {
      if (c.type === 'pipe') {
        const next = this.pipelineContinuation(c.node);
        statement = this.makePipeline(
          [statement, ...next.stages],
          [c.operator as '|' | '|&', ...next.operators],
          statement.start,
          next.end,
        );
      } else {
        const right = this.statement(c.node);
        statement = {
          kind: 'and-or',
          redirects: [],
          text: this.source.slice(statement.start, right.end),
          start: statement.start,
          end: right.end,
          left: statement,
          operator: c.operator as '&&' | '||',
          right,
        };
      }
    }
    return statement;
  }

  /** The `| cmd | cmd` tree-sitter nests inside a here-document redirect. */
  private pipelineContinuation(node: PlainNode): {
    stages: Statement[];
    operators: ('|' | '|&')[];
    end: number;
  } {
    const { stages, operators } = this.stages(node);
    // The first operator joins the heredoc command to the first stage here.
    const first = operators.shift() ?? '|';
    return { stages, operators: [first, ...operators].slice(0, stages.length), end: node.end };
  }

  private ifStatement(node: PlainNode): Statement {
    const clauses: { condition: Sequence; body: Sequence }[] = [];
    let otherwise: Sequence | undefined;
    const collect = (children: readonly PlainNode[], startKeyword: string) => {
      const condition: PlainNode[] = [];
      const body: PlainNode[] = [];
      let inBody = false;
      for (const child of children) {
        if (!child.named && child.type === startKeyword) continue;
        if (!child.named && child.type === 'then') {
          inBody = true;
          continue;
        }
        if (child.type === 'elif_clause' || child.type === 'else_clause') continue;
        if (!child.named && child.type === 'fi') continue;
        (inBody ? body : condition).push(child);
      }
      clauses.push({ condition: this.sequence(condition), body: this.sequence(body) });
    };
    collect(node.children, 'if');
    for (const child of node.children) {
      if (child.type === 'elif_clause') collect(child.children, 'elif');
      else if (child.type === 'else_clause')
        otherwise = this.sequence(child.children.filter((c) => !(!c.named && c.type === 'else')));
    }
    return { kind: 'if', ...this.base(node), clauses, ...(otherwise ? { otherwise } : {}) };
  }

  private forStatement(node: PlainNode): Statement {
    const keyword = node.children[0]?.type;
    const variable = field(node, 'variable');
    const body = field(node, 'body');
    let values: Word[] | undefined;
    for (const child of node.children) {
      if (!child.named && child.type === 'in') {
        values = [];
        continue;
      }
      if (values && child.named && child.type !== 'do_group' && child.type !== 'comment') {
        if (child.field === 'value' || child.type !== 'variable_name') values.push(this.word(child));
      }
    }
    return {
      kind: 'for',
      ...this.base(node),
      select: keyword === 'select',
      variable: variable ? this.text(variable) : '',
      ...(values ? { values } : {}),
      body: body ? this.doGroup(body) : { items: [] },
    };
  }

  private caseStatement(node: PlainNode): Statement {
    const valueNode = field(node, 'value');
    const items: { patterns: Word[]; body: Sequence }[] = [];
    for (const item of node.children) {
      if (item.type !== 'case_item') continue;
      const patterns: Word[] = [];
      const body: PlainNode[] = [];
      let afterParen = false;
      for (const child of item.children) {
        if (!afterParen) {
          if (!child.named) {
            if (child.type === ')') afterParen = true;
          } else if (child.field === 'value') patterns.push(this.word(child));
          else this.unknown(child);
          continue;
        }
        if (child.field === 'termination' || child.field === 'fallthrough') continue;
        body.push(child);
      }
      items.push({ patterns, body: this.sequence(body) });
    }
    return {
      kind: 'case',
      ...this.base(node),
      value: valueNode ? this.word(valueNode) : this.unknownWord(node),
      items,
    };
  }

  private test(node: PlainNode): Statement {
    const bracket = node.children[0]?.type === '[' ? '[' : '[[';
    const exprNode = node.children.find((n) => n.named && n.type !== 'comment');
    return {
      kind: 'test',
      ...this.base(node),
      bracket,
      ...(exprNode ? { expression: this.testExpression(exprNode) } : {}),
    };
  }

  private testExpression(node: PlainNode): TestExpression {
    switch (node.type) {
      case 'unary_expression': {
        const op = field(node, 'operator');
        const operand = node.children.find((n) => n.named && n !== op);
        return {
          kind: 'unary',
          operator: op ? this.text(op) : '',
          operand: operand
            ? this.testExpression(operand)
            : { kind: 'unknown', nodeType: 'missing', text: '' },
        };
      }
      case 'binary_expression': {
        const left = field(node, 'left');
        const right = field(node, 'right');
        const op = field(node, 'operator');
        if (!left || !right) {
          this.unknown(node);
          return { kind: 'unknown', nodeType: node.type, text: this.text(node) };
        }
        return {
          kind: 'binary',
          operator: op ? this.text(op) : '',
          left: this.testExpression(left),
          right: this.testExpression(right),
        };
      }
      case 'parenthesized_expression': {
        const innerNode = node.children.find((n) => n.named);
        if (!innerNode) return { kind: 'unknown', nodeType: node.type, text: this.text(node) };
        return this.testExpression(innerNode);
      }
      case 'regex':
        this.checkUnparsed(node);
        return { kind: 'regex', text: this.text(node) };
      case 'test_operator':
      case 'redirected_statement':
      case 'ternary_expression':
      case 'postfix_expression':
        this.unknown(node);
        return { kind: 'unknown', nodeType: node.type, text: this.text(node) };
      default:
        return { kind: 'word', word: this.word(node) };
    }
  }

  /**
   * The expansions inside an arithmetic expression (`$x`, `${…}`, `$(…)`, nested `$((…))`), found
   * at any depth; `skip` is a child not to look into (a C-style for's body).
   */
  private arithmeticParts(node: PlainNode, skip?: PlainNode): WordPart[] {
    const out: WordPart[] = [];
    const visit = (n: PlainNode) => {
      for (const child of n.children) {
        if (child === skip) continue;
        if (EXPANSIONS.has(child.type)) out.push(...this.parts(child, false, false, false));
        else visit(child);
      }
    };
    visit(node);
    return out;
  }

  // ---------------------------------------------------------------------------------------------
  // redirects

  private redirectList(node: PlainNode, continuations?: Continuation[], extraArgs?: PlainNode[]): Redirect[] {
    const out: Redirect[] = [];
    const r: Redirect = { operator: '', text: this.text(node), start: node.start, end: node.end };
    let heredoc: HereDoc | undefined;
    const isHeredoc = node.type === 'heredoc_redirect';
    for (const child of node.children) {
      const childField = child.field;
      if (!child.named) {
        if (childField === 'operator' && isHeredoc && (child.type === '&&' || child.type === '||')) {
          const right = field(node, 'right');
          if (right && continuations)
            continuations.push({ type: 'and-or', operator: child.type, node: right });
          else this.unknown(child);
          continue;
        }
        if (!r.operator && /^[<>&|-]+$/.test(child.type)) r.operator = child.type;
        else this.unknown(child);
        continue;
      }
      switch (child.type) {
        case 'file_descriptor':
          r.fd = Number(this.text(child));
          continue;
        case 'heredoc_start': {
          const text = this.text(child);
          heredoc = {
            delimiter: removeQuotes(text),
            quoted: /['"\\]/.test(text),
            stripTabs: r.operator === '<<-',
            body: '',
            parts: [],
            backtick: false,
          };
          continue;
        }
        case 'heredoc_body':
          if (heredoc) {
            heredoc.body = this.text(child);
            if (!heredoc.quoted) {
              heredoc.parts = this.heredocParts(child, heredoc.body);
              heredoc.backtick = heredoc.body.includes('`');
            }
          }
          continue;
        case 'heredoc_end':
        case 'comment':
          continue;
        case 'pipeline':
          if (isHeredoc && continuations) continuations.push({ type: 'pipe', operator: '|', node: child });
          else this.unknown(child);
          continue;
        default:
          break;
      }
      if (REDIRECT_TYPES.has(child.type)) {
        out.push(...this.redirectList(child, continuations, extraArgs));
        continue;
      }
      if (childField === 'right' && isHeredoc) continue; // handled with its operator
      if (isHeredoc) {
        if (childField === 'argument' && extraArgs) extraArgs.push(child);
        else this.unknown(child);
        continue;
      }
      if (!r.target) r.target = this.word(child);
      else this.unknown(child);
    }
    if (!r.operator) r.operator = isHeredoc ? '<<' : node.type === 'herestring_redirect' ? '<<<' : '>';
    if (heredoc) {
      heredoc.stripTabs = r.operator === '<<-';
      r.heredoc = heredoc;
    }
    return [r, ...out];
  }

  private heredocParts(body: PlainNode, text: string): WordPart[] {
    const parts: WordPart[] = [];
    for (const child of body.children) {
      if (!child.named || child.type === 'heredoc_content') continue;
      parts.push(...this.word(child).parts);
    }
    // tree-sitter does not parse every form inside a body: `$((…))` and `$[…]` evaluate arithmetic.
    if (/\$\(\(|\$\[/.test(text) && !parts.some((p) => p.kind === 'arith'))
      parts.push({ kind: 'arith', text: clip(text), quoted: true, expansions: [] });
    return parts;
  }

  // ---------------------------------------------------------------------------------------------
  // words

  /**
   * Brace expansion (`{a,b}`, `pre{1..3}`) turns one word into several: tree-sitter splits it into
   * pieces, so it is found on the word's unquoted skeleton and the whole word becomes one brace
   * part. Consumers that read a brace word as a whole would not see a substitution inside it
   * (`{a,b}$(id)` runs `id`), so such a word is also listed as unknown.
   */
  private markBraces(word: Word): void {
    let skeleton = '';
    for (const p of word.parts) skeleton += p.kind === 'text' && p.quoting === 'none' ? p.value : '\0';
    if (!hasBraceExpansion(skeleton)) return;
    if (!word.parts.every(harmlessInBrace))
      this.unknowns.push({ nodeType: 'brace-expansion', text: clip(word.text), start: word.start });
    word.parts = [{ kind: 'brace', text: word.text, parts: word.parts }];
  }

  /**
   * tree-sitter sometimes leaves an expansion inside a plain word or regex (`${u:-\`id\`}` gives the
   * word `` `id` ``, `[[ x =~ a${u}b ]]` the regex `a${u}b`); bash expands it, so such text is
   * listed as unknown rather than read as literal.
   */
  private checkUnparsed(node: PlainNode): void {
    if (hasUnparsedExpansion(this.text(node)))
      this.unknowns.push({
        nodeType: `${node.type}-expansion`,
        text: clip(this.text(node)),
        start: node.start,
      });
  }

  private unknownWord(node: PlainNode): Word {
    this.unknown(node);
    const text = this.text(node);
    return {
      text,
      parts: [{ kind: 'unknown', nodeType: node.type, text }],
      start: node.start,
      end: node.end,
    };
  }

  private literalWord(node: PlainNode): Word {
    const text = this.text(node);
    return {
      text,
      parts: [{ kind: 'text', value: text, quoting: 'none' }],
      start: node.start,
      end: node.end,
    };
  }

  /** One word; `assignment` enables tilde expansion after `=`/`:` as in assignment values. */
  private word(node: PlainNode, assignment = false): Word {
    const parts = this.parts(node, false, true, assignment);
    const word: Word = { text: this.text(node), parts, start: node.start, end: node.end };
    this.markBraces(word);
    return word;
  }

  private parts(node: PlainNode, quoted: boolean, atStart: boolean, assignment: boolean): WordPart[] {
    switch (node.type) {
      case 'word':
      case 'extglob_pattern':
        this.checkUnparsed(node);
        return unquotedParts(this.text(node), atStart, assignment);
      case 'number':
      case 'variable_name':
      case 'special_variable_name':
      case 'file_descriptor': {
        if (node.children.some((c) => c.named))
          return this.concat(
            node.children.filter((c) => c.named),
            quoted,
            assignment,
          );
        return [{ kind: 'text', value: this.text(node), quoting: quoted ? 'double' : 'none' }];
      }
      case 'raw_string':
        return [{ kind: 'text', value: this.source.slice(node.start + 1, node.end - 1), quoting: 'single' }];
      case 'ansi_c_string':
        return [
          {
            kind: 'text',
            value: decodeAnsiC(this.source.slice(node.start + 2, node.end - 1)),
            quoting: 'ansi-c',
          },
        ];
      case 'string':
        return this.doubleQuoted(node);
      case 'translated_string': {
        const string = node.children.find((c) => c.type === 'string');
        return [{ kind: 'locale', text: this.text(node), parts: string ? this.doubleQuoted(string) : [] }];
      }
      case 'concatenation':
        return this.concat(node.children, quoted, assignment, atStart);
      case 'simple_expansion': {
        const nameNode = node.children.find((c) => c.named);
        return [
          {
            kind: 'param',
            name: nameNode ? this.text(nameNode) : '',
            braced: false,
            quoted,
            args: [],
            form: 'plain',
            text: this.text(node),
          },
        ];
      }
      case 'expansion':
        return [this.expansion(node, quoted)];
      case 'command_substitution': {
        const text = this.text(node);
        const backtick = text.startsWith('`');
        // Inside backticks bash removes the backslash of `\``, `\$` and `\\` before it parses the
        // body (`\`id\`` is a nested substitution); tree-sitter reads the body as written.
        if (backtick && /\\[`$\\]/.test(text.slice(1, -1)))
          this.unknowns.push({ nodeType: 'backtick-escape', text: clip(text), start: node.start });
        return [{ kind: 'command-sub', body: this.sequence(between(node)), backtick, quoted, text }];
      }
      case 'process_substitution': {
        const text = this.text(node);
        return [
          {
            kind: 'process-sub',
            direction: text.startsWith('>') ? '>' : '<',
            body: this.sequence(between(node)),
            text,
          },
        ];
      }
      case 'arithmetic_expansion':
        return [{ kind: 'arith', text: this.text(node), quoted, expansions: this.arithmeticParts(node) }];
      case 'brace_expression':
        // `{1..3}`: the word it is in becomes one brace part (see `markBraces`).
        return [{ kind: 'text', value: this.text(node), quoting: 'none' }];
      case 'regex':
        this.checkUnparsed(node);
        return [{ kind: 'text', value: this.text(node), quoting: 'none' }];
      default: {
        this.unknown(node);
        return [{ kind: 'unknown', nodeType: node.type, text: this.text(node) }];
      }
    }
  }

  private concat(
    children: readonly PlainNode[],
    quoted: boolean,
    assignment: boolean,
    atStart = true,
  ): WordPart[] {
    const out: WordPart[] = [];
    children.forEach((child, i) => {
      if (!child.named) {
        // `$` before a string is `$"…"`; any other anonymous piece is literal text tree-sitter split off.
        if (child.type === '$' && children[i + 1]?.type === 'string') return;
        out.push({ kind: 'text', value: this.text(child), quoting: 'none' });
        return;
      }
      if (child.type === 'string' && children[i - 1]?.type === '$') {
        out.push({ kind: 'locale', text: `$${this.text(child)}`, parts: this.doubleQuoted(child) });
        return;
      }
      out.push(...this.parts(child, quoted, atStart && i === 0, assignment));
    });
    return out;
  }

  private doubleQuoted(node: PlainNode): WordPart[] {
    const parts: WordPart[] = [];
    const open = this.source.startsWith('$"', node.start) ? 2 : 1;
    let pos = node.start + open;
    const end = node.end - 1;
    const append = (from: number, to: number) => {
      if (to <= from) return;
      const chunk = this.source.slice(from, to);
      let value = '';
      for (let i = 0; i < chunk.length; i++) {
        const ch = chunk[i]!;
        const next = chunk[i + 1];
        if (ch === '\\' && next !== undefined && '$`"\\\n'.includes(next)) {
          if (next !== '\n') value += next;
          i++;
          continue;
        }
        value += ch;
      }
      if (value) parts.push({ kind: 'text', value, quoting: 'double' });
    };
    for (const child of node.children) {
      if (!child.named || child.type === 'string_content') continue;
      append(pos, child.start);
      parts.push(...this.parts(child, true, false, false));
      pos = child.end;
    }
    append(pos, end);
    if (parts.length === 0) parts.push({ kind: 'text', value: '', quoting: 'double' });
    return parts;
  }

  /** `${…}` in its modelled forms; anything else keeps form 'unknown'. */
  private expansion(node: PlainNode, quoted: boolean): WordPart {
    const text = this.text(node);
    const part: Extract<WordPart, { kind: 'param' }> = {
      kind: 'param',
      name: '',
      braced: true,
      quoted,
      args: [],
      form: 'plain',
      text,
    };
    let sawName = false;
    let ops = '';
    for (const child of node.children) {
      if (!child.named) {
        if (child.type === '${' || child.type === '}') continue;
        if (child.field === 'operator' || /^[-:=?+#%/^,!@*]+$|^[A-Za-z]$/.test(child.type)) {
          if (!sawName && child.type === '#') part.length = true;
          else if (!sawName && child.type === '!') part.indirect = true;
          else ops += child.type;
          continue;
        }
        part.form = 'unknown';
        continue;
      }
      if (!sawName && (child.type === 'variable_name' || child.type === 'special_variable_name')) {
        part.name = this.text(child);
        sawName = true;
        continue;
      }
      if (!sawName && child.type === 'subscript') {
        const base = field(child, 'name');
        const index = field(child, 'index');
        part.name = base ? this.text(base) : '';
        part.subscript = index ? this.text(index) : '';
        sawName = true;
        continue;
      }
      if (!sawName) {
        part.form = 'unknown';
        continue;
      }
      part.args.push(this.word(child));
    }
    if (!sawName) part.form = 'unknown';
    if (ops) {
      part.op = ops;
      if (part.form === 'plain') part.form = 'operator';
    }
    if (part.form === 'unknown')
      this.unknowns.push({ nodeType: 'expansion', text: clip(text), start: node.start });
    return part;
  }
}

/**
 * A trailing redirect binds to the last command of an and-or list or pipeline (`a && b > f`
 * redirects b, `a | b > f` redirects b), but tree-sitter hangs it on the whole list: move it down.
 */
function attachToLast(statement: Statement, redirects: Redirect[]): void {
  if (redirects.length === 0) return;
  switch (statement.kind) {
    case 'and-or':
      attachToLast(statement.right, redirects);
      return;
    case 'pipeline': {
      const last = statement.stages[statement.stages.length - 1];
      if (last) attachToLast(last, redirects);
      else statement.redirects.push(...redirects);
      return;
    }
    case 'negated':
      attachToLast(statement.body, redirects);
      return;
    default:
      statement.redirects.push(...redirects);
  }
}

/** The first child filling `name` (tree-sitter's `childForFieldName`). */
function field(node: PlainNode, name: string): PlainNode | undefined {
  return node.children.find((c) => c.field === name);
}

function named(node: PlainNode): PlainNode[] {
  return node.children.filter((c) => c.named);
}

/** The body of `$(…)`, `` `…` ``, `<(…)` or `>(…)`: its children but the delimiters (separators stay). */
function between(node: PlainNode): PlainNode[] {
  return node.children.filter((c) => c.named || !SUBSTITUTION_DELIMITERS.has(c.type));
}

/** Children of a bracketed construct between its open and close keywords. */
function inner(node: PlainNode, open: string, close: string): PlainNode[] {
  return node.children.filter((c) => c.named || (c.type !== open && c.type !== close));
}

/** An unquoted word: backslash escapes become quoted text; `~` at the start is a tilde prefix. */
function unquotedParts(text: string, atStart: boolean, assignment: boolean): WordPart[] {
  const parts: WordPart[] = [];
  let plain = '';
  const flush = () => {
    if (plain) parts.push({ kind: 'text', value: plain, quoting: 'none' });
    plain = '';
  };
  let i = 0;
  const tildeAt = (at: number) => {
    // `~`, `~user`, `~+`, `~-` up to the first `/` (or `:` in assignments).
    let j = at + 1;
    while (j < text.length && text[j] !== '/' && !(assignment && text[j] === ':')) {
      if (text[j] === '\\' || text[j] === '$' || text[j] === '`' || text[j] === '"' || text[j] === "'")
        return -1;
      j++;
    }
    return j;
  };
  if (atStart && text.startsWith('~')) {
    const j = tildeAt(0);
    if (j > 0) {
      parts.push({ kind: 'tilde', prefix: text.slice(0, j) });
      i = j;
    }
  }
  for (; i < text.length; i++) {
    const ch = text[i]!;
    if (ch === '\\') {
      const next = text[i + 1];
      if (next === undefined) {
        plain += ch;
        continue;
      }
      i++;
      if (next === '\n') continue;
      flush();
      parts.push({ kind: 'text', value: next, quoting: 'escape' });
      continue;
    }
    if (assignment && (ch === ':' || ch === '=') && text[i + 1] === '~') {
      plain += ch;
      const j = tildeAt(i + 1);
      if (j > 0) {
        flush();
        parts.push({ kind: 'tilde', prefix: text.slice(i + 1, j) });
        i = j - 1;
      }
      continue;
    }
    plain += ch;
  }
  flush();
  if (parts.length === 0) parts.push({ kind: 'text', value: '', quoting: 'none' });
  return parts;
}

/** An unescaped backtick, or `$` before `(`, `{`, `[` or a parameter name, in unparsed text. */
function hasUnparsedExpansion(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '\\') i++;
    else if (ch === '`') return true;
    else if (ch === '$' && i + 1 < text.length && /[({[A-Za-z0-9_@*#?$!-]/.test(text[i + 1]!)) return true;
  }
  return false;
}

/** Text, `~` and a plain `$x` / `${x}`: pieces whose evaluation runs nothing. */
function harmlessInBrace(part: WordPart): boolean {
  if (part.kind === 'text' || part.kind === 'tilde') return true;
  return (
    part.kind === 'param' &&
    part.form === 'plain' &&
    !part.indirect &&
    !part.length &&
    part.subscript === undefined
  );
}

function removeQuotes(text: string): string {
  return text.replace(
    /\\(.)|'([^']*)'|"([^"]*)"/gs,
    (_m, esc?: string, sq?: string, dq?: string) => esc ?? sq ?? dq ?? '',
  );
}

/** The smallest node spanning offset `at`, and whether a here-document body encloses it. */
function smallestAt(root: PlainNode, at: number): { node: PlainNode; inHeredoc: boolean } {
  let node = root;
  let inHeredoc = false;
  for (;;) {
    const child = node.children.find((c) => c.start <= at && c.end >= at + 1);
    if (!child) return { node, inHeredoc };
    if (node.type === 'heredoc_body') inHeredoc = true;
    node = child;
  }
}

function isEscapedBackslash(source: string, at: number): boolean {
  let count = 0;
  for (let i = at - 1; i >= 0 && source[i] === '\\'; i--) count++;
  return count % 2 === 1;
}

function clip(text: string): string {
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}
