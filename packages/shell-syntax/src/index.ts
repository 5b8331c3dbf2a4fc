export {
  loadShellParser,
  BASH_GRAMMAR_WASM,
  DEFAULT_MAX_BYTES,
  DEFAULT_MAX_DEPTH,
  DEFAULT_PARSE_BUDGET,
  DEFAULT_TIMEOUT_MS,
  STEPS_PER_MS,
  parseBudget,
} from './parser.js';
export { andOrChain } from './chains.js';
export { decodeAnsiC } from './ansi-c.js';
export type {
  Assignment,
  ParsedCommand,
  ParseOptions,
  Redirect,
  ShellOperator,
  ShellParser,
  SimpleCommand,
  SyntaxFlags,
} from './types.js';
export type * as Syntax from './syntax-types.js';
export { hasBraceExpansion, hasGlob, literalValue } from './word-facts.js';
export { shellJoin, shellQuote } from './shell-quote.js';
export { downloadReviewSteps, type ReviewSteps } from './review-steps.js';
