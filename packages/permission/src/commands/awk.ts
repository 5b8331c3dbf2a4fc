import { grammar, parseArgs } from '../grammar.js';
import { shellGlob } from '../paths.js';
import type { Arg } from '../words.js';
import type { ReadOnlyEffects } from './read-only.js';

/**
 * awk as a read-only command: a program that only reads its input and prints. awk is a language
 * of its own, so the gate reads the program enough to know what it can do (`awkProgramRisk`):
 * `system()`, pipes (`print | "cmd"`, `"cmd" | getline`, `|&`), output redirections in `print` and
 * `printf` (`print > "f"`; `/dev/stdout` and `/dev/stderr` are awk's own output), `getline < file`
 * of a file not written literally, gawk's network files (`/inet/…`, as `getline` files or
 * operands), `ENVIRON` (a listing of the environment, like `env`), `ARGV` (file operands chosen at
 * run time) and gawk's `@` directives and indirect calls (`@load`, `@include`, `@f()`) ask. Where
 * awk's own reading is uncertain the program asks: a `/` awk may take either for division or for a
 * regular expression when the two readings would differ (`else /"/; system(…) # "`), and a bracket
 * expression holding a `/` (`/[/"]/`: gawk and mawk keep reading the regular expression, others end
 * it). Options that read code or write files (`-f`, `-E`, `-i`, `-l`, `-o`, `-p`, `-d`, `-D`,
 * mawk's `-W`) are not in the grammar.
 */
const AWK = grammar({
  flags: 'bcPrsSNnMOtVhL',
  values: 'Fve',
  long:
    'field-separator= assign= source= characters-as-bytes traditional posix re-interval no-optimize sandbox ' +
    'use-lc-numeric non-decimal-data bignum optimize lint-old lint? version help',
  permute: false,
});

export function awkCheck(all: readonly Arg[]): { reason?: string; effects?: ReadOnlyEffects } {
  const parsed = parseArgs(AWK, all, 'awk');
  if (!parsed.ok) return { reason: parsed.reason };
  const sources = parsed.args.options
    .filter((o) => o.def.key === '-e' || o.def.key === '--source')
    .map((o) => o.value);
  let operands = parsed.args.operands;
  if (sources.length === 0) {
    const program = operands[0];
    if (!program) return { reason: 'awk without a program' };
    sources.push(program);
    operands = operands.slice(1);
  }
  for (const source of sources) {
    const text = typeof source === 'string' ? source : source?.value;
    if (text === undefined)
      return {
        reason: `the awk program ${typeof source === 'string' ? source : (source?.raw ?? '')} is only known at run time`,
      };
    const risk = awkProgramRisk(text);
    if (risk) return { reason: `the awk program ${risk}` };
  }
  // gawk opens `/inet/…` operands as network connections, like getline does.
  const inet = operands.find((o) => mayNameInet(o));
  if (inet) return { reason: `awk ${inet.raw} may be a network connection (gawk's /inet special files)` };
  return {};
}

/** Whether an operand can be a `/inet/…` special file (each part only known at run time stays in its path component). */
function mayNameInet(a: Arg): boolean {
  if (a.value !== undefined) return INET.test(a.value);
  if (a.fields !== undefined) return a.fields.some((f) => INET.test(f));
  const first = a.pattern.split('/').slice(0, 2);
  if (first.length < 2 || first[0] !== '') return false;
  try {
    return shellGlob(first[1]!, true).test('inet') || shellGlob(first[1]!, true).test('inet6');
  } catch {
    return true;
  }
}

type Token =
  | { kind: 'name'; text: string }
  | { kind: 'string'; text: string }
  | { kind: 'regex' }
  | { kind: 'number' }
  | { kind: 'op'; text: string }
  | { kind: 'newline' };

/** Keywords after which a `/` starts a regular expression (an operand is expected). */
const REGEX_AFTER_NAME = new Set(['print', 'printf', 'return', 'case']);
/** Operators after which a `/` starts a regular expression. */
const REGEX_AFTER_OP = new Set([
  '(',
  ',',
  '{',
  '}',
  ';',
  '!',
  '~',
  '!~',
  '&&',
  '||',
  '?',
  ':',
  '=',
  '+=',
  '-=',
  '*=',
  '/=',
  '%=',
  '^=',
  '==',
  '!=',
  '<',
  '<=',
  '>',
  '>=',
  '+',
  '-',
  '*',
  '%',
  '^',
  '[',
]);

