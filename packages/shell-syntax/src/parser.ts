import { createRequire } from 'node:module';
import { Language, Parser, type Tree } from 'web-tree-sitter';
import { emptyFlags, flatView } from './flat-view.js';
import { readTree, type PlainNode } from './plain-tree.js';
import { FIELD_PARENTS, SyntaxConverter } from './syntax-tree.js';
import type { SyntaxTree } from './syntax-types.js';
import type { ParsedCommand, ParseOptions, ShellParser } from './types.js';

/** Default bound on the source size, in UTF-8 bytes. */
export const DEFAULT_MAX_BYTES = 64 * 1024;
/** Default bound on the parse time, in milliseconds. */
export const DEFAULT_TIMEOUT_MS = 500;

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

async function init(): Promise<ShellParser> {
  const require = createRequire(import.meta.url);
  await Parser.init();
  const language = await Language.load(require.resolve('tree-sitter-bash/tree-sitter-bash.wasm'));
  const parser = new Parser();
  parser.setLanguage(language);
  return new BashParser(parser);
}

class BashParser implements ShellParser {
  constructor(private readonly parser: Parser) {}

  parse(source: string, options: ParseOptions = {}): ParsedCommand {
    return this.parseInner(source, options, false);
  }

  private parseInner(source: string, options: ParseOptions, nestedNormalize: boolean): ParsedCommand {
    if (typeof source !== 'string') {
      return failed(String(source), `expected the command as a string; received ${typeof source}`);
    }
    const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    // Cheap bound first (UTF-16 length <= UTF-8 length * 1), exact byte count only near the limit.
    if (source.length > maxBytes || (source.length * 3 > maxBytes && Buffer.byteLength(source) > maxBytes)) {
      return failed(
        source,
        `the command is ${Buffer.byteLength(source)} bytes, over the ${maxBytes}-byte parse limit`,
      );
    }
    if (source.includes('\0'))
      return failed(source, 'the command contains a NUL byte, which a shell cannot pass');
    const deadline = performance.now() + timeoutMs;
    let timedOut = false;
    let root: PlainNode;
    let tree: Tree | null = null;
    try {
      tree = this.parser.parse(source, null, {
        progressCallback: (() => {
          if (performance.now() > deadline) timedOut = true;
          return timedOut;
        }) as unknown as () => void,
      });
      if (!tree || timedOut) {
        this.parser.reset();
        return failed(source, `parsing took longer than ${timeoutMs} ms`);
      }
      // The one pass over the WASM tree; everything below is plain TypeScript.
      root = readTree(tree, FIELD_PARENTS);
    } catch (error) {
      return failed(source, `the parser failed: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      tree?.delete();
    }
    try {
      const syntax = new SyntaxConverter(source).convert(root);
      if (syntax.lineContinuations.length > 0 && !nestedNormalize) {
        // The shell removes backslash-newline before it splits words (`$\<newline>(id)` is `$(id)`):
        // parse the command as the shell will see it, and keep the flag.
        const normalized = removeAt(source, syntax.lineContinuations);
        const again = this.parseInner(normalized, options, true);
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

function removeAt(source: string, positions: readonly number[]): string {
  let out = '';
  let from = 0;
  for (const at of positions) {
    out += source.slice(from, at);
    from = at + 2;
  }
  return out + source.slice(from);
}

function failed(source: string, error: string): ParsedCommand {
  const flags = emptyFlags();
  flags.parseError = true;
  return { source, ok: false, error, commands: [], operators: [], redirects: [], flags, needsShell: true };
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
