// eslint-disable-next-line no-restricted-imports -- reads the bash grammar's .wasm, shipped in this package
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Language, Parser, type ParseState, type Tree } from 'web-tree-sitter';
import { emptyFlags, flatView } from './flat-view.js';
import { NestingLimitError, readTree, type PlainNode } from './plain-tree.js';
import { FIELD_PARENTS, SyntaxConverter } from './syntax-tree.js';
import type { SyntaxTree } from './syntax-types.js';
import type { ParsedCommand, ParseOptions, ShellParser } from './types.js';

/** Default bound on the source size, in UTF-8 bytes. */
export const DEFAULT_MAX_BYTES = 64 * 1024;
/**
 * Default bound on the work of one parse, in steps (see `ParseOptions.budget`): about what a
 * reference machine parses in half a second, over three times the work of the largest ordinary
 * command `DEFAULT_MAX_BYTES` admits.
 */
export const DEFAULT_PARSE_BUDGET = 500_000;
/** Steps per millisecond of the deprecated `timeoutMs`: the reference machine's parsing speed. */
export const STEPS_PER_MS = 1_000;
/** @deprecated A parse is bounded by work, not time: see DEFAULT_PARSE_BUDGET. */
export const DEFAULT_TIMEOUT_MS = DEFAULT_PARSE_BUDGET / STEPS_PER_MS;
/** Default bound on how deep a command nests (chained commands do not count), in syntax-tree levels. */
export const DEFAULT_MAX_DEPTH = 256;

/**
 * The work model. tree-sitter calls the progress callback once every 100 parser operations, and
 * asks the input callback for text whenever its lexer moves outside the chunk it holds; chunks are
 * small, so a lexer that rescans the input (an unterminated here-document, a long error) asks
 * again and again. One step is one parser operation or a sixth of a chunk read: on the reference
 * machine both take about a microsecond.
 */
const STEPS_PER_PROGRESS = 100;
const STEPS_PER_READ = 6;
const INPUT_CHUNK = 64;
/**
 * Wall-clock bounds: last resorts that never decide a verdict under ordinary load. Work decides
 * (`budget`), so a command gets the same answer on a loaded machine. Time only stops what work
 * cannot see: tree-sitter's error recovery summarizes the error node again for every token it
 * swallows, work neither callback sees (`case x x x …` is quadratic: seconds for 64 KB).
 * - Once the progress callback reports `hasError` (every version of the parse is recovering from
 *   an error, so the tree cannot come out without one: the parse fails whatever happens next), a
 *   parse still running `ERROR_SAFETY_FACTOR` times its budget's time on the reference machine
 *   (at least `MIN_ERROR_SAFETY_MS`) is stopped and reported as the parse error it is
 *   (`limit: 'time'`): the same verdict, sooner.
 * - Any parse still running after `LAST_RESORT_MS` is stopped as well. A command within the
 *   budget parses in well under a second on the reference machine; the first big parse in a
 *   process grows tree-sitter's memory and takes longer (a 60 KB pipeline: about 5 s on two
 *   cores, 20 s with every core busy). Two minutes is reached only by a stalled machine or by
 *   malformed input tree-sitter recovers from without saying so, which fails anyway.
 */
const ERROR_SAFETY_FACTOR = 10;
const MIN_ERROR_SAFETY_MS = 1_000;
export const LAST_RESORT_MS = 120_000;

/**
 * Recent parses kept, by source and bounds: an agent runs the same commands again and again
 * (`git status`, `ls`, `npm test`), and a parse of even `true` costs a tree-sitter run, a read of
 * its tree out of WASM and a conversion (a tenth of a `cli_based_tool` call's host CPU). A parse
 * is a pure function of the source and the bounds, except a parse stopped by the wall clock
 * (`limit: 'time'`), which is never kept. Kept results are deep-frozen: one caller's change
 * cannot reach the next decision (a mutation throws). Sources over `CACHE_MAX_CHARS` are not
 * kept, so the cache stays a few megabytes at most.
 */
const CACHE_ENTRIES = 256;
const CACHE_MAX_CHARS = 2048;

let loading: Promise<ShellParser> | undefined;

/**
 * Loads tree-sitter-bash (WASM, no native build) once per process and returns a parser. The
 * promise is cached; a failed load is not cached so a later call can retry.
 */
export function loadShellParser(): Promise<ShellParser> {
  loading ??= init().catch((error: unknown) => {
    loading = undefined;
    throw error;
  });
  return loading;
}

