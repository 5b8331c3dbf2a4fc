/**
 * A typed syntax tree of a bash command line, built from tree-sitter-bash by an allow-list: every
 * node kind the converter knows becomes one of these shapes; anything else becomes an `unknown`
 * node (and is listed in `SyntaxTree.unknowns`), so a consumer that refuses unknowns refuses
 * everything it was not taught. Offsets refer to the parsed text (the normalized source when the
 * command had line continuations).
 */

/** Where a piece of text came from: unquoted, '…', "…", $'…' (ANSI-C), or a backslash escape. */
export type Quoting = 'none' | 'single' | 'double' | 'ansi-c' | 'escape';

export type WordPart =
  /** Text after quote removal. Unquoted text may hold glob characters (`*?[`) and brace syntax. */
  | { kind: 'text'; value: string; quoting: Quoting }
  /** `~`, `~/…` (prefix `~`), `~+`, `~-`, `~user` at the start of a word (or after `=`/`:` in assignments). */
  | { kind: 'tilde'; prefix: string }
  /**
   * `$x`, `${x}`, `${x:-w}`, `$1`, `$@` … `name` is the variable (or special parameter); `op` the
   * operator after it (`:-`, `-`, `:=`, `=`, `:?`, `?`, `:+`, `+`, `#`, `##`, `%`, `%%`, `/`, `//`,
   * `/#`, `/%`, `^`, `^^`, `,`, `,,`, `:` (substring), `@X` (transform)); `length` for `${#x}`;
   * `indirect` for `${!x}`; `subscript` for `${a[i]}` (its source text); `args` the words after
   * the operator; `form` is 'unknown' when the expansion has parts the converter does not model.
   */
  | {
      kind: 'param';
      name: string;
      braced: boolean;
      quoted: boolean;
      op?: string;
      args: Word[];
      length?: boolean;
      indirect?: boolean;
      subscript?: string;
      form: 'plain' | 'operator' | 'unknown';
      text: string;
    }
  /** `$(…)` or `` `…` `` */
  | { kind: 'command-sub'; body: Sequence; backtick: boolean; quoted: boolean; text: string }
  /** `<(…)` or `>(…)` */
  | { kind: 'process-sub'; direction: '<' | '>'; body: Sequence; text: string }
  /**
   * `$((…))` or `$[…]`: arithmetic evaluation. `expansions`: the expansions and substitutions
   * inside the expression (`$x`, `${…}`, `$(…)`, nested `$((…))`), which run before it is evaluated.
   */
  | { kind: 'arith'; text: string; quoted: boolean; expansions: WordPart[] }
  /**
   * `$"…"`: locale translation (the value comes from a message catalog). `parts`: the string read
   * as `"…"`, what bash expands when the catalog has no translation (a translation replaces the
   * text, expansions included).
   */
  | { kind: 'locale'; text: string; parts: WordPart[] }
  /**
   * A brace expansion `{a,b}` / `{1..3}` (unquoted): it stands for the whole word (`text`), which
   * bash turns into several. `parts`: the word's pieces as written (brace syntax as unquoted text),
   * so the expansions inside can be judged. A brace word whose pieces hold more than text, `~` and
   * plain `$x` is also listed in `SyntaxTree.unknowns`.
   */
  | { kind: 'brace'; text: string; parts: WordPart[] }
  /** Anything else inside a word. */
  | { kind: 'unknown'; nodeType: string; text: string };

export interface Word {
  /** Source text of the word. */
  text: string;
  parts: WordPart[];
  start: number;
  end: number;
}

export interface Assignment {
  /** The variable name (without subscript). */
  name: string;
  /** `a[i]=…`: the subscript's source text (arithmetic for indexed arrays). */
  subscript?: string;
  /** `+=` */
  append: boolean;
  /** The value word (`a=x`), absent for `a=`. */
  value?: Word;
  /** `a=(x y)`: the array elements. */
  array?: Word[];
  text: string;
}

export interface HereDoc {
  delimiter: string;
  /** `<<'EOF'` / `<<"EOF"` / `<<\EOF`: the body is literal. */
  quoted: boolean;
  /** `<<-`: leading tabs stripped. */
  stripTabs: boolean;
  /** The body as written. */
  body: string;
  /** Expansions tree-sitter found in an unquoted body (backticks are not among them: see `backtick`). */
  parts: WordPart[];
  /** An unquoted body contains a backtick (tree-sitter does not parse backticks in bodies). */
  backtick: boolean;
}

export interface Redirect {
  /** `>`, `>>`, `<`, `&>`, `&>>`, `>&`, `<&`, `>|`, `<>`, `<<`, `<<-`, `<<<`. */
  operator: string;
  /** The descriptor written before the operator (`2>`), if any. */
  fd?: number;
  /** `{var}>file`: the descriptor is allocated into a variable. */
  fdVariable?: string;
  /** The target word (file, descriptor number, here-string word). */
  target?: Word;
  heredoc?: HereDoc;
  text: string;
  /** Offsets of the redirection (a here-document's body is not inside them). */
  start: number;
  end: number;
}

