import type { SyntaxTree } from './syntax-types.js';

/** The shell operators between commands, in source order. */
export type ShellOperator = '&&' | '||' | ';' | '|' | '|&' | '&';

/** A redirection: `2>&1`, `> out.txt`, `<<EOF`, `<<< word`. */
export interface Redirect {
  /** The operator as written: `>`, `>>`, `<`, `&>`, `&>>`, `>&`, `<&`, `>|`, `<>`, `<<`, `<<-`, `<<<`. */
  operator: string;
  /** The file descriptor written before the operator (`2>`), if any. */
  fd?: number;
  /** The target after quote removal (a heredoc's delimiter); source text when not literal. */
  target?: string;
  /** Whether the target is a literal word (no expansion, substitution, glob or `~`). */
  targetLiteral: boolean;
  /** A heredoc's body as written (expansions in it run unless the delimiter is quoted). */
  heredocBody?: string;
}

/** One assignment: `FOO=bar` before a command, or a bare statement `FOO=bar`. */
export interface Assignment {
  name: string;
  /** The value after quote removal; source text when not literal. */
  value: string;
  literal: boolean;
}

/** One simple command: optional assignments, a name, arguments, redirections. */
export interface SimpleCommand {
  /** The command's source text, with the redirections bash gives it. */
  text: string;
  /** argv after quote removal; parts that are not literal are kept as their source text. */
  words: string[];
  /** Per word: whether it is literal (no expansion, substitution, glob, brace expansion or `~`). */
  literal: boolean[];
  /** Per word: its source text before quote removal (shows `$'\x72m'`, `\rm`, `r"m"`). */
  rawWords: string[];
  /** When the command is inside a pipeline stage: which pipeline (unique per parse) and which stage (0-based). */
  pipeline?: { id: number; stage: number };
  /** words[0], when the command has a name. */
  name?: string;
  assignments: Assignment[];
  redirects: Redirect[];
  /** Inside a command/process substitution, a subshell, a brace group, a function, control flow, a test, arithmetic or `!`. */
  nested: boolean;
  /** Inside `$(...)`, backticks or `<(...)`/`>(...)` specifically. */
  inSubstitution: boolean;
  /** String offsets of the command in the source. */
  start: number;
  end: number;
}

/** Constructs a caller must treat with care. All false for one plain literal command. */
export interface SyntaxFlags {
  commandSubstitution: boolean;
  processSubstitution: boolean;
  arithmetic: boolean;
  parameterExpansion: boolean;
  /** `${x@P}`, `${x@E}`, `${!x}` and friends: expansions that can evaluate or indirect. */
  parameterTransform: boolean;
  variables: boolean;
  subshell: boolean;
  braceGroup: boolean;
  heredoc: boolean;
  herestring: boolean;
  background: boolean;
  glob: boolean;
  braceExpansion: boolean;
  tilde: boolean;
  pipeline: boolean;
  chaining: boolean;
  /** More than one statement separated by newlines. */
  multipleStatements: boolean;
  redirection: boolean;
  ansiCQuoting: boolean;
  /** `$"..."` locale translation. */
  localeString: boolean;
  lineContinuation: boolean;
  comment: boolean;
  functionDefinition: boolean;
  controlFlow: boolean;
  /** `[[ ... ]]`. */
  testCommand: boolean;
  /** `! cmd`. */
  negation: boolean;
  /** `export`, `declare`, `local`, `readonly`, `typeset`, `unset`. */
  declaration: boolean;
  /** Bare assignments (`FOO=bar`) or assignments before a command (`FOO=bar cmd`). */
  assignment: boolean;
  /** The command name is a shell builtin with no binary equivalent (`cd`, `export`, `source`, ...). */
  shellBuiltin: boolean;
  parseError: boolean;
}

export interface ParsedCommand {
  source: string;
  /**
   * Set when the source has line continuations: the text the shell really tokenizes (each
   * backslash-newline removed). Commands, operators, redirects and offsets refer to this text.
   */
  normalizedSource?: string;
  /** False on a parse error or when over a bound (size, work, nesting). */
  ok: boolean;
  /** Why not ok, in words. */
  error?: string;
  /**
   * Which bound the command is over, when it is: `size` (maxBytes), `work` (the parse budget),
   * `depth` (maxDepth), or `time` (a wall-clock last resort: the parser gave up on input it already
   * knew to be malformed, or on a parse still running after two minutes; like a parse error).
   * A caller may refuse `work` and `depth` outright: a command that big or that deep is not
   * something to ask a human about.
   */
  limit?: 'size' | 'work' | 'depth' | 'time';
  /**
   * Every simple command of the typed tree, in source order, including those nested in
   * substitutions, subshells, control flow and here-document bodies. Derived from `syntax`.
   */
  commands: SimpleCommand[];
  /** The operators between commands, anywhere, in the order written. */
  operators: ShellOperator[];
  /** Every redirection anywhere in the source, in source order. */
  redirects: Redirect[];
  flags: SyntaxFlags;
  /** True when anything beyond one simple literal command is present (always when not ok). */
  needsShell: boolean;
  /** Present iff the source is one simple command of literal words: argv after quote removal. */
  direct?: { argv: string[] };
  /**
   * The typed syntax tree (allow-list conversion: unknown node kinds are listed in
   * `syntax.unknowns`). Present when the source parsed (`ok`), of the normalized source when the
   * command had line continuations.
   */
  syntax?: SyntaxTree;
}

export interface ParseOptions {
  /** Largest source accepted, in UTF-8 bytes. Default 65,536. */
  maxBytes?: number;
  /**
   * Most work a parse may do, in steps (one tree-sitter parser operation, or a sixth of a 64-char
   * read of the input: about a microsecond each on the reference machine). Counted, not timed,
   * so a command gets the same answer on a loaded machine (the wall clock stops only what fails
   * anyway, see `parser.ts`). Default 500,000.
   */
  budget?: number;
  /**
   * @deprecated Use `budget`. Read as work: `timeoutMs × 1,000` steps, what the reference machine
   * parses in that many milliseconds (the parse is not timed).
   */
  timeoutMs?: number;
  /** Deepest nesting allowed (chained commands do not count), in syntax-tree levels. Default 256. */
  maxDepth?: number;
}

export interface ShellParser {
  /** Parses a bash command line. Never throws: problems come back as `ok: false` with `error`. */
  parse(source: string, options?: ParseOptions): ParsedCommand;
}
