import { grammar, parseArgs } from '../grammar.js';
import { literalArg, type Arg } from '../words.js';
import type { ReadOnlyEffects } from './read-only.js';

/** sed read-only: no in-place edit, no script file, and a script made only of commands that print. */
export const SED_READ_ONLY = grammar({
  flags: 'nErsuz',
  values: 'el',
  long: 'quiet silent regexp-extended separate unbuffered null-data zero-terminated posix debug sandbox expression= line-length= binary help version',
});

/** Commands that only print or move through the input. */
const SIMPLE =
  /^(?:[pdDnNPgGhHxlqQ=zF]|[qQ]\s*\d*|l\s*\d*|[{}]|[btT](?:\s*[A-Za-z0-9_.]*)?|:[A-Za-z0-9_.]+|[rR]\s+\S.*)$/;
const ADDRESS =
  /^(?:\d+(?:~\d+)?|\$|\/(?:[^/\\]|\\.)*\/[IM]*|\\(.)(?:(?!\1).|\\.)*\1[IM]*)(?:\s*,\s*(?:\d+|\$|\/(?:[^/\\]|\\.)*\/[IM]*|[+~]\d+))?\s*!?\s*/;

/** Whether every command of a sed script only prints (no `e`, `w`, `W`, `s///e`, `s///w`). */
export function sedScriptSafe(script: string): boolean {
  for (let piece of script.split(/[;\n]/)) {
    piece = piece.trim();
    if (piece === '') continue;
    piece = piece.replace(ADDRESS, '');
    if (piece === '' || SIMPLE.test(piece)) continue;
    if (/^y(.)(?:(?!\1).|\\.)*\1(?:(?!\1).|\\.)*\1$/.test(piece)) continue;
    if (piece.startsWith('s') && piece.length > 1) {
      const sep = piece[1]!;
      if (/[\s\\\n]/.test(sep)) return false;
      let i = 2;
      let seen = 0;
      while (i < piece.length && seen < 2) {
        if (piece[i] === '\\') i += 2;
        else {
          if (piece[i] === sep) seen++;
          i++;
        }
      }
      if (seen < 2) return false;
      // Flags: g, p, i/I, m/M, a number. `e` runs the pattern space, `w` writes a file.
      if (/^[gpIiMm0-9]*$/.test(piece.slice(i))) continue;
    }
    return false;
  }
  return true;
}

export function sedCheck(all: readonly Arg[]): { reason?: string; effects?: ReadOnlyEffects } {
  const parsed = parseArgs(SED_READ_ONLY, all, 'sed');
  if (!parsed.ok) {
    const inPlace = all.some((a) => /^(-[a-zA-Z]*i|--in?-?p?l?a?c?e?)/.test(a.value ?? ''));
    return { reason: inPlace ? 'sed -i edits files in place' : parsed.reason };
  }
  const scripts: Arg[] = [];
  for (const o of parsed.args.options) {
    if (o.def.key === '-e' || o.def.key === '--expression') {
      if (typeof o.value === 'string') scripts.push(literalArg(o.value));
      else if (o.value) scripts.push(o.value);
    }
  }
  let operands = parsed.args.operands;
  if (scripts.length === 0) {
    const first = operands[0];
    if (!first) return { reason: 'sed without a script' };
    scripts.push(first);
    operands = operands.slice(1);
  }
  const reads: Arg[] = [];
  for (const s of scripts) {
    if (s.value === undefined) return { reason: `the sed script ${s.raw} is only known at run time` };
    if (!sedScriptSafe(s.value))
      return {
        reason: `sed script ${JSON.stringify(s.value)} may write files or run commands (e, w, W, s///e, s///w)`,
      };
    reads.push(...sedScriptReads(s.value).map(literalArg));
  }
  return reads.length > 0 ? { effects: { reads } } : {};
}

/** The files a (safe) sed script reads with `r FILE` and `R FILE` (GNU sed: to the end of the line). */
function sedScriptReads(script: string): string[] {
  const files: string[] = [];
  for (let piece of script.split(/[;\n]/)) {
    piece = piece.trim().replace(ADDRESS, '');
    const m = /^[rR]\s+(\S.*)$/.exec(piece);
    if (m) files.push(m[1]!.trim());
  }
  return files;
}
