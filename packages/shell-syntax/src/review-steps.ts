import { createHash } from 'node:crypto';
import { shellQuote } from './shell-quote.js';

// "Download & review", the reference terminal's answer to `curl … | bash`: the commands a download
// fed to an interpreter becomes. One function for the permission gate's reason and the terminal's
// fields, so the two always name the same file and commands.

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
export function downloadReviewSteps(shown: string, interpreter: string): ReviewSteps | undefined {
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
