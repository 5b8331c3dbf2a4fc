/**
 * Characters bash, POSIX sh (dash) and zsh all read literally in an argument, in any position of
 * a word, except a leading `=` (zsh expands `=cmd` to the path of cmd).
 */
const PLAIN = /^[A-Za-z0-9_./:=@%+,-]+$/;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Plain words a shell reads differently in command position than as an argument: reserved words
 * of bash, zsh and POSIX sh (`time`, `if`, zsh's `foreach`, `repeat`, `nocorrect`). (`!`, `[[`,
 * `{` are not plain, so they are quoted anyway.) `shellJoin` quotes such a first word so that it
 * names a command, as argv[0] does.
 */
const RESERVED = new Set([
  'case',
  'coproc',
  'do',
  'done',
  'elif',
  'else',
  'end',
  'esac',
  'fi',
  'for',
  'foreach',
  'function',
  'if',
  'in',
  'nocorrect',
  'noglob',
  'repeat',
  'select',
  'then',
  'time',
  'until',
  'while',
  // zsh 5.1+ parses the typeset family as reserved words (their assignments are not split).
  'declare',
  'export',
  'float',
  'integer',
  'local',
  'readonly',
  'typeset',
]);

/**
 * Quotes `word` so that bash, POSIX sh (dash) and zsh each read it back as exactly that one
 * literal argument: no splitting, globbing, expansion, tilde, history (`!`) or zsh `=cmd`
 * expansion, in interactive shells too. Plain words (`[A-Za-z0-9_./:=@%+,-]`, not starting with
 * `=`) stay bare; anything else is single-quoted, a `'` written as `'\''`; the empty string is
 * `''`. A leading `-` is kept (it is the command's business whether that is an option).
 *
 * @throws TypeError when the word holds a NUL character (no argument can) or a lone UTF-16
 *   surrogate (it has no UTF-8 encoding, so the shell would receive a different word).
 */
export function shellQuote(word: string): string {
  if (typeof word !== 'string')
    throw new TypeError(`shellQuote: expected a string; received ${word === null ? 'null' : typeof word}`);
  if (word.includes('\0'))
    throw new TypeError(
      `shellQuote: the word ${JSON.stringify(word.slice(0, 40))} contains a NUL character, which no shell argument can hold`,
    );
  if (LONE_SURROGATE.test(word))
    throw new TypeError(
      `shellQuote: the word ${JSON.stringify(word.slice(0, 40))} contains a lone UTF-16 surrogate, which cannot be passed to a shell unchanged`,
    );
  if (PLAIN.test(word) && word[0] !== '=') return word;
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * Joins argv into one command line that bash, sh and zsh run as that argv: every word through
 * `shellQuote`, and the first also quoted when the shell would otherwise read it as syntax (a
 * reserved word such as `time` or `if`, an assignment such as `A=1`). The first word names a
 * command as a typed one does: a builtin or function of that name comes before a program (and in
 * an interactive shell an alias, unless the name needed quotes).
 * Quoting cannot help two names: bash reads a first word starting with `%` as a job spec, and zsh
 * reads `noglob` and `-` as precommand modifiers, however they are written.
 *
 * @throws TypeError as `shellQuote` does.
 */
export function shellJoin(argv: readonly string[]): string {
  return argv
    .map((word, i) => {
      const quoted = shellQuote(word);
      if (i === 0 && quoted === word && (RESERVED.has(word) || word.includes('='))) return `'${word}'`;
      return quoted;
    })
    .join(' ');
}
