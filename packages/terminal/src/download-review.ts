import {
  downloadReviewSteps,
  literalValue,
  type ParsedCommand,
  type ReviewSteps,
  type Syntax,
} from '@conch/shell-syntax';

/**
 * "Download & review" (the reference terminal's answer to `curl … | bash`): a new command that
 * feeds a download straight into an interpreter — `curl URL | bash`, `wget -qO- URL | sh`,
 * `curl URL | python3`, `bash <(curl URL)`, `bash -c "$(curl URL)"`, `source <(curl URL)` — is
 * refused by the permission gate (`safety:downloadToInterpreter` / `safety:sourceDownloaded`); the
 * terminal answers that refusal with the commands to run instead, as fields: download the script
 * to a file, read it, run it. Nothing is run for the model: each step goes through the gate (and
 * the sandbox's network allow-list) when the model runs it.
 */
export interface DownloadReview {
  /** The downloader's command as written (`curl -fsSL https://…`). */
  download: string;
  /** The interpreter it feeds (`bash`, `python3`, `source` …). */
  interpreter: string;
  steps: ReviewSteps;
}

const DOWNLOADERS = new Set(['curl', 'wget']);
const INTERPRETER = /^(?:bash|sh|zsh|dash|ksh|mksh|python[\d.]*|perl|ruby|node|php|eval|source|\.)$/;
/** A line naming one of these is left to the gate's privilege rule (`curl … | sudo bash` stays denied). */
const PRIVILEGE = /(^|[^\w-])(sudo|doas|pkexec|su|run0)([^\w-]|$)/;
/** A cheap look before the parse: only lines naming a downloader can be one. */
export const MAY_DOWNLOAD = /(^|[^\w-])(curl|wget)([^\w-]|$)/;

/**
 * The review steps for the download `shown` fed to `interpreter` (@conch/shell-syntax's, the same
 * function the permission gate's reason is made from, so the gate's words and these fields agree).
 */
export const reviewSteps = downloadReviewSteps;
export type { ReviewSteps };

function nameOf(st: Syntax.SimpleCommand): string | undefined {
  const first = st.words[0];
  const name = first ? literalValue(first) : undefined;
  return name?.slice(name.lastIndexOf('/') + 1);
}

/** The first downloader (curl, wget) among the simple commands of a sequence, at any depth. */
function downloaderIn(seq: Syntax.Sequence): Syntax.SimpleCommand | undefined {
  let found: Syntax.SimpleCommand | undefined;
  const visit = (st: Syntax.Statement): void => {
    if (found) return;
    switch (st.kind) {
      case 'simple': {
        const name = nameOf(st);
        if (name !== undefined && DOWNLOADERS.has(name)) found = st;
        return;
      }
      case 'pipeline':
        st.stages.forEach(visit);
        return;
      case 'and-or':
        visit(st.left);
        visit(st.right);
        return;
      case 'group':
      case 'subshell':
        st.body.items.forEach((i) => visit(i.statement));
        return;
      default:
        return;
    }
  };
  seq.items.forEach((i) => visit(i.statement));
  return found;
}

/** A downloader inside a word's `<(…)` or `$(…)`. */
function downloaderInWord(word: Syntax.Word): Syntax.SimpleCommand | undefined {
  for (const part of word.parts) {
    if (part.kind === 'process-sub' || part.kind === 'command-sub') {
      const hit = downloaderIn(part.body);
      if (hit) return hit;
    }
  }
  return undefined;
}

/**
 * The download-into-interpreter shape of a parsed command line, if it has one the terminal can
 * rewrite into review steps (a literal URL, no privilege program anywhere in the line).
 */
export function findDownloadReview(parsed: ParsedCommand): DownloadReview | undefined {
  if (!parsed.ok || !parsed.syntax || PRIVILEGE.test(parsed.source)) return undefined;
  let found: DownloadReview | undefined;
  const found1 = (downloader: Syntax.SimpleCommand, interpreter: string) => {
    const steps = reviewSteps(downloader.text, interpreter);
    if (steps && !found) found = { download: downloader.text, interpreter, steps };
  };
  const simple = (st: Syntax.SimpleCommand): void => {
    const name = nameOf(st);
    if (name === undefined || !INTERPRETER.test(name)) return;
    // `bash <(curl …)`, `source <(curl …)`, `bash -c "$(curl …)"`, `eval "$(curl …)"`.
    for (const word of st.words.slice(1)) {
      const hit = downloaderInWord(word);
      if (hit) return found1(hit, name);
    }
  };
  const visit = (st: Syntax.Statement): void => {
    if (found) return;
    switch (st.kind) {
      case 'simple':
        return simple(st);
      case 'pipeline': {
        // `curl URL | bash`, `wget -qO- URL | sh -s -- --yes`, `curl URL | tee x | python3`.
        let downloader: Syntax.SimpleCommand | undefined;
        for (const stage of st.stages) {
          if (stage.kind !== 'simple') {
            visit(stage);
            continue;
          }
          const name = nameOf(stage);
          if (name !== undefined && DOWNLOADERS.has(name)) downloader ??= stage;
          else if (downloader && name !== undefined && INTERPRETER.test(name) && !hasScriptArg(stage))
            return found1(downloader, name);
          else simple(stage);
        }
        return;
      }
      case 'and-or':
        visit(st.left);
        visit(st.right);
        return;
      case 'group':
      case 'subshell':
        st.body.items.forEach((i) => visit(i.statement));
        return;
      case 'negated':
        visit(st.body);
        return;
      default:
        return;
    }
  };
  parsed.syntax.body.items.forEach((i) => visit(i.statement));
  return found;
}

/** An interpreter given a script file or `-c` text reads its code from there, not from the pipe. */
function hasScriptArg(st: Syntax.SimpleCommand): boolean {
  const args = st.words.slice(1).map((w) => literalValue(w));
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === undefined) return true;
    if (a === '-' || a === '-s' || a === '--') return false;
    if (a === '-c' || a === '-e' || a === '-m') return true;
    if (!a.startsWith('-')) return true;
  }
  return false;
}
