import type { Arg } from './words.js';

/** A host rule that would allow this command: exact for short commands, else a prefix. */
export function suggestRule(words: Arg[]): string | undefined {
  if (words.length === 0 || !words.every((w) => w.value !== undefined)) return undefined;
  const values = words.map((w) => w.value!);
  if (values.some((v) => /[\s*]/.test(v))) {
    const head = values.slice(
      0,
      values.findIndex((v) => /[\s*]/.test(v)),
    );
    return head.length ? `${head.join(' ')}:*` : undefined;
  }
  if (values.length <= 3) return values.join(' ');
  const head = [values[0]!];
  for (const v of values.slice(1, 3)) {
    if (/^[A-Za-z][\w:.-]*$/.test(v)) head.push(v);
    else break;
  }
  return `${head.join(' ')}:*`;
}
