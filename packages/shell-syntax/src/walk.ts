import type { Node } from 'web-tree-sitter';
import { decodeAnsiC } from './ansi-c.js';
import type {
  Assignment,
  ParsedCommand,
  Redirect,
  ShellOperator,
  SimpleCommand,
  SyntaxFlags,
} from './types.js';

const OPERATORS = new Set<string>(['&&', '||', ';', '|', '|&', '&']);
/** Parents whose anonymous `;`/`&` children separate statements (not `for x in a; do`). */
const STATEMENT_PARENTS = new Set([
  'program',
  'list',
  'pipeline',
  'compound_statement',
  'subshell',
  'do_group',
  'if_statement',
  'elif_clause',
  'else_clause',
  'case_item',
  'while_statement',
  'redirected_statement',
]);
const CONTROL_FLOW = new Set([
  'if_statement',
  'for_statement',
  'c_style_for_statement',
  'while_statement',
  'case_statement',
  'select_statement',
]);
const REDIRECTS = new Set(['file_redirect', 'heredoc_redirect', 'herestring_redirect']);
const SUBSTITUTIONS = new Set(['command_substitution', 'process_substitution']);
const NESTING = new Set([
  'command_substitution',
  'process_substitution',
  'subshell',
  'compound_statement',
  'function_definition',
  'do_group',
  'if_statement',
  'elif_clause',
  'else_clause',
  'case_item',
  'while_statement',
  'for_statement',
  'c_style_for_statement',
  'negated_command',
  'test_command',
]);
/** Builtins that only exist inside a shell: running them as argv fails or does nothing. */
const SHELL_ONLY_BUILTINS = new Set([
  '.',
  ':',
  'alias',
  'bg',
  'bind',
  'break',
  'builtin',
  'caller',
  'cd',
  'compgen',
  'complete',
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

interface WordValue {
  value: string;
  literal: boolean;
}

function children(node: Node): Node[] {
  const out: Node[] = [];
  for (const child of node.children) if (child) out.push(child);
  return out;
}

/** Turns a tree-sitter-bash syntax tree into the ParsedCommand shape. */
export class TreeWalker {
  readonly flags = emptyFlags();
  readonly commands: SimpleCommand[] = [];
  readonly operators: ShellOperator[] = [];
  readonly redirects: Redirect[] = [];
  private firstError: string | undefined;
  private pipelines = 0;
  /** Redirects tree-sitter attached to an enclosing list, keyed by the command node they belong to. */
  private readonly pending = new Map<number, Redirect[]>();
  private stage: { id: number; stage: number } | undefined;

  /**
   * @param mayHaveErrors the tree's root `hasError`: when false no node is an error or missing,
   *   and the walk skips two WASM calls per node.
   */
  constructor(
    private readonly source: string,
    private readonly mayHaveErrors = true,
  ) {}

  walkProgram(root: Node): void {
    const statements = root.namedChildren.filter(
      (n) => n && n.type !== 'comment' && n.type !== 'heredoc_body',
    );
    if (statements.length > 1) this.flags.multipleStatements = true;
    this.visit(root, 0, false, false);
    this.detectLineContinuations(root);
    if (this.flags.multipleStatements) this.flags.chaining = true;
  }

  get error(): string | undefined {
    return this.firstError;
  }

  private visit(node: Node, depth: number, nested: boolean, inSubstitution: boolean): void {
    const type = node.type;
    if (this.mayHaveErrors && (node.isError || node.isMissing)) {
      this.flags.parseError = true;
      this.firstError ??= node.isMissing
        ? `missing ${JSON.stringify(type)} at offset ${node.startIndex}`
        : `unexpected ${JSON.stringify(truncate(node.text, 40))} at offset ${node.startIndex}`;
    }
    if (!node.isNamed) {
      if (OPERATORS.has(type) && node.parent && STATEMENT_PARENTS.has(node.parent.type)) {
        this.operators.push(type as ShellOperator);
        if (type === '&') this.flags.background = true;
        else if (type === '|' || type === '|&') this.flags.pipeline = true;
        else this.flags.chaining = true;
      }
      return;
    }
    switch (type) {
      case 'command':
        this.simpleCommand(node, undefined, nested, inSubstitution);
        this.visitCommandChildren(node, depth, nested, inSubstitution);
        return;
      case 'declaration_command':
      case 'unset_command':
        this.flags.declaration = true;
        this.simpleCommand(node, undefined, nested, inSubstitution);
        this.visitCommandChildren(node, depth, nested, inSubstitution);
        return;
      case 'variable_assignment':
      case 'variable_assignments':
        // A bare statement `FOO=bar` (assignments inside commands are handled by simpleCommand).
        if (
          node.parent?.type !== 'command' &&
          node.parent?.type !== 'declaration_command' &&
          node.parent?.type !== 'variable_assignments'
        ) {
          this.flags.assignment = true;
          this.bareAssignment(node, nested, inSubstitution);
        }
        break;
      case 'redirected_statement':
        this.redirectedStatement(node, depth, nested, inSubstitution);
        return;
      case 'pipeline': {
        // Each stage's commands (and everything nested in them) learn their pipeline position.
        const outer = this.stage;
        const id = this.pipelines++;
        let stage = 0;
        for (const child of children(node)) {
          if (child.isNamed && child.type !== 'comment') this.stage = { id, stage: stage++ };
          this.visit(child, depth + 1, nested, inSubstitution);
        }
        this.stage = outer;
        return;
      }
      case 'command_substitution':
        this.flags.commandSubstitution = true;
        break;
      case 'process_substitution':
        this.flags.processSubstitution = true;
        break;
      case 'arithmetic_expansion':
      case 'compound_arithmetic':
        this.flags.arithmetic = true;
        break;
      case 'simple_expansion':
        this.flags.variables = true;
        break;
      case 'expansion':
        this.flags.variables = true;
        this.flags.parameterExpansion = true;
        if (TRANSFORM.test(node.text)) this.flags.parameterTransform = true;
        break;
      case 'subshell':
        this.flags.subshell = true;
        break;
      case 'compound_statement':
        this.flags.braceGroup = true;
        break;
      case 'function_definition':
        this.flags.functionDefinition = true;
        break;
      case 'test_command':
        this.flags.testCommand = true;
        break;
      case 'negated_command':
        this.flags.negation = true;
        break;
      case 'comment':
        this.flags.comment = true;
        break;
      case 'ansi_c_string':
        this.flags.ansiCQuoting = true;
        break;
      case 'translated_string':
        this.flags.localeString = true;
        break;
      case 'brace_expression':
        this.flags.braceExpansion = true;
        break;
      case 'extglob_pattern':
        this.flags.glob = true;
        break;
      default:
        if (CONTROL_FLOW.has(type)) this.flags.controlFlow = true;
        if (REDIRECTS.has(type)) this.redirects.push(this.redirect(node));
    }
    const childNested = nested || NESTING.has(type);
    const childInSub = inSubstitution || SUBSTITUTIONS.has(type);
    for (const child of children(node)) this.visit(child, depth + 1, childNested, childInSub);
  }

  private redirectedStatement(node: Node, depth: number, nested: boolean, inSubstitution: boolean): void {
    const body = node.childForFieldName('body');
    const own: Redirect[] = [];
    for (const child of children(node)) {
      if (REDIRECTS.has(child.type)) {
        const redirects = this.redirectList(child);
        own.push(...redirects);
        this.redirects.push(...redirects);
        // Substitutions inside redirect targets and heredoc bodies still run.
        this.visitRedirectInner(child, depth, nested, inSubstitution);
      } else if (child !== body && child.id !== body?.id) {
        this.visit(child, depth + 1, nested, inSubstitution);
      }
    }
    if (body && (body.type === 'list' || body.type === 'pipeline')) {
      // tree-sitter-bash hangs `a && b > f` and `a | b > f` on the whole list; bash gives the
      // redirect to the last command (`b`), so that is where it is recorded.
      const last = lastCommandOf(body);
      if (last) this.pending.set(last.id, [...(this.pending.get(last.id) ?? []), ...own]);
    }
    if (body) {
      if (body.type === 'command' || body.type === 'declaration_command' || body.type === 'unset_command') {
        if (body.type !== 'command') this.flags.declaration = true;
        this.simpleCommand(body, own, nested, inSubstitution);
        this.visitCommandChildren(body, depth, nested, inSubstitution);
      } else {
        this.visit(body, depth + 1, nested, inSubstitution);
      }
    }
  }

  /** Visits a simple command's parts for nested commands; its redirects were recorded already. */
  private visitCommandChildren(node: Node, depth: number, nested: boolean, inSubstitution: boolean): void {
    for (const child of children(node)) {
      if (REDIRECTS.has(child.type)) {
        this.visitRedirectInner(child, depth, nested, inSubstitution);
      } else {
        this.visit(child, depth + 1, nested, inSubstitution);
      }
    }
  }

  /** Visits what is inside a redirect (targets, heredoc bodies) except the redirects recorded already. */
  private visitRedirectInner(node: Node, depth: number, nested: boolean, inSubstitution: boolean): void {
    for (const inner of children(node)) {
      if (REDIRECTS.has(inner.type)) this.visitRedirectInner(inner, depth + 1, nested, inSubstitution);
      else this.visit(inner, depth + 1, nested, inSubstitution);
    }
  }

  /** A redirect and the redirects tree-sitter nests in it (`cat <<EOF > out` nests `> out`). */
  private redirectList(node: Node): Redirect[] {
    const out = [this.redirect(node)];
    if (node.type === 'heredoc_redirect') {
      for (const child of children(node))
        if (REDIRECTS.has(child.type)) out.push(...this.redirectList(child));
    }
    return out;
  }

  private simpleCommand(
    node: Node,
    outerRedirects: Redirect[] | undefined,
    nested: boolean,
    inSubstitution: boolean,
  ): void {
    const words: string[] = [];
    const literal: boolean[] = [];
    const rawWords: string[] = [];
    const assignments: Assignment[] = [];
    const redirects: Redirect[] = [];
    const isCommand = node.type === 'command';
    for (const child of children(node)) {
      if (!child.isNamed) {
        // `$"..."` (locale translation) parses as an anonymous `$` before a string.
        if (child.type === '$') this.flags.localeString = true;
        // `export`, `declare`, `unset` ... keywords are anonymous children.
        if (!isCommand && words.length === 0 && /^[a-z]+$/.test(child.type)) {
          words.push(child.text);
          literal.push(true);
          rawWords.push(child.text);
        }
        continue;
      }
      if (child.type === 'variable_assignment' && (isCommand || words.length === 0)) {
        if (isCommand) {
          assignments.push(this.assignment(child));
          this.flags.assignment = true;
          continue;
        }
      }
      if (REDIRECTS.has(child.type)) {
        const list = this.redirectList(child);
        redirects.push(...list);
        this.redirects.push(...list);
        continue;
      }
      if (child.type === 'command_name') {
        const first = child.namedChildren[0];
        const value = first ? this.wordValue(first) : { value: child.text, literal: false };
        words.push(value.value);
        literal.push(value.literal);
        rawWords.push(child.text);
        continue;
      }
      if (child.type === 'comment') continue;
      if (child.type === 'variable_assignment') {
        // `export FOO=$(x)`: the assignment is an argument of the declaration builtin.
        const a = this.assignment(child);
        words.push(`${a.name}=${a.value}`);
        literal.push(a.literal);
        rawWords.push(child.text);
        continue;
      }
      const value = this.wordValue(child);
      words.push(value.value);
      literal.push(value.literal);
      rawWords.push(child.text);
    }
    const pending = this.pending.get(node.id);
    if (pending) redirects.push(...pending);
    if (outerRedirects) redirects.push(...outerRedirects);
    const command: SimpleCommand = {
      text: node.text,
      words,
      literal,
      rawWords,
      assignments,
      redirects,
      nested,
      inSubstitution,
      start: node.startIndex,
      end: node.endIndex,
    };
    if (this.stage) command.pipeline = { ...this.stage };
    if (words.length > 0) {
      command.name = words[0]!;
      if (literal[0] && SHELL_ONLY_BUILTINS.has(words[0]!)) this.flags.shellBuiltin = true;
    }
    this.commands.push(command);
  }

  private bareAssignment(node: Node, nested: boolean, inSubstitution: boolean): void {
    const list = node.type === 'variable_assignments' ? node.namedChildren : [node];
    const assignments = list
      .filter((n): n is Node => n !== null && n.type === 'variable_assignment')
      .map((n) => this.assignment(n));
    this.commands.push({
      text: node.text,
      words: [],
      literal: [],
      rawWords: [],
      ...(this.stage ? { pipeline: { ...this.stage } } : {}),
      assignments,
      redirects: [],
      nested,
      inSubstitution,
      start: node.startIndex,
      end: node.endIndex,
    });
  }

  private assignment(node: Node): Assignment {
    const nameNode = node.childForFieldName('name');
    const valueNode = node.childForFieldName('value');
    let name = nameNode?.text ?? '';
    // `FOO+=x` keeps the `+` in the name so callers see the append.
    const op = children(node).find((c) => !c.isNamed && (c.type === '=' || c.type === '+='));
    if (op?.type === '+=') name += '+';
    if (nameNode?.type === 'subscript') this.flags.arithmetic = true;
    if (!valueNode) return { name, value: '', literal: nameNode?.type !== 'subscript' };
    const value = this.wordValue(valueNode);
    return { name, value: value.value, literal: value.literal && nameNode?.type !== 'subscript' };
  }

  private redirect(node: Node): Redirect {
    let operator = '';
    let fd: number | undefined;
    let target: WordValue | undefined;
    let heredocBody: string | undefined;
    for (const child of children(node)) {
      if (!child.isNamed) {
        if (!operator && /^[<>&|-]+$/.test(child.type)) operator = child.type;
        continue;
      }
      if (child.type === 'file_descriptor') {
        fd = Number(child.text);
        continue;
      }
      if (child.type === 'heredoc_start') {
        target = { value: removeQuotesSimple(child.text), literal: true };
        continue;
      }
      if (child.type === 'heredoc_body') {
        heredocBody = child.text;
        continue;
      }
      if (child.type === 'heredoc_end' || child.type === 'comment' || REDIRECTS.has(child.type)) continue;
      if (node.type === 'heredoc_redirect') continue;
      if (!target) target = this.wordValue(child);
    }
    if (node.type === 'heredoc_redirect') this.flags.heredoc = true;
    else if (node.type === 'herestring_redirect') this.flags.herestring = true;
    this.flags.redirection = true;
    if (!operator)
      operator = node.type === 'heredoc_redirect' ? '<<' : node.type === 'herestring_redirect' ? '<<<' : '>';
    const redirect: Redirect = { operator, targetLiteral: target?.literal ?? true };
    if (fd !== undefined) redirect.fd = fd;
    if (target) redirect.target = target.value;
    if (heredocBody !== undefined) redirect.heredocBody = heredocBody;
    return redirect;
  }

  /** Quote removal of one word-like node; non-literal parts keep their source text. */
  private wordValue(node: Node): WordValue {
    switch (node.type) {
      case 'word':
        return this.unquotedWord(node.text, true);
      case 'number':
        return { value: node.text, literal: true };
      case 'raw_string':
        return { value: node.text.slice(1, -1), literal: true };
      case 'ansi_c_string':
        this.flags.ansiCQuoting = true;
        return { value: decodeAnsiC(node.text.slice(2, -1)), literal: true };
      case 'string':
      case 'translated_string':
        return this.doubleQuoted(node);
      case 'concatenation': {
        let value = '';
        let literal = true;
        const parts = children(node);
        for (const part of parts) {
          const v = this.wordValue(part);
          value += v.value;
          literal &&= v.literal;
        }
        // tree-sitter-bash splits `[ab]` into words `[`, `ab`, `]`: look for a bracket glob
        // across the unquoted pieces.
        const unquoted = parts
          .map((p) => (p.type === 'word' || p.type === 'number' ? p.text : '\0'))
          .join('');
        if (hasBracketGlob(unquoted)) {
          this.flags.glob = true;
          literal = false;
          value = node.text;
        }
        // tree-sitter-bash splits `{a,b}` into words `{`, `a,b`, `}`.
        if (parts.some((p) => p.type === 'word' && p.text.startsWith('{')) && hasBraceExpansion(node.text)) {
          this.flags.braceExpansion = true;
          literal = false;
          value = node.text;
        }
        return { value, literal };
      }
      case 'brace_expression':
        this.flags.braceExpansion = true;
        return { value: node.text, literal: false };
      case 'command_name': {
        const first = node.namedChildren[0];
        return first ? this.wordValue(first) : { value: node.text, literal: false };
      }
      default:
        return { value: node.text, literal: false };
    }
  }

  /** Backslash removal, glob / `~` / brace detection for an unquoted word. */
  private unquotedWord(text: string, atWordStart: boolean): WordValue {
    let value = '';
    let literal = true;
    if (atWordStart && text.startsWith('~')) {
      this.flags.tilde = true;
      literal = false;
    }
    const lastClose = text.lastIndexOf(']');
    for (let i = 0; i < text.length; i++) {
      const ch = text[i]!;
      if (ch === '\\') {
        const next = text[i + 1];
        if (next === '\n') {
          this.flags.lineContinuation = true;
          i++;
          continue;
        }
        if (next !== undefined) {
          value += next;
          i++;
        }
        continue;
      }
      if (ch === '*' || ch === '?' || (ch === '[' && lastClose > i + 1)) {
        this.flags.glob = true;
        literal = false;
      }
      value += ch;
    }
    if (text.startsWith('{') && text.endsWith('}') && hasBraceExpansion(text)) {
      this.flags.braceExpansion = true;
      literal = false;
    }
    return literal ? { value, literal } : { value: text, literal };
  }

  /** `"..."`: `\$ \` \" \\ \newline` escapes removed; expansions inside make it non-literal. */
  private doubleQuoted(node: Node): WordValue {
    const text = node.text;
    if (node.type === 'translated_string' || text.startsWith('$"')) this.flags.localeString = true;
    const base = node.startIndex;
    const open = text.startsWith('$"') ? 2 : 1;
    let literal = true;
    let value = '';
    let pos = base + open;
    const end = node.endIndex - 1;
    const append = (from: number, to: number) => {
      const chunk = this.source.slice(from, to);
      for (let i = 0; i < chunk.length; i++) {
        const ch = chunk[i]!;
        const next = chunk[i + 1];
        if (ch === '\\' && next !== undefined && '$`"\\\n'.includes(next)) {
          if (next === '\n') this.flags.lineContinuation = true;
          else value += next;
          i++;
          continue;
        }
        value += ch;
      }
    };
    for (const child of node.namedChildren) {
      if (!child || child.type === 'string_content') continue;
      append(pos, child.startIndex);
      value += child.text;
      literal = false;
      pos = child.endIndex;
    }
    append(pos, end);
    return literal ? { value, literal } : { value: text, literal };
  }

  /** Offsets of backslash-newline pairs the shell removes (outside single quotes, heredocs, comments). */
  readonly continuations: number[] = [];

  /** A backslash-newline outside single quotes, heredoc bodies and comments is a line continuation. */
  private detectLineContinuations(root: Node): void {
    let from = 0;
    for (;;) {
      const at = this.source.indexOf('\\\n', from);
      if (at < 0) return;
      from = at + 2;
      if (isEscapedBackslash(this.source, at)) continue;
      const node = root.descendantForIndex(at, at + 1);
      const type = node?.type;
      if (
        type === 'raw_string' ||
        type === 'heredoc_body' ||
        type === 'heredoc_content' ||
        type === 'comment'
      )
        continue;
      if (node && hasAncestor(node, 'heredoc_body')) continue;
      this.flags.lineContinuation = true;
      this.continuations.push(at);
    }
  }

  result(source: string): Omit<ParsedCommand, 'needsShell'> {
    return {
      source,
      ok: !this.flags.parseError,
      ...(this.flags.parseError
        ? { error: `parse error: ${this.firstError ?? 'the command is not valid bash'}` }
        : {}),
      commands: this.commands.sort((a, b) => a.start - b.start),
      operators: this.operators,
      redirects: this.redirects,
      flags: this.flags,
    };
  }
}

/** `{a,b}` or `{1..3}` somewhere in the text (linear scan: no backtracking on hostile input). */
function hasBraceExpansion(text: string): boolean {
  let open = -1;
  let sawSeparator = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '\\') {
      i++;
    } else if (ch === '{') {
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

/** An unescaped `[...]` with something inside, the pieces of quoted parts marked by NUL (linear scan). */
function hasBracketGlob(text: string): boolean {
  let open = -1;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '\\') i++;
    else if (ch === '\0') open = -1;
    else if (ch === '[') open = i;
    else if (ch === ']' && open >= 0 && i > open + 1) return true;
  }
  return false;
}

/** The simple command a trailing redirect of a list or pipeline belongs to. */
function lastCommandOf(node: Node): Node | undefined {
  let current: Node | null = node;
  for (let i = 0; current && i < 1000; i++) {
    if (
      current.type === 'command' ||
      current.type === 'declaration_command' ||
      current.type === 'unset_command'
    )
      return current;
    if (current.type === 'list' || current.type === 'pipeline') {
      const named: Node[] = current.namedChildren.filter(
        (n): n is Node => n !== null && n.type !== 'comment',
      );
      current = named[named.length - 1] ?? null;
    } else if (current.type === 'redirected_statement') {
      current = current.childForFieldName('body');
    } else {
      return undefined;
    }
  }
  return undefined;
}

function isEscapedBackslash(source: string, at: number): boolean {
  let count = 0;
  for (let i = at - 1; i >= 0 && source[i] === '\\'; i--) count++;
  return count % 2 === 1;
}

function hasAncestor(node: Node, type: string): boolean {
  for (let p = node.parent; p; p = p.parent) if (p.type === type) return true;
  return false;
}

function removeQuotesSimple(text: string): string {
  return text.replace(
    /\\(.)|'([^']*)'|"([^"]*)"/gs,
    (_m, esc?: string, sq?: string, dq?: string) => esc ?? sq ?? dq ?? '',
  );
}

function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
