// Owns the shapes every part of the analysis shares: the options the gate builds the analyzer with,
// the context object the analysis functions take instead of a class, the shell state carried along
// the walk (working directories, variables), and the result of analyzing a line. Types (plus one
// constant and the parser's options), so every module of the analysis can import it without an
// import cycle.
import type { ParseOptions, ShellParser, Syntax } from '@conch/shell-syntax';
import type { SafetyRuleId } from '../config.js';
import type { Dialect } from '../dialect.js';
import type { LineFacts, Part, RuleContext, Verdict } from '../facts.js';
import type { CompiledRule, HostRules } from '../host-rules.js';
import type { PathContext } from '../paths.js';
import type { OwnProcess } from '../rules/self-kill.js';

export interface Analysis {
  verdict: Verdict;
  /** The strictest part. */
  decisive: Part;
  parts: Part[];
  /** Allowed only because every part only reads: a runner may enforce that with a read-only sandbox. */
  readOnly: boolean;
}

export interface AnalyzerOptions {
  parser: ShellParser;
  safety: Record<SafetyRuleId, boolean>;
  rules: HostRules;
  /** `always` answers of this session, in the host-rule syntax. */
  sessionAllow: () => readonly CompiledRule[];
  /** Whether host allow rules count (false in readOnly mode). */
  useAllowRules: boolean;
  paths: PathContext;
  maxBytes: number;
  /**
   * @deprecated The config's `parseTimeoutMs`, read as a budget of work (`timeoutMs × 1,000`
   * steps of the parser, what the reference machine parses in that many milliseconds): a parse is
   * counted, not timed, so a command gets the same verdict on a loaded machine. `parseBudget`
   * wins when both are given.
   */
  timeoutMs: number;
  /** Most work one parse may do, in the parser's steps (`ParseOptions.budget`). */
  parseBudget?: number;
  maxNesting: number;
  /** conch's own processes (the host, its supervisors), read when a command is judged. */
  ownProcesses?: () => readonly OwnProcess[];
}

/** What the shell knows at a point of the line: where it runs, and the variables it has set. */
export interface State {
  cwds: string[] | undefined;
  vars: Map<string, string | null>;
}

/** The states after a statement: when it succeeded and when it failed (for `&&`, `||`, `if`). */
export interface Ends {
  ok: State;
  fail: State;
}

/** One walk of a line (a nested `-c` string walks on its own, one level deeper). */
export interface Walk {
  parts: Part[];
  line: LineFacts;
  depth: number;
  dialect: Dialect;
}

/** How a command's standard input is fed (for interpreters that read code from it). */
export interface Io {
  stdinPiped: boolean;
  /** The previous pipeline stage's output when it is literal (`echo 'x' |`). */
  stdinText?: string;
}

export const NO_IO: Io = { stdinPiped: false };

/** Adds one part for the command being judged. */
export type Add = (
  verdict: Verdict,
  reason: string,
  rule: string,
  suggestedRule?: string,
  extra?: Pick<Part, 'grants'>,
) => void;

/** The context every function of the analysis takes. */
export interface AnalysisContext {
  readonly options: AnalyzerOptions;
  readonly ruleContext: RuleContext;
  /**
   * Judges one simple command (`simple-command.ts`). The walk reaches it through the context, and
   * simple commands import the walk (for `-c` strings, words and redirects): no import cycle.
   */
  readonly simple: (cmd: Syntax.SimpleCommand, state: State, walk: Walk, io: Io) => Ends;
}

/** The parser's bounds for one line of the analysis: size, and work (never time). */
export function parseOptions(options: AnalyzerOptions): ParseOptions {
  return options.parseBudget !== undefined
    ? { maxBytes: options.maxBytes, budget: options.parseBudget }
    : { maxBytes: options.maxBytes, timeoutMs: options.timeoutMs };
}
