/**
 * Mercurial's config file format (`hg help config`, "Syntax"), read the way hg's own parser reads
 * it (mercurial/config.py): `[section]` headers, `name = value` items whose value continues on
 * following lines that start with whitespace, `%include path` and `%unset name` directives, and
 * lines starting with `#` or `;` as comments. Written here because no npm package parses hgrc, and
 * an INI parser differs exactly where it matters (continuations, directives, a `;` inside a value).
 */

export interface HgrcItem {
  /** Lowercase section and name, `section.name` (hg compares section names as written; lowercase here for matching). */
  key: string;
  /** The name as written. */
  name: string;
  section: string;
  value: string;
}

export interface Hgrc {
  items: HgrcItem[];
  /** `%include` targets as written (relative to the including file's directory, `~` not expanded). */
  includes: string[];
}

const SECTION = /^\[([^[]+)\]/;
const ITEM = /^([^=\s][^=]*?)\s*=\s*((.*\S)?)/;
const CONTINUATION = /^\s+(\S|\S.*\S)\s*$/;
const INCLUDE = /^%include\s+(.*\S)\s*$/;
const UNSET = /^%unset\s+(\S+)/;
const COMMENT = /^(;|#)/;
const EMPTY = /^(;|#|\s*$)/;

/** The items and includes of an hgrc text, in order; a line hg would reject is skipped. */
export function parseHgrc(text: string): Hgrc {
  const items: HgrcItem[] = [];
  const includes: string[] = [];
  let section = '';
  let last: HgrcItem | undefined;
  for (const line of text.replace(/^\uFEFF/, '').split(/\r?\n/)) {
    if (last) {
      // A comment inside a continued value is skipped and the value goes on.
      if (COMMENT.test(line)) continue;
      const continued = CONTINUATION.exec(line);
      if (continued) {
        last.value = last.value ? `${last.value}\n${continued[1]}` : continued[1]!;
        continue;
      }
      last = undefined;
    }
    if (EMPTY.test(line)) continue;
    const header = SECTION.exec(line);
    if (header) {
      section = header[1]!.trim();
      continue;
    }
    const include = INCLUDE.exec(line);
    if (include) {
      includes.push(include[1]!);
      continue;
    }
    const unset = UNSET.exec(line);
    if (unset) {
      // `%unset name` drops what the section set so far (an earlier item, or one included).
      const key = `${section}.${unset[1]}`.toLowerCase();
      for (let i = items.length - 1; i >= 0; i--) if (items[i]!.key === key) items.splice(i, 1);
      continue;
    }
    const item = ITEM.exec(line);
    if (item) {
      const name = item[1]!;
      last = { key: `${section}.${name}`.toLowerCase(), name, section, value: item[2] ?? '' };
      items.push(last);
    }
  }
  return { items, includes };
}
