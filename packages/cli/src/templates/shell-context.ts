/**
 * Where a position in a shell command sits, as far as quoting goes. Found by a small scanner that
 * knows quotes, escapes, `$(...)`, backticks and `${...}`; it does not parse here-documents (a
 * placeholder in a here-doc body is treated as unquoted). A wrong guess can only change how an
 * argument's text is split, never make it code: arguments always reach the shell as a
 * parameter expansion, which the shell never re-parses.
 */
export type QuoteContext = 'unquoted' | 'double' | 'single';

export interface Placeholder {
  /** The argument name between `UTCP_ARG_` and `_UTCP_END`. */
  name: string;
  start: number;
  end: number;
  context: QuoteContext;
}

const PLACEHOLDER = /UTCP_ARG_([A-Za-z0-9_.-]+?)_UTCP_END/y;

type Frame = 'unquoted' | 'double' | 'single' | 'ansi' | 'backtick' | 'subst' | 'brace';

/** Finds every `UTCP_ARG_<name>_UTCP_END` in `command` with its quote context. */
export function findPlaceholders(command: string): Placeholder[] {
  const found: Placeholder[] = [];
  const stack: Frame[] = ['unquoted'];
  const top = (): Frame => stack[stack.length - 1] ?? 'unquoted';
  let i = 0;
  while (i < command.length) {
    PLACEHOLDER.lastIndex = i;
    const match = PLACEHOLDER.exec(command);
    if (match) {
      found.push({ name: match[1] as string, start: i, end: i + match[0].length, context: contextOf(stack) });
      i += match[0].length;
      continue;
    }
    const c = command[i] as string;
    const next = command[i + 1];
    const frame = top();
    if (frame === 'single') {
      if (c === "'") stack.pop();
      i++;
      continue;
    }
    if (frame === 'ansi') {
      if (c === '\\') i += 2;
      else {
        if (c === "'") stack.pop();
        i++;
      }
      continue;
    }
    if (c === '\\') {
      i += 2;
      continue;
    }
    if (frame === 'double') {
      if (c === '"') stack.pop();
      else if (c === '`') stack.push('backtick');
      else if (c === '$' && next === '(') {
        stack.push('subst');
        i++;
      } else if (c === '$' && next === '{') {
        stack.push('brace');
        i++;
      }
      i++;
      continue;
    }
    // unquoted-like frames: unquoted, backtick, subst, brace
    if (c === '#' && frame !== 'brace' && (i === 0 || /[\s;&|()]/.test(command[i - 1] as string))) {
      // a comment runs to the end of the line; quotes in it (`# don't`) mean nothing
      const eol = command.indexOf('\n', i);
      i = eol === -1 ? command.length : eol;
      continue;
    }
    if (c === "'") stack.push('single');
    else if (c === '$' && next === "'") {
      stack.push('ansi');
      i++;
    } else if (c === '"') stack.push('double');
    else if (c === '`') {
      if (frame === 'backtick') stack.pop();
      else stack.push('backtick');
    } else if (c === '$' && next === '(') {
      stack.push('subst');
      i++;
    } else if (c === '$' && next === '{') {
      stack.push('brace');
      i++;
    } else if (c === '(' && (frame === 'subst' || frame === 'unquoted')) stack.push('subst');
    else if (c === ')' && frame === 'subst') stack.pop();
    else if (c === '}' && frame === 'brace') stack.pop();
    i++;
  }
  return found;
}

/** Inside `"${x:-...}"` the word keeps the double-quote context. */
function insideDouble(stack: readonly Frame[]): boolean {
  for (let j = stack.length - 1; j >= 0; j--) {
    const f = stack[j];
    if (f === 'double') return true;
    if (f !== 'brace') return false;
  }
  return false;
}

function contextOf(stack: readonly Frame[]): QuoteContext {
  const frame = stack[stack.length - 1] ?? 'unquoted';
  if (frame === 'single' || frame === 'ansi') return 'single';
  if (frame === 'double') return 'double';
  if (frame === 'brace' && insideDouble(stack)) return 'double';
  return 'unquoted';
}
