import { downloadReviewSteps } from '@conch/shell-syntax';
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
  const steps = downloadReviewSteps(download, hit.name);
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