/**
 * Splits an awk program into tokens: strings and regular expressions whole (so a `|` or `system`
 * inside them is text), comments dropped. A `/` is a regular expression only where an operand is
 * expected; where awk's reading is unclear the `/` is taken as division, so the text after it is
 * read as code (asking more, never less). Undefined when the text cannot be split (an unterminated
 * string or regular expression).
 */
function tokenize(src: string): Token[] | undefined {
  const tokens: Token[] = [];
  const regexAllowed = (): boolean => {
    const last = tokens[tokens.length - 1];
    if (!last || last.kind === 'newline') return true;
    if (last.kind === 'op') return REGEX_AFTER_OP.has(last.text);
    if (last.kind === 'name') return REGEX_AFTER_NAME.has(last.text);
    return false;
  };
  let i = 0;
  // Where a `/` read as division would have ended a regular expression (see below).
  let divisionEnd = -1;
  while (i < src.length) {
    const c = src[i]!;
    if (c === ' ' || c === '\t' || c === '\r') {
      i++;
      continue;
    }
    if (c === '\\' && (src[i + 1] === '\n' || (src[i + 1] === '\r' && src[i + 2] === '\n'))) {
      i += src[i + 1] === '\n' ? 2 : 3;
      continue;
    }
    if (c === '\n') {
      tokens.push({ kind: 'newline' });
      i++;
      continue;
    }
    if (c === '#') {
      while (i < src.length && src[i] !== '\n') i++;
      continue;
    }
    if (c === '"') {
      let j = i + 1;
      let text = '';
      for (; j < src.length && src[j] !== '"'; j++) {
        if (src[j] === '\n') return undefined;
        if (src[j] === '\\') {
          text += src[j + 1] ?? '';
          j++;
          continue;
        }
        text += src[j];
      }
      if (j >= src.length) return undefined;
      tokens.push({ kind: 'string', text });
      i = j + 1;
      continue;
    }
    if (c === '/') {
      const end = regexEnd(src, i);
      if (end === 'ambiguous') return undefined;
      if (regexAllowed()) {
        // A division read as a regular expression's end (see below): the two readings differ.
        if (i === divisionEnd) return undefined;
        if (end === undefined) return undefined;
        tokens.push({ kind: 'regex' });
        i = end + 1;
        continue;
      }
      // Read as division, but awk may read a regular expression here (`if (x) /re/`, `else /re/`
      // are statements): the text up to the next `/` must mean the same either way. A string or a
      // comment starting inside it, or its closing `/` starting a regular expression in this
      // reading, would hide code awk runs.
      if (end !== undefined) {
        const span = src.slice(i + 1, end);
        if (/["#]/.test(span)) return undefined;
        divisionEnd = end;
      }
    }
    const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i, i + 256));
    if (name) {
      tokens.push({ kind: 'name', text: name[0] });
      i += name[0].length;
      continue;
    }
    const num = /^(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)/.exec(
      src.slice(i, i + 64),
    );
    if (num) {
      tokens.push({ kind: 'number' });
      i += num[0].length;
      continue;
    }
    const op =
      /^(?:\|&|\|\||&&|>>|<=|>=|==|!=|!~|\+\+|--|[-+*/%^]=|\*\*=?|[-+*/%^!<>=~?:,;(){}[\]$|&@\\])/.exec(
        src.slice(i, i + 3),
      );
    if (!op) return undefined;
    tokens.push({ kind: 'op', text: op[0] });
    i += op[0].length;
  }
  return tokens;
}

/**
 * Where a regular expression starting at the `/` at `start` ends (the index of its closing `/`),
 * undefined when it does not end on its line, 'ambiguous' when a bracket expression holds a `/`
 * (`/[/"]/`): gawk and mawk read such a `/` as part of the bracket, other awks end the regular
 * expression there, so the gate cannot know where the code starts again.
 */
function regexEnd(src: string, start: number): number | 'ambiguous' | undefined {
  let bracket = false;
  for (let j = start + 1; j < src.length; j++) {
    const c = src[j]!;
    if (c === '\n') return undefined;
    if (c === '\\') {
      j++;
      continue;
    }
    if (bracket) {
      if (c === '/') return 'ambiguous';
      if (c === ']') bracket = false;
      continue;
    }
    if (c === '[') {
      bracket = true;
      // `[]…]` and `[^]…]`: a `]` right after the opening is a member, not the end.
      if (src[j + 1] === '^') j++;
      if (src[j + 1] === ']') j++;
      continue;
    }
    if (c === '/') return j;
  }
  return undefined;
}

