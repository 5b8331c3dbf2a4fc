/**
 * Recognises a program waiting for an answer from the last line of its (quiet) output, so a call
 * returns as soon as the prompt is on screen instead of after the full idle period.
 */
const PROMPT_PATTERNS: readonly RegExp[] = [
  /(?:password|passphrase|passcode|pin)[^\n]{0,40}:\s*$/i,
  /\[(?:y\/n|yes\/no)\][^\n]{0,10}$/i,
  /\((?:y\/n|yes\/no)(?:\/[^)]{0,20})?\)[^\n]{0,10}$/i,
  /^(?:>>>|\.\.\.) $/, // Python REPL
  /\? $/, // a question with the cursor after it: `name? `
  /^\? /, // inquirer-style prompts: `? Project name: (app)`
  /press (?:any key|enter|return)/i,
  /(?:continue|proceed)\s*\?\s*$/i,
  // A short unfinished line ending like a REPL or form prompt: `> `, `mysql> `, `postgres=# `, `Name: `.
  /^.{0,80}[>:#$%] $/,
];

/** Whether the tail of cleaned output ends with something that waits for an answer. */
export function looksLikePrompt(cleanedTail: string): boolean {
  // A prompt is the unfinished last line: text after the final newline.
  const at = cleanedTail.lastIndexOf('\n');
  const line = cleanedTail.slice(at + 1);
  if (line.trim() === '') return false;
  return PROMPT_PATTERNS.some((pattern) => pattern.test(line));
}
