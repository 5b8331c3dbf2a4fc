import { DEFAULT_SLOW_PATTERNS, estimateSlowSeconds, mayBeSlow, type SlowPattern } from '@conch/process';
import {
  literalValue,
  loadShellParser,
  type ParsedCommand,
  type ShellParser,
  type Syntax,
} from '@conch/shell-syntax';
import { findDownloadReview, MAY_DOWNLOAD, type DownloadReview } from './download-review.js';
import type { ShellKind } from './shell-scripts.js';

/** What the terminal decides about a new command before it runs. */
export interface CommandAnalysis {
  /** The `exec` that would replace the session's shell (its source text), if any. */
  replacesShell?: string;
  /** A known slow command (the shared table of @conch/process): long timeout, no idle return. */
  slow: boolean;
  /** A download fed to an interpreter (`curl URL | bash`): the review steps to answer the gate's refusal with. */
  downloadReview?: DownloadReview;
}

let parserPromise: Promise<ShellParser> | undefined;

/** The shared bash parser (tree-sitter WASM, loaded once per process, on the first command that needs it). */
function parser(): Promise<ShellParser> {
  parserPromise ??= loadShellParser().catch((error: unknown) => {
    parserPromise = undefined;
    throw error;
  });
  return parserPromise;
}

const EXEC_WORD = /(^|[^A-Za-z0-9_-])exec([^A-Za-z0-9_-]|$)/;
// A fallback when the line does not parse: exec followed by a word that is not a redirection.
const EXEC_COMMAND = /(^|[\s;&|(){}`])\\?exec\s+(?:-[acl]+\s+(?:\S+\s+)?)*(?!\d*[<>])[^\s<>&|;)]/;

/**
 * The new command's facts the tool acts on: whether it would `exec` over the session's shell,
 * whether it is a known slow command, and whether it feeds a download to an interpreter. Most
 * commands pay only three text scans: the parser runs when the text contains `exec`, the first
 * word of a slow pattern, `curl` or `wget`.
 */
export async function analyzeCommand(
  command: string,
  options: { slowPatterns?: readonly SlowPattern[]; dialect?: ShellKind } = {},
): Promise<CommandAnalysis> {
  const patterns = options.slowPatterns ?? DEFAULT_SLOW_PATTERNS;
  const maybeExec = EXEC_WORD.test(command);
  const maybeSlow = mayBeSlow(command, patterns);
  const maybeDownload = MAY_DOWNLOAD.test(command);
  if (!maybeExec && !maybeSlow && !maybeDownload) return { slow: false };
  const p = await parser();
  const parsed = p.parse(command);
  const replacesShell = maybeExec ? execOverShell(p, parsed, options.dialect ?? 'bash', 0) : undefined;
  const slow = maybeSlow && parsed.ok && estimateSlowSeconds(parsed.commands, patterns) > 0;
  const downloadReview = maybeDownload ? findDownloadReview(parsed) : undefined;
  return {
    slow,
    ...(replacesShell === undefined ? {} : { replacesShell }),
    ...(downloadReview === undefined ? {} : { downloadReview }),
  };
}

/**
 * An `exec` with a command to run in the session's own shell: at top level, in a `{ …; }` group,
 * an `&&`/`||` list, control flow or a function body (conservative: the function may be called
 * later), after `builtin` or `command`, or inside `eval '…'` (parsed again). Not in what runs in a
 * child process anyway: `( … )`, `$( … )`, a command ended by `&`, a pipeline stage (every stage in
 * bash; all but the last in zsh); and not `exec` with only redirections (`exec >log 2>&1`,
 * `exec 3<file`), which keeps the shell. A line that does not parse is matched on its text.
 */
function execOverShell(
  p: ShellParser,
  parsed: ParsedCommand,
  dialect: ShellKind,
  depth: number,
): string | undefined {
  if (!parsed.ok || !parsed.syntax) {
    return EXEC_COMMAND.test(parsed.source) ? parsed.source.trim() : undefined;
  }
  const inSequence = (seq: Syntax.Sequence): string | undefined => {
    for (const item of seq.items) {
      if (item.background) continue; // `cmd &` runs in a child
      const hit = inStatement(item.statement);
      if (hit !== undefined) return hit;
    }
    return undefined;
  };
  const inStatement = (st: Syntax.Statement): string | undefined => {
    switch (st.kind) {
      case 'simple':
        return inSimple(st);
      case 'pipeline': {
        // bash runs every stage in a child; zsh runs the last one in the shell itself.
        const last = st.stages[st.stages.length - 1];
        return dialect === 'zsh' && last ? inStatement(last) : undefined;
      }
      case 'and-or':
        return inStatement(st.left) ?? inStatement(st.right);
      case 'group':
        return inSequence(st.body);
      case 'if':
        for (const c of st.clauses) {
          const hit = inSequence(c.condition) ?? inSequence(c.body);
          if (hit !== undefined) return hit;
        }
        return st.otherwise ? inSequence(st.otherwise) : undefined;
      case 'for':
        return inSequence(st.body);
      case 'while':
        return inSequence(st.condition) ?? inSequence(st.body);
      case 'case':
        for (const item of st.items) {
          const hit = inSequence(item.body);
          if (hit !== undefined) return hit;
        }
        return undefined;
      case 'function':
      case 'negated':
        return inStatement(st.body);
      case 'arithmetic':
        return st.body ? inSequence(st.body) : undefined;
      default:
        // subshell (a child process), test, unknown
        return undefined;
    }
  };
  const inSimple = (st: Syntax.SimpleCommand): string | undefined => {
    const words = st.words.map((w) => literalValue(w));
    let i = 0;
    for (;;) {
      if (words[i] === 'builtin') i++;
      else if (words[i] === 'command') {
        i++;
        let lookup = false;
        while (words[i] !== undefined && /^-[pvV]+$/.test(words[i]!)) {
          if (/[vV]/.test(words[i]!)) lookup = true;
          i++;
        }
        if (words[i] === '--') i++;
        if (lookup) return undefined; // `command -v exec` only looks it up
      } else break;
    }
    if (words[i] === 'exec') {
      i++;
      while (i < st.words.length && words[i] !== undefined && words[i]!.startsWith('-')) {
        if (words[i] === '--') {
          i++;
          break;
        }
        if (/^-[cl]*a$/.test(words[i]!)) i++; // -a NAME
        i++;
      }
      // Any word left (literal or not) is a program to run in place of the shell.
      return i < st.words.length ? st.text : undefined;
    }
    if (words[i] === 'eval' && depth < 3 && st.words.length > i + 1) {
      const rest = words.slice(i + 1);
      if (rest.some((w) => w === undefined)) return undefined; // not literal: the gate asks for it
      return execOverShell(p, p.parse(rest.join(' ')), dialect, depth + 1) === undefined
        ? undefined
        : st.text;
    }
    return undefined;
  };
  return inSequence(parsed.syntax.body);
}
