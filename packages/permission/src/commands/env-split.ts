import { escapeGlob, literalArg, runtimeArg, type Arg } from '../words.js';

/**
 * `env -S STRING` (`--split-string`): GNU env splits STRING into arguments with rules of its own
 * (not a shell's: `;`, `|` and `>` are plain text) and processes them as if they had been given in
 * its place, options included (`env -S '-i A=1 cmd'`). Whitespace and `\_` separate arguments
 * (inside double quotes `\_` is a space); single quotes keep everything but `\\` and `\'`; double
 * quotes and unquoted text take the escapes `\" \' \\ \# \$ \_ \c \f \n \r \t \v`, any other is an
 * error; `\c` outside double quotes ends the string; `#` at the start of an argument starts a
 * comment to the end; `${NAME}` is the variable's value (only known at run time), a bare `$NAME`
 * an error. On any error env runs nothing.
 */
export function splitEnvString(text: string): { ok: true; args: Arg[] } | { ok: false; reason: string } {
  const args: Arg[] = [];
  // The current argument: known text with `\u0000` where a variable's value goes.
  let current: string | undefined;
  const fail = (reason: string) => ({ ok: false as const, reason });
  const flush = () => {
    if (current !== undefined) args.push(toArg(current));
    current = undefined;
  };
  const add = (s: string) => {
    current = (current ?? '') + s;
  };
  let quote: '"' | "'" | undefined;
  let i = 0;
  const expansion = (): string | undefined => {
    // At `$`: `${NAME}` only.
    const m = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}/.exec(text.slice(i));
    if (!m) return undefined;
    i += m[0].length;
    return '\u0000';
  };
  while (i < text.length) {
    const c = text[i]!;
    if (quote === "'") {
      if (c === "'") {
        quote = undefined;
        i++;
      } else if (c === '\\' && (text[i + 1] === '\\' || text[i + 1] === "'")) {
        add(text[i + 1]!);
        i += 2;
      } else {
        add(c);
        i++;
      }
      continue;
    }
    if (c === '\\') {
      const e = text[i + 1];
      const simple: Record<string, string> = {
        '"': '"',
        "'": "'",
        '\\': '\\',
        '#': '#',
        $: '$',
        f: '\f',
        n: '\n',
        r: '\r',
        t: '\t',
        v: '\v',
      };
      if (e !== undefined && Object.hasOwn(simple, e)) {
        add(simple[e]!);
        i += 2;
        continue;
      }
      if (e === '_') {
        if (quote === '"') add(' ');
        else flush();
        i += 2;
        continue;
      }
      if (e === 'c') {
        if (quote === '"') return fail("env -S: '\\c' must not appear in a double-quoted string");
        flush();
        return { ok: true, args };
      }
      return fail(`env -S: invalid sequence '\\${e ?? ''}'`);
    }
    if (c === '$') {
      const v = expansion();
      if (v === undefined) return fail('env -S: only ${NAME} expansion is supported');
      add(v);
      continue;
    }
    if (quote === '"') {
      if (c === '"') quote = undefined;
      else add(c);
      i++;
      continue;
    }
    if (c === '"' || c === "'") {
      quote = c;
      current ??= '';
      i++;
      continue;
    }
    if (/[ \t\n\v\f\r]/.test(c)) {
      flush();
      i++;
      continue;
    }
    if (c === '#' && current === undefined) return (flush(), { ok: true, args });
    add(c);
    i++;
  }
  if (quote) return fail('env -S: an unterminated quote');
  flush();
  return { ok: true, args };
}

function toArg(text: string): Arg {
  if (!text.includes('\u0000')) return literalArg(text);
  const raw = text.replaceAll('\u0000', '${…}');
  const pattern = text
    .split('\u0000')
    .map((piece) => escapeGlob(piece))
    .join('*');
  return { ...runtimeArg(raw), pattern, mayBeOption: text.startsWith('\u0000') || text.startsWith('-') };
}
