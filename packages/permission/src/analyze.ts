import type { ParsedCommand } from '@conch/shell-syntax';
import type { Dialect } from './dialect.js';
import type { Part } from './facts.js';
import type { CompiledRule } from './host-rules.js';
import type { PathContext } from './paths.js';
import type { Analysis, AnalysisContext, AnalyzerOptions, Walk } from './analyze/context.js';
import { summarize } from './analyze/helpers.js';
import { ruleMatches } from './analyze/host-match.js';
import { simple } from './analyze/simple-command.js';
import { line as walkLine } from './analyze/walk.js';
import { lineRules } from './rules/apply.js';
import { snapshot } from './fs-snapshot.js';

export { suggestRule } from './suggest-rule.js';
export type { Part, Verdict } from './facts.js';
export type { Dialect } from './dialect.js';
export type { Analysis, AnalyzerOptions } from './analyze/context.js';

/**
 * Decides on a command line by reading it the way the shell will, by allow-lists at every level:
 * every node of the syntax tree is known or the line asks; every simple command is unwrapped once
 * by the resolver (wrappers, `bash -c`, `eval`, `find -exec`, `xargs`), its arguments parsed by the
 * grammar of the options it accepts, and allowed only when it only reads. The safety rules (one
 * file each in `rules/`) deny what must never run; host rules (`host-rules.ts`) deny, ask or allow
 * by prefix or regex. Deny beats ask beats allow.
 *
 * The public entry of the analysis; its concerns live in one module each:
 * - `analyze/walk.ts`: how bash reads the line (the syntax tree, compound commands, redirects);
 * - `analyze/simple-command.ts`: simple commands and the resolver glue (wrappers, `-c` strings,
 *   argument lists handed to other programs), and the judge of the innermost command;
 * - `rules/apply.ts`: what a command intends (where the deny rules are applied);
 * - `needs/read-only.ts`: what a command needs (today: whether it only reads);
 * - `analyze/host-match.ts`: the host's rules matched against a command's wrapper levels;
 * - `analyze/context.ts`, `analyze/helpers.ts`: the shared context, state and small helpers.
 */
export class Analyzer {
  private readonly ctx: AnalysisContext;

  constructor(options: AnalyzerOptions) {
    const ctx: AnalysisContext = {
      options,
      ruleContext: { paths: options.paths },
      simple: (cmd, state, walk, io) => simple(ctx, cmd, state, walk, io),
    };
    this.ctx = ctx;
  }

  /**
   * Judges a line run in `cwd`. `paths` replaces the gate's home and workspace for this line (a
   * command that runs in a remote target is judged against the target's).
   */
  analyze(
    line: string,
    cwd: string,
    options: { dialect?: Dialect; parsed?: ParsedCommand; paths?: PathContext } = {},
  ): Analysis {
    // One view of the file system for the whole line (every path stat'ed once); nothing kept after.
    return snapshot(() => this.analyzeNow(line, cwd, options));
  }

  private analyzeNow(
    line: string,
    cwd: string,
    options: { dialect?: Dialect; parsed?: ParsedCommand; paths?: PathContext },
  ): Analysis {
    const ctx = options.paths ? this.contextWith(options.paths) : this.ctx;
    const walk: Walk = {
      parts: [],
      line: { downloads: [], interpreters: [] },
      depth: 0,
      dialect: options.dialect ?? 'bash',
    };
    try {
      walkLine(ctx, line, { cwds: [cwd], vars: new Map() }, walk, options.parsed);
      walk.parts.push(...lineRules(ctx, walk.line));
    } catch (error) {
      // A defect in the analysis must not let a command through, in any mode: without a finished
      // analysis no deny rule can be ruled out, so the command is denied (acceptAll turns asks
      // into allows) and the reason says why.
      const part: Part = {
        command: line,
        verdict: 'deny',
        reason: `could not be analyzed (${error instanceof Error ? error.message : String(error)}); please report this as a conch bug`,
        rule: 'failClosed:internal',
      };
      return summarize([part]);
    }
    return summarize(walk.parts);
  }

  private contextWith(paths: PathContext): AnalysisContext {
    const ctx: AnalysisContext = {
      options: { ...this.ctx.options, paths },
      ruleContext: { ...this.ctx.ruleContext, paths },
      simple: (cmd, state, walk, io) => simple(ctx, cmd, state, walk, io),
    };
    return ctx;
  }

  /** Whether a compiled host rule matches `line` the way the gate uses it (for rule examples). */
  ruleMatches(rule: CompiledRule, line: string): boolean {
    return ruleMatches(this.ctx, rule, line);
  }
}
