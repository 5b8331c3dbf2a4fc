import { exactText } from './analyze/host-match.js';
import type { Arg } from './words.js';

/**
 * The rule that allows exactly this command and nothing wider: its words as written (quoted where
 * the shell needs quotes), no wildcard. An `always` answer stores it for the directory the command
 * ran in (`CompiledRule.cwd`), so `rm -rf build` approved once never covers `rm -rf ~/important`,
 * `python3 -c '<other code>'`, `curl <other url>` or `sed -i … ~/.bashrc`, nor the same words run
 * elsewhere. A subcommand-wide rule (`npm run test:*`) is never suggested: no extension of a
 * command the gate could not prove harmless is known to be as harmless (`npm run test:deploy`,
 * `npm test --script-shell=…`, `git log --output=…`); the host may still write one in its config.
 * Undefined when no rule in the prefix syntax can say exactly this (a word only known at run time,
 * a `*` or a line break in a word).
 */
export function suggestRule(words: Arg[]): string | undefined {
  const text = exactText(words);
  if (text === undefined || /[*\n\r\t\v\f]/.test(text) || /\s{2}/.test(text)) return undefined;
  return text;
}
