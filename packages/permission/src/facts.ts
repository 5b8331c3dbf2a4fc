import type { CompiledRule } from './host-rules.js';
import type { PathContext } from './paths.js';
import type { Arg } from './words.js';

export type Verdict = 'allow' | 'ask' | 'deny';

/** The decision on one part of a command line (a simple command, a redirect, a construct). */
export interface Part {
  command: string;
  verdict: Verdict;
  reason: string;
  /**
   * The rule that decided, one of: `safety:<id>` (a built-in deny rule), `protocol:terminal`,
   * `deny:<host rule>`, `ask:<host rule>`, `allow:<host rule>`, `readOnly:<command>`,
   * `failClosed:<what>` (a construct the gate cannot prove harmless), `unknown` (a command that
   * is not known to be read-only).
   */
  rule: string;
  /** The host rule that would allow this part (for asks host rules can answer). */
  suggestedRule?: string;
  /** Where the part runs, when it carries a suggested rule (an `always` answer holds only there). */
  cwds?: readonly string[];
  /** The command this part judges, as it will run (for the files it executes: `executed-files.ts`). */
  run?: RunFacts;
  /**
   * When a host or session allow rule allowed it: every allow rule that matches it. The gate checks
   * that one of them still vouches for the files it executes (`rule-grants.ts`).
   */
  grants?: readonly CompiledRule[];
}

/** One simple command after the resolver looked through its wrappers, as it will run. */
export interface RunFacts {
  /** The innermost command's words, the program first (undefined: only known at run time). */
  argv: readonly (string | undefined)[];
  /** The directories it may run in; undefined when not known. */
  cwds: readonly string[] | undefined;
  /** xargs supplies more arguments at run time. */
  dynamicArgs?: boolean;
}

export interface WriteTarget {
  target: Arg;
  via: string;
  /** A write through `>` follows a final symlink; `rm`/`mv` act on the link itself. */
  followFinal: boolean;
}

/** One simple command after the resolver unwrapped it: what the safety rules look at. */
export interface CommandFacts {
  /** How the command is shown in reasons. */
  shown: string;
  /** Every program named on the way in: wrappers first, the command last (base names). */
  programs: string[];
  /** The innermost command's base name and arguments (undefined for bare assignments). */
  name?: string;
  args: Arg[];
  /** The working directories it may run in; undefined when unknown (`env -C $d`, `cd $x`). */
  cwds: readonly string[] | undefined;
  /** Files it writes: redirects, wrapper options (`time -o`), the command's own targets. */
  writes: WriteTarget[];
  /** Directories it writes files of unknown names into. */
  intoDirs: { dir: Arg; via: string }[];
  /** Sources copied, moved or linked into a directory (`cp -t ~ .bashrc`, `cp -r dots/. ~`). */
  copies: { sources: Arg[]; dir: Arg; mustBeDir: boolean; recursive: boolean; via: string }[];
  /** Trees it removes, moves away or empties. */
  trees: { target: Arg; via: string }[];
  /** `git config` of a key that makes git run a program. */
  gitExecKey?: string;
  /** Variable names it assigns, unsets, exports or reads into. */
  names: { name: string; how: string }[];
}

/** What the rules know of the environment. */
export interface RuleContext {
  paths: PathContext;
}

/** Where an interpreter (or eval / source) takes the code it runs from. */
export type CodeSource =
  /** A script file named by a literal path. */
  | 'file'
  /** Code written literally in the command (`python3 -c '…'`). */
  | 'literal'
  /** Its standard input, `-`, `/dev/stdin`, `/dev/fd/N`, a process substitution. */
  | 'stdin'
  /** Code only known at run time (`sh -c "$(…)"`, `eval "$x"`). */
  | 'dynamic';

/** What the line-level rules see of a whole command line (substitutions and `-c` strings included). */
export interface LineFacts {
  /** Commands that fetch from the network (and `/dev/tcp` redirects), as shown. */
  downloads: string[];
  interpreters: { shown: string; name: string; code: CodeSource; sourcing: boolean }[];
}
