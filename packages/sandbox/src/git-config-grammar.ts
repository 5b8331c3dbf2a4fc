/**
 * git's config grammar, in one place for every reader of a git config in conch: the kernel policy
 * (which files a config includes, where `core.hooksPath` points), the plant detector, and the
 * permission gate's repository checks (@conch/permission re-exports it). A reader that parsed a
 * config more loosely than git does would miss what git reads: `[core] hooksPath = x` on the
 * header's line, a value continued with a backslash, quotes in the middle of a value.
 */

export interface ConfigEntry {
  /** `section` or `section.subsection`: the section lowercased, the subsection as written (`diff.Foo`). */
  section: string;
  /** The key, lowercased. */
  key: string;
  /** The value after git's unquoting, or null for a key without `=` (boolean true). */
  value: string | null;
}

/**
 * A git config text read with git's own grammar (config.c: `git_parse_source`, `get_value`,
 * `parse_value`, `get_base_var`): a UTF-8 BOM skipped; CRLF read as LF; whitespace and comments
 * (`#`, `;`) between entries; `[section]`, `[section "subsection"]` (escapes `\"`, `\\`) and the
 * old `[section.subsection]` (lowercased) headers, keys on the header's line too; a key is letters,
 * digits and `-`; a value's leading and trailing blanks dropped, its blanks between words kept,
 * double quotes anywhere, the escapes `\\ \" \n \t \b`, a backslash-newline continuing the value
 * on the next line, a comment outside quotes ending it. Whatever git refuses is an `error`.
 */
export function parseGitConfig(text: string): { entries: ConfigEntry[] } | { error: string } {
  let pos = 0;
  let eof = false;
  const next = (): string => {
    if (pos >= text.length) {
      eof = true;
      pos++;
      return '\n';
    }
    let c = text[pos++]!;
    if (c === '\r' && text[pos] === '\n') c = text[pos++]!;
    return c;
  };
  const isSpace = (c: string) =>
    c === ' ' || c === '\t' || c === '\n' || c === '\v' || c === '\f' || c === '\r';
  const isKeyChar = (c: string) => /^[A-Za-z0-9-]$/.test(c);
  const entries: ConfigEntry[] = [];
  let section: string | undefined;
  const fail = (what: string) => ({
    error: `git cannot read this config (${what} near offset ${Math.min(pos, text.length)})`,
  });
  if (text.startsWith('\uFEFF')) pos = 1;
  else if (text.startsWith('\u00EF\u00BB\u00BF')) pos = 3;
  let comment = false;
  for (;;) {
    const c = next();
    if (c === '\n') {
      if (eof) return { entries };
      comment = false;
      continue;
    }
    if (comment) continue;
    if (isSpace(c)) continue;
    if (c === '#' || c === ';') {
      comment = true;
      continue;
    }
    if (c === '[') {
      // get_base_var / get_extended_base_var
      let name = '';
      let done = false;
      for (;;) {
        const d = next();
        if (eof) return fail('an unterminated section header');
        if (d === ']') {
          done = true;
          break;
        }
        if (isSpace(d)) {
          let e = d;
          do {
            if (e === '\n') return fail('an unterminated section header');
            e = next();
          } while (isSpace(e));
          if (e !== '"') return fail('a section header without a quoted subsection');
          let sub = '';
          for (;;) {
            let f = next();
            if (f === '\n') return fail('an unterminated subsection');
            if (f === '"') break;
            if (f === '\\') {
              f = next();
              if (f === '\n') return fail('an unterminated subsection');
            }
            sub += f;
          }
          if (next() !== ']') return fail('a section header not closed by ]');
          name = `${name}.${sub}`;
          break;
        }
        if (!isKeyChar(d) && d !== '.') return fail(`a section name with ${JSON.stringify(d)}`);
        name += d.toLowerCase();
      }
      if (!done && name === '') return fail('an empty section name');
      if (name === '' || name.startsWith('.')) return fail('an empty section name');
      section = name;
      continue;
    }
    if (!/^[A-Za-z]$/.test(c)) return fail(`${JSON.stringify(c)} where a key starts`);
    if (section === undefined) return fail('a key before any section');
    // get_value
    let key = c.toLowerCase();
    let d: string;
    for (;;) {
      d = next();
      if (eof) break;
      if (!isKeyChar(d)) break;
      key += d.toLowerCase();
    }
    while (d === ' ' || d === '\t') d = next();
    if (d === '\n') {
      entries.push({ section, key, value: null });
      if (eof) return { entries };
      continue;
    }
    if (d !== '=') return fail(`${JSON.stringify(d)} after the key ${key}`);
    // parse_value
    let value = '';
    let quote = false;
    let inComment = false;
    let space = 0;
    for (;;) {
      let e = next();
      if (e === '\n') {
        if (quote) return fail('a newline inside a quoted value');
        break;
      }
      if (inComment) continue;
      if (isSpace(e) && !quote) {
        if (value.length) space++;
        continue;
      }
      if (!quote && (e === ';' || e === '#')) {
        inComment = true;
        continue;
      }
      for (; space; space--) value += ' ';
      if (e === '\\') {
        e = next();
        if (e === '\n') {
          if (eof) return fail('a backslash at the end of the file');
          continue;
        }
        if (e === 't') e = '\t';
        else if (e === 'b') e = '\b';
        else if (e === 'n') e = '\n';
        else if (e !== '\\' && e !== '"') return fail(`an unknown escape \\${e}`);
        value += e;
        continue;
      }
      if (e === '"') {
        quote = !quote;
        continue;
      }
      value += e;
    }
    entries.push({ section, key, value });
    if (eof) return { entries };
  }
}

/**
 * Every `section.key = value` of a config (the section lowercased, a subsection as written, the key
 * lowercased; a key without `=` reads `true`), as git reads it and as a line-by-line reading finds
 * it, both: a reader that judges what a config runs or names counts every value either way finds.
 * Where git refuses the text today (then git runs nothing), a one-line repair puts what the rest
 * says in force, and the line reading still sees it.
 */
export function configValues(text: string): { key: string; value: string }[] {
  const seen = new Set<string>();
  const out: { key: string; value: string }[] = [];
  const add = (key: string, value: string) => {
    const id = `${key}\0${value}`;
    if (seen.has(id)) return;
    seen.add(id);
    out.push({ key, value });
  };
  const parsed = parseGitConfig(text);
  if ('entries' in parsed) for (const e of parsed.entries) add(`${e.section}.${e.key}`, e.value ?? 'true');
  for (const { key, value } of lineValues(text)) add(key, value);
  return out;
}

/** The same, read line by line (`[section "sub"]`, `key = value`, a key on the header's line). */
function lineValues(text: string): { key: string; value: string }[] {
  const out: { key: string; value: string }[] = [];
  let section = '';
  for (const raw of text.split(/\r?\n/)) {
    let line = raw.trim();
    if (!line || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[\s*([^\]\s"]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]\s*(.*)$/.exec(line);
    if (header) {
      section =
        header[2] !== undefined ? `${header[1]!.toLowerCase()}.${header[2]}` : header[1]!.toLowerCase();
      // `[section.sub]` (old syntax): subsection lowercased by git too
      line = header[3]!.trim();
      if (!line) continue;
    }
    const kv = /^([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*))?$/.exec(line);
    if (!kv || !section) continue;
    const value = (kv[2] ?? 'true').replace(/\s[#;].*$/, '').replace(/^"(.*)"$/, '$1');
    out.push({ key: `${section}.${kv[1]!.toLowerCase()}`, value });
  }
  return out;
}