// Under vitest this module runs from src/*.ts; the build copies the grammar into dist/ (beside the
// compiled modules, and beside the bundles that carry this code: @conch/mcp's, the exec server's).
const here = fileURLToPath(import.meta.url);
/** The bash grammar's WASM this package ships (scripts/copy-grammar.mjs copies it at build). */
export const BASH_GRAMMAR_WASM = here.endsWith('.ts')
  ? join(dirname(here), '..', 'dist', 'tree-sitter-bash.wasm')
  : join(dirname(here), 'tree-sitter-bash.wasm');

async function init(): Promise<ShellParser> {
  // The grammar is read here and given as bytes: web-tree-sitter reads a path with a dynamic
  // import() of fs/promises, which code run from V8's code cache cannot make (conch-mcp's published
  // server bundles this module and runs it so). Read while the runtime initializes.
  const [bytes] = await Promise.all([readFile(BASH_GRAMMAR_WASM), Parser.init()]);
  const language = await Language.load(bytes);
  const parser = new Parser();
  parser.setLanguage(language);
  return new BashParser(parser);
}

class BashParser implements ShellParser {
  /** Least recently used first (a Map keeps insertion order; a hit is moved to the end). */
  private readonly recent = new Map<string, ParsedCommand>();

  constructor(private readonly parser: Parser) {}

  parse(source: string, options: ParseOptions = {}): ParsedCommand {
    if (typeof source !== 'string' || source.length > CACHE_MAX_CHARS)
      return this.parseInner(source, options, false);
    const key = `${options.maxBytes ?? DEFAULT_MAX_BYTES},${parseBudget(options)},${options.maxDepth ?? DEFAULT_MAX_DEPTH}:${source}`;
    const hit = this.recent.get(key);
    if (hit) {
      this.recent.delete(key);
      this.recent.set(key, hit);
      return hit;
    }
    const parsed = this.parseInner(source, options, false);
    if (parsed.limit !== 'time') {
      this.recent.set(key, deepFreeze(parsed));
      if (this.recent.size > CACHE_ENTRIES) this.recent.delete(this.recent.keys().next().value!);
    }
    return parsed;
  }