interface Base {
  /** Redirections that apply to this statement as a whole (`{ …; } > f`, `cmd > f`). */
  redirects: Redirect[];
  text: string;
  start: number;
  end: number;
}

export interface SimpleCommand extends Base {
  kind: 'simple';
  /** Prefix assignments (`A=1 cmd`) or, with no words, bare assignments (`A=1`). */
  assignments: Assignment[];
  /** argv words, the command name first. For `export`/`declare`/… the keyword is words[0]. */
  words: Word[];
  /** `export A=1`, `declare -a x=(…)`: the assignments given as arguments of a declaration builtin. */
  argumentAssignments: Assignment[];
  /** The declaration keyword when this is a declaration_command or unset_command. */
  declaration?: string;
}

export interface Pipeline extends Base {
  kind: 'pipeline';
  stages: Statement[];
  /** Per stage boundary: `|` or `|&`. */
  operators: ('|' | '|&')[];
}

export interface AndOr extends Base {
  kind: 'and-or';
  left: Statement;
  operator: '&&' | '||';
  right: Statement;
}

export interface SequenceItem {
  statement: Statement;
  /** Ended by `&`. */
  background: boolean;
  /** The operator written after the statement (`;` or `&`); absent for a newline or the end. */
  separator?: ';' | '&';
}

/** Statements separated by `;`, `&` or newlines (a program, a group's or a loop's body). */
export interface Sequence {
  items: SequenceItem[];
}

export interface Subshell extends Base {
  kind: 'subshell';
  body: Sequence;
}

export interface Group extends Base {
  kind: 'group';
  body: Sequence;
}

export interface If extends Base {
  kind: 'if';
  clauses: { condition: Sequence; body: Sequence }[];
  otherwise?: Sequence;
}

export interface For extends Base {
  kind: 'for';
  /** `select` instead of `for`. */
  select: boolean;
  variable: string;
  /** undefined: `for x; do` (the positional parameters). */
  values?: Word[];
  body: Sequence;
}

export interface While extends Base {
  kind: 'while';
  until: boolean;
  condition: Sequence;
  body: Sequence;
}

export interface Case extends Base {
  kind: 'case';
  value: Word;
  items: { patterns: Word[]; body: Sequence }[];
}

export interface FunctionDefinition extends Base {
  kind: 'function';
  name: string;
  body: Statement;
}

export type TestExpression =
  | { kind: 'unary'; operator: string; operand: TestExpression }
  | { kind: 'binary'; operator: string; left: TestExpression; right: TestExpression }
  | { kind: 'word'; word: Word }
  | { kind: 'regex'; text: string }
  | { kind: 'unknown'; nodeType: string; text: string };

/** `[[ … ]]` (and tree-sitter's reading of `[ … ]` as a test). */
export interface Test extends Base {
  kind: 'test';
  /** '[[' or '['. */
  bracket: '[[' | '[';
  expression?: TestExpression;
}

/** `(( … ))` or `for (( … ))`: arithmetic evaluation. */
export interface Arithmetic extends Base {
  kind: 'arithmetic';
  /** The loop body of a C-style for. */
  body?: Sequence;
  /** The expansions and substitutions inside the arithmetic (a C-style for's header), in source order. */
  expansions: WordPart[];
}

export interface Negated extends Base {
  kind: 'negated';
  body: Statement;
}

export interface Unknown extends Base {
  kind: 'unknown';
  nodeType: string;
}

export type Statement =
  | SimpleCommand
  | Pipeline
  | AndOr
  | Subshell
  | Group
  | If
  | For
  | While
  | Case
  | FunctionDefinition
  | Test
  | Arithmetic
  | Negated
  | Unknown;

export interface SyntaxTree {
  body: Sequence;
  /** Every node the converter did not know (kind, text, offset); empty for a fully understood command. */
  unknowns: { nodeType: string; text: string; start: number }[];
  /** Every `# comment`, anywhere (comments are not statements, so the body does not hold them). */
  comments: { text: string; start: number }[];
  /**
   * Where tree-sitter could not read the command: an `error` node (text it could not place) or a
   * `missing` token it inserted to recover (`nodeType` is the token, `text` empty). Empty when the
   * command parsed; a `ParsedCommand` carries a tree only then.
   */
  errors: { kind: 'error' | 'missing'; nodeType: string; text: string; start: number }[];
  /**
   * Offsets of the backslash-newline pairs bash removes before it splits words (outside single
   * quotes, here-document bodies and comments). The parser re-parses the command without them
   * (`ParsedCommand.normalizedSource`), so a caller's tree normally has none.
   */
  lineContinuations: number[];
}