/** Why an awk program may do more than read its input and print, or undefined when it only does that. */
export function awkProgramRisk(program: string): string | undefined {
  const tokens = tokenize(program);
  if (!tokens)
    return 'cannot be read for certain (an unterminated string or regular expression, or a `/` awk may read either as division or as a regular expression)';
  // Inside a print or printf statement: the paren depth there (a `>` at depth 0 redirects).
  let printDepth: number | undefined;
  for (let k = 0; k < tokens.length; k++) {
    const t = tokens[k]!;
    if (t.kind === 'name') {
      if (t.text === 'system') return 'runs a command (system)';
      if (t.text === 'ENVIRON') return 'reads ENVIRON, a listing of the environment';
      if (t.text === 'ARGV') return 'changes or reads ARGV, the files it reads chosen at run time';
      if (t.text === 'print' || t.text === 'printf') printDepth = 0;
      if (t.text === 'getline') {
        const risk = getlineRisk(tokens, k);
        if (risk) return risk;
      }
      continue;
    }
    if (t.kind === 'string') {
      if (/environ/.test(t.text)) return `names ${JSON.stringify(t.text)}, an environment listing`;
      continue;
    }
    if (t.kind === 'newline') {
      // A print statement goes on after a newline that follows `,`, `&&` or `||`.
      const prev = tokens[k - 1];
      if (!(prev?.kind === 'op' && [',', '&&', '||'].includes(prev.text))) printDepth = undefined;
      continue;
    }
    if (t.kind !== 'op') continue;
    switch (t.text) {
      case '|':
      case '|&':
        return 'pipes to or from a command (|)';
      case '@':
        return "uses gawk's @ (a directive, or an indirect call of any function)";
      case '&':
      case '\\':
        return `has ${JSON.stringify(t.text)} outside a string, which the gate does not read`;
      case '(':
      case '[':
        if (printDepth !== undefined) printDepth++;
        break;
      case ')':
      case ']':
        if (printDepth !== undefined && printDepth > 0) printDepth--;
        break;
      case ';':
      case '{':
      case '}':
        printDepth = undefined;
        break;
      case '>':
      case '>>':
      case '>=':
        if (printDepth === 0 && !(t.text !== '>=' && toStandardStream(tokens, k + 1)))
          return 'writes a file (print > file)';
        break;
    }
  }
  return undefined;
}

/**
 * `getline`, `getline var`, `getline < "file"`: reads its input or a file named literally (not an
 * environment listing). A file named any other way (`getline < f`, `getline < ("/proc/" x)`) asks.
 */
function getlineRisk(tokens: readonly Token[], at: number): string | undefined {
  let k = at + 1;
  if (
    tokens[k]?.kind === 'name' &&
    tokens[k + 1]?.kind === 'op' &&
    (tokens[k + 1] as { text: string }).text === '<'
  )
    k++;
  const next = tokens[k];
  if (next?.kind !== 'op' || next.text !== '<') return undefined;
  const file = tokens[k + 1];
  const after = tokens[k + 2];
  const ends =
    !after ||
    after.kind === 'newline' ||
    (after.kind === 'op' &&
      [')', ';', '}', '>', '<', '==', '!=', '>=', '<=', '&&', '||'].includes(after.text));
  if (file?.kind === 'string' && ends)
    return INET.test(file.text)
      ? `opens a network connection (getline < ${JSON.stringify(file.text)}: gawk's /inet special files)`
      : undefined;
  return 'reads a file with getline whose name is not written literally';
}

/** gawk's network special files: `/inet/tcp/lport/host/rport` (also `/inet4/`, `/inet6/`). */
const INET = /^\/inet[46]?\//;

/**
 * `print … > "/dev/stderr"` (or `/dev/stdout`), the statement ending there: awk writes to its own
 * standard error or output, not to a file.
 */
function toStandardStream(tokens: readonly Token[], at: number): boolean {
  const file = tokens[at];
  if (file?.kind !== 'string' || !/^\/dev\/std(out|err)$/.test(file.text)) return false;
  const after = tokens[at + 1];
  return (
    !after || after.kind === 'newline' || (after.kind === 'op' && (after.text === ';' || after.text === '}'))
  );
}
