import { createHash } from 'node:crypto';
import { shellQuote } from '@conch/shell-syntax';
import type { LineFacts, Part } from '../facts.js';

/**
 * Rule `safety:downloadToInterpreter`: when a command line downloads (curl, wget, busybox wget,
 * nc, a `/dev/tcp` redirect …) and an interpreter in the same line takes its code from anything
 * but a literal file or literal text — its stdin through any pipe, `/dev/stdin`, `/dev/fd/0`,
 * `< <(…)`, `<<< "$(…)"`, a process substitution, or a `-c` string built at run time — the line is
 * denied: downloaded code would run without review. The reason answers as the reference terminal
 * does ("download & review"): when the download names its URL, it spells out the commands to run
 * instead — download to a file (`curl -fsSL -o /tmp/conch-review-<hash>-install.sh URL`), read
 * it, then run the file — and runs none of them (each goes through the gate when the model runs it).
 */
export function downloadToInterpreter(line: LineFacts): Part[] {
  return match(line, false, 'downloadToInterpreter');
}

export function match(line: LineFacts, sourcing: boolean, rule: string): Part[] {
  if (line.downloads.length === 0) return [];
  const hit = line.interpreters.find(
    (i) => i.sourcing === sourcing && (i.code === 'stdin' || i.code === 'dynamic'),
  );
  if (!hit) return [];
  const download = line.downloads[0]!;
  const steps = reviewSteps(download, hit.name);
  return [
    {
      command: hit.shown,
      verdict: 'deny',
      reason: steps
        ? `it runs downloaded code (${download}) with ${hit.name} without review. Download it to a file first, read it, then run it: ` +
          `1) ${steps.download} 2) ${steps.review} 3) ${steps.run} if it is fine`
        : `it runs downloaded code (${download}) with ${hit.name} without review. Download it to a file first (curl -fsSL -o /tmp/script.sh URL), read it, then run it (sh /tmp/script.sh)`,
      rule: `safety:${rule}`,
    },
  ];
}

/** The commands a download fed to an interpreter becomes: download to a file, read it, run it. */
export interface ReviewSteps {
  url: string;
  /** Where the download goes. */
  file: string;
  /** The download alone (curl when the line used curl or no known downloader, wget for wget). */
  download: string;
  /** Reading the file. */
  review: string;
  /** Running the file with the interpreter the line used, once it was read. */
  run: string;
}

const URL_WORD = /(?:https?|ftp):\/\/[^\s'"`|;&<>(){}\\]+/i;
const EXTENSIONS: Record<string, string> = { python: 'py', perl: 'pl', ruby: 'rb', node: 'js', php: 'php' };

/**
 * The review steps for the download `shown` (a command's text, e.g. `curl -fsSL https://x/install.sh`)
 * fed to `interpreter`; undefined when the text names no literal URL.
 */
export function reviewSteps(shown: string, interpreter: string): ReviewSteps | undefined {
  const url = URL_WORD.exec(shown)?.[0];
  if (!url) return undefined;
  const kind = interpreter.replace(/[\d.]+$/, '');
  const ext = EXTENSIONS[kind] ?? 'sh';
  const last =
    url
      .replace(/[?#].*$/, '')
      .replace(/\/+$/, '')
      .split('/')
      .pop() ?? '';
  const name = /^[\w.-]+\.[A-Za-z0-9]+$/.test(last) && !url.endsWith('/') ? last : `install.${ext}`;
  const hash = createHash('sha256').update(url).digest('hex').slice(0, 8);
  const file = `/tmp/conch-review-${hash}-${name}`;
  const wget = /(^|[\s/])wget(\s|$)/.test(shown) && !/(^|[\s/])curl(\s|$)/.test(shown);
  const download = wget
    ? `wget -qO ${shellQuote(file)} ${shellQuote(url)}`
    : `curl -fsSL -o ${shellQuote(file)} ${shellQuote(url)}`;
  const runner = interpreter === 'eval' || interpreter === '.' ? 'source' : interpreter;
  return { url, file, download, review: `cat ${shellQuote(file)}`, run: `${runner} ${shellQuote(file)}` };
}
