import type { LineFacts, Part } from '../facts.js';

/**
 * Rule `safety:downloadToInterpreter`: when a command line downloads (curl, wget, busybox wget,
 * nc, a `/dev/tcp` redirect …) and an interpreter in the same line takes its code from anything
 * but a literal file or literal text — its stdin through any pipe, `/dev/stdin`, `/dev/fd/0`,
 * `< <(…)`, `<<< "$(…)"`, a process substitution, or a `-c` string built at run time — the line is
 * denied: downloaded code would run without review. Downloading to a file, reading it, then
 * running the file is the supported way (that asks).
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
  return [
    {
      command: hit.shown,
      verdict: 'deny',
      reason: `it runs downloaded code (${line.downloads[0]}) with ${hit.name} without review. Download it to a file first (curl -fsSLo script.sh URL), read it, then run it (sh script.sh)`,
      rule: `safety:${rule}`,
    },
  ];
}
