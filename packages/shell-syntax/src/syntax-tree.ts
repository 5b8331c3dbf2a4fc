import type { Node } from 'web-tree-sitter';
import { decodeAnsiC } from './ansi-c.js';
import type {
  Assignment,
  HereDoc,
  Quoting,
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

const REDIRECT_TYPES = new Set(['file_redirect', 'heredoc_redirect', 'herestring_redirect']);
/** Named node kinds that only separate or decorate statements. */
const SKIPPED = new Set(['comment', 'heredoc_body', 'heredoc_end']);

function kids(node: Node): Node[] {
  const out: Node[] = [];
  for (const child of node.children) if (child) out.push(child);
  return out;
}

/**
 * Converts a tree-sitter-bash tree into a `SyntaxTree` by an allow-list of node kinds. Every kind
 * not handled below becomes an `unknown` statement or word part and is recorded in `unknowns`,
 * so nothing the converter was not taught can pass as understood.
 */
export class SyntaxConverter {
  private readonly unknowns: SyntaxTree['unknowns'] = [];

  constructor(private readonly source: string) {}

  convert(root: Node): SyntaxTree {
    return { body: this.sequence(kids(root)), unknowns: this.unknowns };
  }

  private unknown(node: Node): void {
    this.unknowns.push({ nodeType: node.type, text: clip(node.text), start: node.startIndex });
  }

  // ---------------------------------------------------------------------------------------------
  // statements

  /** Statements among `nodes`, split by `;`, `&` and newlines; `&` marks the one before it. */
  private sequence(nodes: readonly Node[]): Sequence {
    const items: SequenceItem[] = [];
    for (const node of nodes) {
      if (!node.isNamed) {
        if (node.type === '&' && items.length > 0) items[items.length - 1]!.background = true;
        else if (node.type !== ';' && node.type !== '\n' && node.type !== ';;' && node.type !== '&;') {
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

  private base(node: Node) {
    return { redirects: [] as Redirect[], text: node.text, start: node.startIndex, end: node.endIndex };
  }

  private statement(node: Node): Statement {
    switch (node.type) {
      case 'command':
        return this.command(node);
      case 'declaration_command':
      case 'unset_command':
        return this.declaration(node);
      case 'variable_assignment':
      case 'variable_assignments': {
        const list = node.type === 'variable_assignments' ? node.namedChildren : [node];
        const assignments: Assignment[] = [];
        for (const n of list) {
          if (n?.type === 'variable_assignment') assignments.push(this.assignment(n));
          else if (n) this.unknown(n);
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
        const first = node.child(0);
        if (first?.type === '((') return { kind: 'arithmetic', ...this.base(node) };
        return { kind: 'group', ...this.base(node), body: this.sequence(inner(node, '{', '}')) };
      }
      case 'if_statement':
        return this.ifStatement(node);
      case 'for_statement':
        return this.forStatement(node);
      case 'c_style_for_statement': {
        const body = node.childForFieldName('body');
        return {
          kind: 'arithmetic',
          ...this.base(node),
          ...(body ? { body: this.doGroup(body) } : {}),
        };
      }
      case 'while_statement': {
        const keyword = node.child(0)?.type;
        const condition: Node[] = [];
        let body: Node | undefined;
        for (const child of kids(node).slice(1)) {
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
        const name = node.childForFieldName('name');
        const body = node.childForFieldName('body');
        const fn: Statement = {
          kind: 'function',
          ...this.base(node),
          name: name?.text ?? '',
          body: body ? this.statement(body) : { kind: 'unknown', ...this.base(node), nodeType: 'missing' },
        };
        const redirect = node.childForFieldName('redirect');
        if (redirect) fn.redirects.push(...this.redirectList(redirect));
        return fn;
      }
      case 'test_command':
        return this.test(node);
      case 'negated_command': {
        const body = node.namedChildren.find((n) => n && !SKIPPED.has(n.type));
        return {
          kind: 'negated',
          ...this.base(node),
          body: body ? this.statement(body) : { kind: 'unknown', ...this.base(node), nodeType: 'missing' },
        };
      }
      default:
        this.unknown(node);
        return { kind: 'unknown', ...this.base(node), nodeType: node.type };
    }
  }

  private doGroup(node: Node): Sequence {
    if (node.type === 'do_group') return this.sequence(inner(node, 'do', 'done'));
    if (node.type === 'compound_statement') return this.sequence(inner(node, '{', '}'));
    return { items: [{ statement: this.statement(node), background: false }] };
  }

  private command(node: Node): Statement {
    // `time ( … )` / `time { … }`: the keyword times a compound command; what runs is the compound.
    const compound = node.namedChildren.find(
      (c) => c?.type === 'subshell' || c?.type === 'compound_statement',
    );
    const first = node.namedChildren[0];
    if (compound && first?.type === 'command_name' && /^(time|coproc)$/.test(first.text)) {
      const inner = this.statement(compound);
      for (const child of kids(node))
        if (REDIRECT_TYPES.has(child.type)) inner.redirects.push(...this.redirectList(child));
      return { ...inner, text: node.text, start: node.startIndex, end: node.endIndex };
    }
    const cmd: SimpleCommand = {
      kind: 'simple',
      ...this.base(node),
      assignments: [],
      words: [],
      argumentAssignments: [],
    };
    let locale = false;
    for (const child of kids(node)) {
      if (!child.isNamed) {
        // `$"…"` parses as an anonymous `$` before a string.
        if (child.type === '$') locale = true;
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
        const first = child.namedChildren[0];
        cmd.words.push(first ? this.word(first) : this.unknownWord(child));
        continue;
      }
      const word = this.word(child);
      if (locale) {
        word.parts = [{ kind: 'locale', text: `$${child.text}` }];
        word.text = `$${word.text}`;
        locale = false;
      }
      cmd.words.push(word);
    }
    return cmd;
  }

  /** `export A=1 b`, `declare -a x=(…)`, `local z`, `unset -f y`. */
  private declaration(node: Node): SimpleCommand {
    const cmd: SimpleCommand = {
      kind: 'simple',
      ...this.base(node),
      assignments: [],
      words: [],
      argumentAssignments: [],
    };
    for (const child of kids(node)) {
      if (!child.isNamed) {
        if (cmd.words.length === 0 && /^[a-z]+$/.test(child.type)) {
          cmd.declaration = child.type;
          cmd.words.push(literalWord(child));
        } else this.unknown(child);
        continue;
      }
      if (child.type === 'variable_assignment') {
        const a = this.assignment(child);
        cmd.argumentAssignments.push(a);
        cmd.words.push({ ...this.assignmentWord(child, a), text: child.text });
        continue;
      }
      if (REDIRECT_TYPES.has(child.type)) {
        cmd.redirects.push(...this.redirectList(child));
        continue;
      }
      if (child.type === 'variable_name') {
        cmd.words.push(literalWord(child));
        continue;
      }
      if (child.type === 'comment') continue;
      cmd.words.push(this.word(child));
    }
    return cmd;
  }

  /** The word an assignment argument reads as (`A=1` as one argv word). */
  private assignmentWord(node: Node, a: Assignment): Word {
    const parts: WordPart[] = [
      { kind: 'text', value: `${a.name}${a.subscript ?? ''}${a.append ? '+=' : '='}`, quoting: 'none' },
    ];
    if (a.value) parts.push(...a.value.parts);
    if (a.array) parts.push({ kind: 'unknown', nodeType: 'array', text: node.text });
    return { text: node.text, parts, start: node.startIndex, end: node.endIndex };
  }

  private assignment(node: Node): Assignment {
    const nameNode = node.childForFieldName('name');
    const valueNode = node.childForFieldName('value');
    const append = kids(node).some((c) => !c.isNamed && c.type === '+=');
    let name = nameNode?.text ?? '';
    let subscript: string | undefined;
    if (nameNode?.type === 'subscript') {
      name = nameNode.childForFieldName('name')?.text ?? '';
      const index = nameNode.childForFieldName('index');
      subscript = `[${index?.text ?? ''}]`;
    } else if (nameNode && nameNode.type !== 'variable_name') {
      this.unknown(nameNode);
    }
    const a: Assignment = { name, append, text: node.text };
    if (subscript !== undefined) a.subscript = subscript;
    if (valueNode) {
      if (valueNode.type === 'array') {
        a.array = valueNode.namedChildren
          .filter((n): n is Node => n !== null && n.type !== 'comment')
          .map((n) => this.word(n, true));
      } else a.value = this.word(valueNode, true);
    }
    return a;
  }

  private pipeline(node: Node): Statement {
    const stages: Statement[] = [];
    const operators: ('|' | '|&')[] = [];
    for (const child of kids(node)) {
      if (!child.isNamed) {
        if (child.type === '|' || child.type === '|&') operators.push(child.type);
        else this.unknown(child);
        continue;
      }
      if (SKIPPED.has(child.type)) continue;
      stages.push(this.statement(child));
    }
    return { kind: 'pipeline', ...this.base(node), stages, operators };
  }

  private list(node: Node): Statement {
    const parts = kids(node).filter((c) => (c.isNamed ? !SKIPPED.has(c.type) : true));
    let left: Statement | undefined;
    let operator: '&&' | '||' | undefined;
    for (const child of parts) {
      if (!child.isNamed) {
        if (child.type === '&&' || child.type === '||') operator = child.type;
        else this.unknown(child);
        continue;
      }
      const statement = this.statement(child);
      if (!left) left = statement;
      else {
        left = {
          kind: 'and-or',
          redirects: [],
          text: this.source.slice(left.start, statement.end),
          start: left.start,
          end: statement.end,
          left,
          operator: operator ?? '&&',
          right: statement,
        };
        operator = undefined;
      }
    }
    return left ?? { kind: 'unknown', ...this.base(node), nodeType: 'list' };
  }

  /**
   * `body > f`. tree-sitter hangs what follows a here-document's start on the heredoc node: a
   * pipeline continuation (`cat <<EOF | sh`), an and-or continuation (`cat <<EOF && rm x`), extra
   * redirects and even extra arguments (`cat <<EOF file`); they are put back where bash reads them.
   */
  private redirected(node: Node): Statement {
    const bodyNode = node.childForFieldName('body');
    let statement: Statement = bodyNode
      ? this.statement(bodyNode)
      : { kind: 'unknown', ...this.base(node), nodeType: 'missing' };
    const redirects: Redirect[] = [];
    const continuations: { type: 'pipe' | 'and-or'; operator: string; node: Node }[] = [];
    const extraArgs: Node[] = [];
    for (const child of kids(node)) {
      if (child === bodyNode || (bodyNode && child.id === bodyNode.id)) continue;
      if (!child.isNamed) {
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
    statement = { ...statement, text: node.text, start: node.startIndex, end: node.endIndex };
    for (const c of continuations) {
      if (c.type === 'pipe') {
        const next = this.pipelineContinuation(c.node);
        const stages = [statement, ...next.stages];
        statement = {
          kind: 'pipeline',
          redirects: [],
          text: this.source.slice(statement.start, next.end),
          start: statement.start,
          end: next.end,
          stages,
          operators: [c.operator as '|' | '|&', ...next.operators],
        };
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
  private pipelineContinuation(node: Node): { stages: Statement[]; operators: ('|' | '|&')[]; end: number } {
    const stages: Statement[] = [];
    const operators: ('|' | '|&')[] = [];
    for (const child of kids(node)) {
      if (!child.isNamed) {
        if (child.type === '|' || child.type === '|&') operators.push(child.type);
        else this.unknown(child);
        continue;
      }
      if (SKIPPED.has(child.type)) continue;
      stages.push(this.statement(child));
    }
    // The first operator joins the heredoc command to the first stage here.
    const first = operators.shift() ?? '|';
    return { stages, operators: [first, ...operators].slice(0, stages.length), end: node.endIndex };
  }

  private ifStatement(node: Node): Statement {
    const clauses: { condition: Sequence; body: Sequence }[] = [];
    let otherwise: Sequence | undefined;
    const collect = (children: Node[], startKeyword: string) => {
      const condition: Node[] = [];
      const body: Node[] = [];
      let inBody = false;
      for (const child of children) {
        if (!child.isNamed && child.type === startKeyword) continue;
        if (!child.isNamed && child.type === 'then') {
          inBody = true;
          continue;
        }
        if (child.type === 'elif_clause' || child.type === 'else_clause') continue;
        if (!child.isNamed && child.type === 'fi') continue;
        (inBody ? body : condition).push(child);
      }
      clauses.push({ condition: this.sequence(condition), body: this.sequence(body) });
    };
    const children = kids(node);
    collect(children, 'if');
    for (const child of children) {
      if (child.type === 'elif_clause') collect(kids(child), 'elif');
      else if (child.type === 'else_clause')
        otherwise = this.sequence(kids(child).filter((c) => !(!c.isNamed && c.type === 'else')));
    }
    return { kind: 'if', ...this.base(node), clauses, ...(otherwise ? { otherwise } : {}) };
  }

  private forStatement(node: Node): Statement {
    const keyword = node.child(0)?.type;
    const variable = node.childForFieldName('variable')?.text ?? '';
    const body = node.childForFieldName('body');
    let values: Word[] | undefined;
    let sawIn = false;
    for (const child of kids(node)) {
      if (!child.isNamed && child.type === 'in') {
        sawIn = true;
        values = [];
        continue;
      }
      if (sawIn && child.isNamed && child.type !== 'do_group' && child.type !== 'comment') {
        if (node.fieldNameForChild(kids(node).indexOf(child)) === 'value' || child.type !== 'variable_name')
          values!.push(this.word(child));
      }
    }
    return {
      kind: 'for',
      ...this.base(node),
      select: keyword === 'select',
      variable,
      ...(values ? { values } : {}),
      body: body ? this.doGroup(body) : { items: [] },
    };
  }

  private caseStatement(node: Node): Statement {
    const valueNode = node.childForFieldName('value');
    const items: { patterns: Word[]; body: Sequence }[] = [];
    for (const item of kids(node)) {
      if (item.type !== 'case_item') continue;
      const patterns: Word[] = [];
      const body: Node[] = [];
      let afterParen = false;
      const children = kids(item);
      children.forEach((child, i) => {
        if (!afterParen) {
          if (!child.isNamed) {
            if (child.type === ')') afterParen = true;
            return;
          }
          if (item.fieldNameForChild(i) === 'value') patterns.push(this.word(child));
          else this.unknown(child);
          return;
        }
        if (item.fieldNameForChild(i) === 'termination' || item.fieldNameForChild(i) === 'fallthrough')
          return;
        body.push(child);
      });
      items.push({ patterns, body: this.sequence(body) });
    }
    return {
      kind: 'case',
      ...this.base(node),
      value: valueNode ? this.word(valueNode) : this.unknownWord(node),
      items,
    };
  }

  private test(node: Node): Statement {
    const bracket = node.child(0)?.type === '[' ? '[' : '[[';
    const exprNode = node.namedChildren.find((n) => n && n.type !== 'comment');
    const t: Statement = {
      kind: 'test',
      ...this.base(node),
      bracket,
      ...(exprNode ? { expression: this.testExpression(exprNode) } : {}),
    };
    return t;
  }

  private testExpression(node: Node): TestExpression {
    switch (node.type) {
      case 'unary_expression': {
        const op = node.childForFieldName('operator');
        const operand = node.namedChildren.find((n) => n && n.id !== op?.id);
        return {
          kind: 'unary',
          operator: op?.text ?? '',
          operand: operand
            ? this.testExpression(operand)
            : { kind: 'unknown', nodeType: 'missing', text: '' },
        };
      }
      case 'binary_expression': {
        const left = node.childForFieldName('left');
        const right = node.childForFieldName('right');
        const op = node.childForFieldName('operator');
        if (!left || !right) {
          this.unknown(node);
          return { kind: 'unknown', nodeType: node.type, text: node.text };
        }
        return {
          kind: 'binary',
          operator: op?.text ?? '',
          left: this.testExpression(left),
          right: this.testExpression(right),
        };
      }
      case 'parenthesized_expression': {
        const innerNode = node.namedChildren.find((n) => n !== null);
        if (!innerNode) return { kind: 'unknown', nodeType: node.type, text: node.text };
        return this.testExpression(innerNode);
      }
      case 'regex':
        return { kind: 'regex', text: node.text };
      case 'test_operator':
      case 'redirected_statement':
      case 'ternary_expression':
      case 'postfix_expression':
        this.unknown(node);
        return { kind: 'unknown', nodeType: node.type, text: node.text };
      default:
        return { kind: 'word', word: this.word(node) };
    }
  }

  // ---------------------------------------------------------------------------------------------
  // redirects

  private redirectList(
    node: Node,
    continuations?: { type: 'pipe' | 'and-or'; operator: string; node: Node }[],
    extraArgs?: Node[],
  ): Redirect[] {
    const out: Redirect[] = [];
    const r: Redirect = { operator: '', text: node.text };
    let heredoc: HereDoc | undefined;
    const children = kids(node);
    children.forEach((child, i) => {
      const field = node.fieldNameForChild(i);
      if (!child.isNamed) {
        if (
          field === 'operator' &&
          node.type === 'heredoc_redirect' &&
          (child.type === '&&' || child.type === '||')
        ) {
          const right = node.childForFieldName('right');
          if (right && continuations)
            continuations.push({ type: 'and-or', operator: child.type, node: right });
          else this.unknown(child);
          return;
        }
        if (!r.operator && /^[<>&|-]+$/.test(child.type)) r.operator = child.type;
        else this.unknown(child);
        return;
      }
      switch (child.type) {
        case 'file_descriptor':
          r.fd = Number(child.text);
          return;
        case 'heredoc_start': {
          const quoted = /['"\\]/.test(child.text);
          heredoc = {
            delimiter: removeQuotes(child.text),
            quoted,
            stripTabs: r.operator === '<<-',
            body: '',
            parts: [],
            backtick: false,
          };
          return;
        }
        case 'heredoc_body':
          if (heredoc) {
            heredoc.body = child.text;
            if (!heredoc.quoted) {
              heredoc.parts = this.heredocParts(child);
              heredoc.backtick = child.text.includes('`');
            }
          }
          return;
        case 'heredoc_end':
        case 'comment':
          return;
        case 'pipeline':
          if (node.type === 'heredoc_redirect' && continuations) {
            continuations.push({ type: 'pipe', operator: '|', node: child });
          } else this.unknown(child);
          return;
        default:
          break;
      }
      if (REDIRECT_TYPES.has(child.type)) {
        out.push(...this.redirectList(child, continuations, extraArgs));
        return;
      }
      if (field === 'right' && node.type === 'heredoc_redirect') return; // handled with its operator
      if (node.type === 'heredoc_redirect') {
        if (field === 'argument' && extraArgs) extraArgs.push(child);
        else this.unknown(child);
        return;
      }
      if (!r.target) r.target = this.word(child);
      else this.unknown(child);
    });
    if (!r.operator)
      r.operator =
        node.type === 'heredoc_redirect' ? '<<' : node.type === 'herestring_redirect' ? '<<<' : '>';
    if (heredoc) {
      heredoc.stripTabs = r.operator === '<<-';
      r.heredoc = heredoc;
    }
    return [r, ...out];
  }

  private heredocParts(body: Node): WordPart[] {
    const parts: WordPart[] = [];
    for (const child of body.namedChildren) {
      if (!child || child.type === 'heredoc_content') continue;
      parts.push(...this.word(child).parts);
    }
    const text = body.text;
    // tree-sitter does not parse every form inside a body: `$((…))` and `$[…]` evaluate arithmetic.
    if (/\$\(\(|\$\[/.test(text) && !parts.some((p) => p.kind === 'arith'))
      parts.push({ kind: 'arith', text: clip(text), quoted: true });
    return parts;
  }

  // ---------------------------------------------------------------------------------------------
  // words

  private unknownWord(node: Node): Word {
    this.unknown(node);
    return {
      text: node.text,
      parts: [{ kind: 'unknown', nodeType: node.type, text: node.text }],
      start: node.startIndex,
      end: node.endIndex,
    };
  }

  /** One word; `assignment` enables tilde expansion after `=`/`:` as in assignment values. */
  word(node: Node, assignment = false): Word {
    const parts = this.parts(node, false, true, assignment);
    const word: Word = { text: node.text, parts, start: node.startIndex, end: node.endIndex };
    markBraces(word);
    return word;
  }

  private parts(node: Node, quoted: boolean, atStart: boolean, assignment: boolean): WordPart[] {
    switch (node.type) {
      case 'word':
      case 'extglob_pattern':
        return unquotedParts(node.text, atStart, assignment);
      case 'number':
      case 'variable_name':
      case 'special_variable_name':
      case 'file_descriptor': {
        if (node.namedChildCount > 0)
          return this.concat(
            kids(node).filter((c) => c.isNamed),
            quoted,
            assignment,
          );
        return [{ kind: 'text', value: node.text, quoting: quoted ? 'double' : 'none' }];
      }
      case 'raw_string':
        return [{ kind: 'text', value: node.text.slice(1, -1), quoting: 'single' }];
      case 'ansi_c_string':
        return [{ kind: 'text', value: decodeAnsiC(node.text.slice(2, -1)), quoting: 'ansi-c' }];
      case 'string':
        return this.doubleQuoted(node);
      case 'translated_string':
        return [{ kind: 'locale', text: node.text }];
      case 'concatenation':
        return this.concat(kids(node), quoted, assignment, atStart);
      case 'simple_expansion': {
        const nameNode = node.namedChildren[0];
        return [
          {
            kind: 'param',
            name: nameNode?.text ?? '',
            braced: false,
            quoted,
            args: [],
            form: 'plain',
            text: node.text,
          },
        ];
      }
      case 'expansion':
        return [this.expansion(node, quoted)];
      case 'command_substitution':
        return [
          {
            kind: 'command-sub',
            body: this.sequence(kids(node).filter((c) => c.isNamed)),
            backtick: node.text.startsWith('`'),
            quoted,
            text: node.text,
          },
        ];
      case 'process_substitution':
        return [
          {
            kind: 'process-sub',
            direction: node.text.startsWith('>') ? '>' : '<',
            body: this.sequence(kids(node).filter((c) => c.isNamed)),
            text: node.text,
          },
        ];
      case 'arithmetic_expansion':
        return [{ kind: 'arith', text: node.text, quoted }];
      case 'brace_expression':
        return [{ kind: 'brace', text: node.text }];
      case 'regex':
        return [{ kind: 'text', value: node.text, quoting: 'none' }];
      default:
        this.unknown(node);
        return [{ kind: 'unknown', nodeType: node.type, text: node.text }];
    }
  }

  private concat(children: Node[], quoted: boolean, assignment: boolean, atStart = true): WordPart[] {
    const out: WordPart[] = [];
    children.forEach((child, i) => {
      if (!child.isNamed) {
        // `$` before a string is `$"…"`; any other anonymous piece is literal text tree-sitter split off.
        if (child.type === '$' && children[i + 1]?.type === 'string') return;
        out.push({ kind: 'text', value: child.text, quoting: 'none' });
        return;
      }
      if (child.type === 'string' && children[i - 1]?.type === '$') {
        out.push({ kind: 'locale', text: `$${child.text}` });
        return;
      }
      out.push(...this.parts(child, quoted, atStart && i === 0, assignment));
    });
    return out;
  }

  private doubleQuoted(node: Node): WordPart[] {
    const parts: WordPart[] = [];
    const text = node.text;
    const open = text.startsWith('$"') ? 2 : 1;
    let pos = node.startIndex + open;
    const end = node.endIndex - 1;
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
    for (const child of node.namedChildren) {
      if (!child || child.type === 'string_content') continue;
      append(pos, child.startIndex);
      parts.push(...this.parts(child, true, false, false));
      pos = child.endIndex;
    }
    append(pos, end);
    if (parts.length === 0) parts.push({ kind: 'text', value: '', quoting: 'double' });
    return parts;
  }

  /** `${…}` in its modelled forms; anything else keeps form 'unknown'. */
  private expansion(node: Node, quoted: boolean): WordPart {
    const part: Extract<WordPart, { kind: 'param' }> = {
      kind: 'param',
      name: '',
      braced: true,
      quoted,
      args: [],
      form: 'plain',
      text: node.text,
    };
    const children = kids(node);
    let sawName = false;
    let ops = '';
    children.forEach((child, i) => {
      const field = node.fieldNameForChild(i);
      if (!child.isNamed) {
        if (child.type === '${' || child.type === '}') return;
        if (field === 'operator' || /^[-:=?+#%/^,!@*]+$|^[A-Za-z]$/.test(child.type)) {
          if (!sawName && child.type === '#') part.length = true;
          else if (!sawName && child.type === '!') part.indirect = true;
          else ops += child.type;
          return;
        }
        part.form = 'unknown';
        return;
      }
      if (!sawName && (child.type === 'variable_name' || child.type === 'special_variable_name')) {
        part.name = child.text;
        sawName = true;
        return;
      }
      if (!sawName && child.type === 'subscript') {
        part.name = child.childForFieldName('name')?.text ?? '';
        part.subscript = child.childForFieldName('index')?.text ?? '';
        sawName = true;
        return;
      }
      if (!sawName) {
        part.form = 'unknown';
        return;
      }
      part.args.push(this.word(child));
    });
    if (!sawName) part.form = 'unknown';
    if (ops) {
      part.op = ops;
      if (part.form === 'plain') part.form = 'operator';
    }
    if (part.form === 'unknown')
      this.unknowns.push({ nodeType: 'expansion', text: clip(node.text), start: node.startIndex });
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
    case 'pipeline':
      attachToLast(statement.stages[statement.stages.length - 1] ?? statement, redirects);
      if (statement.stages.length === 0) statement.redirects.push(...redirects);
      return;
    case 'negated':
      attachToLast(statement.body, redirects);
      return;
    default:
      statement.redirects.push(...redirects);
  }
}

/** Children of a bracketed construct between its open and close keywords. */
function inner(node: Node, open: string, close: string): Node[] {
  return kids(node).filter((c) => c.isNamed || (c.type !== open && c.type !== close));
}

function literalWord(node: Node): Word {
  return {
    text: node.text,
    parts: [{ kind: 'text', value: node.text, quoting: 'none' }],
    start: node.startIndex,
    end: node.endIndex,
  };
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

/**
 * Brace expansion (`{a,b}`, `pre{1..3}`) turns one word into several: tree-sitter splits it into
 * pieces, so it is found on the word's unquoted skeleton and the whole word becomes one brace part.
 */
function markBraces(word: Word): void {
  let skeleton = '';
  for (const p of word.parts) {
    if (p.kind === 'text' && p.quoting === 'none') skeleton += p.value;
    else if (p.kind === 'brace') {
      word.parts = [{ kind: 'brace', text: word.text }];
      return;
    } else skeleton += '\0';
  }
  if (hasBraceExpansion(skeleton)) word.parts = [{ kind: 'brace', text: word.text }];
}

/** `{a,b}` or `{x..y}` in unquoted text (NUL marks quoted or expanded pieces); linear scan. */
export function hasBraceExpansion(text: string): boolean {
  let open = -1;
  let sawSeparator = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '{') {
      open = i;
      sawSeparator = false;
    } else if (open >= 0 && (ch === ',' || (ch === '.' && text[i + 1] === '.'))) {
      sawSeparator = true;
    } else if (ch === '}' && open >= 0) {
      if (sawSeparator) return true;
      open = -1;
    }
  }
  return false;
}

function removeQuotes(text: string): string {
  return text.replace(
    /\\(.)|'([^']*)'|"([^"]*)"/gs,
    (_m, esc?: string, sq?: string, dq?: string) => esc ?? sq ?? dq ?? '',
  );
}

function clip(text: string): string {
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

/** The value of a word when it is nothing but text (any quoting) with no unquoted glob pattern. */
export function literalValue(word: Word): string | undefined {
  let value = '';
  for (const p of word.parts) {
    if (p.kind !== 'text') return undefined;
    value += p.value;
  }
  return hasGlob(word) ? undefined : value;
}

/** Whether the word's unquoted text holds a glob pattern (`*`, `?`, or `[…]` with a closing `]`). */
export function hasGlob(word: Word): boolean {
  let skeleton = '';
  for (const p of word.parts) skeleton += p.kind === 'text' && p.quoting === 'none' ? p.value : '\0';
  if (/[*?]/.test(skeleton)) return true;
  const open = skeleton.indexOf('[');
  return open >= 0 && skeleton.indexOf(']', open + 2) > open;
}

export type { Quoting };