  private parseInner(
    source: string,
    options: ParseOptions,
    nestedNormalize: boolean,
    spentBefore = 0,
  ): ParsedCommand {
    if (typeof source !== 'string') {
      return failed(String(source), `expected the command as a string; received ${typeof source}`);
    }
    const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    const budget = parseBudget(options);
    const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH;
    // Cheap bound first (UTF-16 length <= UTF-8 length * 1), exact byte count only near the limit.
    if (source.length > maxBytes || (source.length * 3 > maxBytes && Buffer.byteLength(source) > maxBytes)) {
      return failed(
        source,
        `the command is ${Buffer.byteLength(source)} bytes, over the ${maxBytes}-byte parse limit`,
        'size',
      );
    }
    if (source.includes('\0'))
      return failed(source, 'the command contains a NUL byte, which a shell cannot pass');
    let spent = spentBefore;
    let over: 'work' | 'time' | undefined;
    // The parse is known to fail once every version of it is recovering from an error.
    let failing = false;
    const errorSafetyMs = Math.max(MIN_ERROR_SAFETY_MS, (budget / STEPS_PER_MS) * ERROR_SAFETY_FACTOR);
    const started = performance.now();
    let root: PlainNode;
    let tree: Tree | null = null;
    try {
      const check = () => {
        if (spent > budget) over = 'work';
        else {
          const elapsed = performance.now() - started;
          if (elapsed > LAST_RESORT_MS || (failing && elapsed > errorSafetyMs)) over = 'time';
        }
        return over !== undefined;
      };
      let reads = 0;
      tree = this.parser.parse(
        (index: number) => {
          spent += STEPS_PER_READ;
          // Past the budget the lexer is told the input ended: the parse winds down at once (the
          // progress callback then stops it), and the tree is thrown away.
          if (over || ((++reads & 63) === 0 || spent > budget ? check() : false)) return '';
          return source.slice(index, index + INPUT_CHUNK);
        },
        null,
        {
          progressCallback: ((state: ParseState) => {
            spent += STEPS_PER_PROGRESS;
            if (state.hasError) failing = true;
            return over !== undefined || check();
          }) as unknown as (state: ParseState) => void,
        },
      );
      if (!tree || over || spent > budget) {
        this.parser.reset();
        if (over === 'time')
          return failed(
            source,
            failing
              ? `the parser gave up on malformed input after ${Math.round(performance.now() - started)} ms (tree-sitter recovers from some errors very slowly)`
              : `the parser gave up on the command after ${Math.round(LAST_RESORT_MS / 1000)} s`,
            'time',
          );
        return failed(source, overBudget(budget, options), 'work');
      }
      // The one pass over the WASM tree; everything below is plain TypeScript.
      root = readTree(tree, FIELD_PARENTS, { flattenChains: true, maxDepth });
    } catch (error) {
      if (error instanceof NestingLimitError)
        return failed(
          source,
          `the command nests more than ${error.limit} levels deep (chained commands aside), over the parser's limit`,
          'depth',
        );
      return failed(source, `the parser failed: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      tree?.delete();
    }
    try {
      let syntax: SyntaxTree;
      try {
        syntax = new SyntaxConverter(source).convert(root);
      } catch (error) {
        if (!(error instanceof NestingLimitError)) throw error;
        return failed(
          source,
          `the command alternates && and || more than ${error.limit} times in one list, over the parser's limit`,
          'depth',
        );
      }
      if (syntax.lineContinuations.length > 0 && !nestedNormalize) {
        // The shell removes backslash-newline before it splits words (`$\<newline>(id)` is `$(id)`):
        // parse the command as the shell will see it, and keep the flag.
        const normalized = removeAt(source, syntax.lineContinuations);
        const again = this.parseInner(normalized, options, true, spent);
        const parsed: ParsedCommand = {
          ...again,
          source,
          normalizedSource: normalized,
          flags: { ...again.flags, lineContinuation: true },
          needsShell: true,
        };
        delete parsed.direct;
        return parsed;
      }
      return fromTree(source, syntax);
    } catch (error) {
      return failed(source, `the parser failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}

/** The ParsedCommand of a converted tree: the flat view, `direct`, and the tree itself when it parsed. */
function fromTree(source: string, syntax: SyntaxTree): ParsedCommand {
  const ok = syntax.errors.length === 0;
  const parsed: ParsedCommand = { source, ok, ...flatView(syntax), needsShell: true };
  if (!ok) {
    parsed.error = `parse error: ${describeError(syntax.errors[0]!)}`;
    return parsed;
  }
  parsed.syntax = syntax;
  const direct = directArgv(parsed);
  if (direct) {
    parsed.direct = { argv: direct };
    parsed.needsShell = false;
  }
  return parsed;
}

function describeError(e: SyntaxTree['errors'][number]): string {
  return e.kind === 'missing'
    ? `missing ${JSON.stringify(e.nodeType)} at offset ${e.start}`
    : `unexpected ${JSON.stringify(e.text.length > 40 ? `${e.text.slice(0, 40)}…` : e.text)} at offset ${e.start}`;
}

/** Freezes `value` and everything reachable from it (a parse result is plain data: objects, arrays, strings). */
function deepFreeze<T>(value: T): T {
  const pending: object[] = [value as object];
  const seen = new Set<object>();
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (seen.has(next)) continue;
    seen.add(next);
    Object.freeze(next);
    for (const key of Object.keys(next)) {
      const child = (next as Record<string, unknown>)[key];
      if (typeof child === 'object' && child !== null) pending.push(child);
    }
  }
  return value;
}

function removeAt(source: string, positions: readonly number[]): string {
  let out = '';
  let from = 0;
  for (const at of positions) {
    out += source.slice(from, at);
    from = at + 2;
  }
  return out + source.slice(from);
}

function failed(source: string, error: string, limit?: ParsedCommand['limit']): ParsedCommand {
  const flags = emptyFlags();
  flags.parseError = true;
  return {
    source,
    ok: false,
    error,
    ...(limit ? { limit } : {}),
    commands: [],
    operators: [],
    redirects: [],
    flags,
    needsShell: true,
  };
}

/** The work a parse may do, in steps: `budget`, else the deprecated `timeoutMs` read as work. */
export function parseBudget(options: ParseOptions): number {
  if (options.budget !== undefined) return options.budget;
  if (options.timeoutMs !== undefined) return options.timeoutMs * STEPS_PER_MS;
  return DEFAULT_PARSE_BUDGET;
}

function overBudget(budget: number, options: ParseOptions): string {
  const steps = budget.toLocaleString('en-US');
  if (options.budget === undefined && options.timeoutMs !== undefined)
    return `parsing needs more work than its budget of ${steps} steps (timeoutMs ${options.timeoutMs} is read as work: a parse that takes longer than ${options.timeoutMs} ms on the reference machine is refused on every machine)`;
  return `parsing needs more work than its budget of ${steps} steps`;
}

/** argv when the source is one plain command of literal words, else undefined. */
function directArgv(parsed: ParsedCommand): string[] | undefined {
  if (!parsed.ok || parsed.commands.length !== 1 || parsed.operators.length || parsed.redirects.length)
    return undefined;
  if (Object.values(parsed.flags).some(Boolean)) return undefined;
  const command = parsed.commands[0]!;
  if (command.nested || command.assignments.length || command.words.length === 0) return undefined;
  if (!command.literal.every(Boolean)) return undefined;
  return [...command.words];
}
