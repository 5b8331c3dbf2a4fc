const SIMPLE: Record<string, string> = {
  a: '\x07',
  b: '\b',
  e: '\x1b',
  E: '\x1b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  v: '\v',
  '\\': '\\',
  "'": "'",
  '"': '"',
  '?': '?',
};

/**
 * Decodes the body of an ANSI-C quoted string (`$'...'` without the `$'` and `'`) the way bash
 * does: `\n`, `\xHH`, `\NNN` octal, `\uHHHH`, `\UHHHHHHHH`, `\cX`. Unknown escapes keep the
 * backslash, as bash does; an escape that makes a NUL ends the string there (`$'a\0b'` is `a`),
 * as in bash, whose strings are C strings.
 */
export function decodeAnsiC(body: string): string {
  let out = '';
  for (let i = 0; i < body.length; i++) {
    const ch = body[i]!;
    if (ch !== '\\' || i === body.length - 1) {
      out += ch;
      continue;
    }
    const next = body[i + 1]!;
    const simple = SIMPLE[next];
    if (simple !== undefined) {
      out += simple;
      i++;
      continue;
    }
    if (next === 'x') {
      const m = /^[0-9a-fA-F]{1,2}/.exec(body.slice(i + 2));
      if (m) {
        out += String.fromCharCode(parseInt(m[0], 16));
        i += 1 + m[0].length;
        continue;
      }
    } else if (next === 'u' || next === 'U') {
      const m = (next === 'u' ? /^[0-9a-fA-F]{1,4}/ : /^[0-9a-fA-F]{1,8}/).exec(body.slice(i + 2));
      if (m) {
        const code = parseInt(m[0], 16);
        out += code <= 0x10ffff ? String.fromCodePoint(code) : '';
        i += 1 + m[0].length;
        continue;
      }
    } else if (next >= '0' && next <= '7') {
      const m = /^[0-7]{1,3}/.exec(body.slice(i + 1))!;
      out += String.fromCharCode(parseInt(m[0], 8) & 0xff);
      i += m[0].length;
      continue;
    } else if (next === 'c' && i + 2 < body.length) {
      out += String.fromCharCode(body.charCodeAt(i + 2) & 0x1f);
      i += 2;
      continue;
    }
    out += '\\' + next;
    i++;
  }
  const nul = out.indexOf('\0');
  return nul < 0 ? out : out.slice(0, nul);
}
