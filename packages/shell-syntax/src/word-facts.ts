import type { Word } from './syntax-types.js';

/** `{a,b}` or `{x..y}` in unquoted text (NUL marks quoted or expanded pieces); linear scan. */
export function hasBraceExpansion(text: string): boolean {
  let open = -1;
  let sawSeparator = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '{') {
      open = i;
      sawSeparator = false;
    } else if (open >= 0 && (ch === ',' || (ch === '.' && text[i + 1] === '.'))) {
      sawSeparator = true;
    } else if (ch === '}' && open >= 0) {
      if (sawSeparator) return true;
      open = -1;
    }
  }
  return false;
}

/** The value of a word when it is nothing but text (any quoting) with no unquoted glob pattern. */
export function literalValue(word: Word): string | undefined {
  let value = '';
  for (const p of word.parts) {
    if (p.kind !== 'text') return undefined;
    value += p.value;
  }
  return hasGlob(word) ? undefined : value;
}

/** Whether the word's unquoted text holds a glob pattern (`*`, `?`, or `[…]` with a closing `]`). */
export function hasGlob(word: Word): boolean {
  let skeleton = '';
  for (const p of word.parts) skeleton += p.kind === 'text' && p.quoting === 'none' ? p.value : '\0';
  if (/[*?]/.test(skeleton)) return true;
  const open = skeleton.indexOf('[');
  return open >= 0 && skeleton.indexOf(']', open + 2) > open;
}
