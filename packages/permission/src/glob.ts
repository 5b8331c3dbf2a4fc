/**
 * A small glob matcher for protected-path patterns: `**` crosses directories, `*` and `?` do not,
 * `[abc]` classes; a pattern without `/` matches the base name anywhere. Leading dots are matched
 * literally by `*` (as the shell does when `dotglob` is off) only when `shellDot` is set.
 */
export function globToRegExp(glob: string, options: { shellDot?: boolean } = {}): RegExp {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i]!;
    if (ch === '*') {
      if (glob[i + 1] === '*') {
        const slash = glob[i + 2] === '/';
        re += slash ? '(?:.*/)?' : '.*';
        i += slash ? 2 : 1;
      } else {
        const atStart = i === 0 || glob[i - 1] === '/';
        re += options.shellDot && atStart ? '(?!\\.)[^/]*' : '[^/]*';
      }
    } else if (ch === '?') {
      re += '[^/]';
    } else if (ch === '[') {
      const close = glob.indexOf(']', i + 2);
      if (close < 0) {
        re += '\\[';
      } else {
        let body = glob.slice(i + 1, close).replace(/\\/g, '\\\\');
        if (body.startsWith('!')) body = `^${body.slice(1)}`;
        re += `[${body}]`;
        i = close;
      }
    } else if (ch === '\\' && i + 1 < glob.length) {
      re += escapeRegExp(glob[++i]!);
    } else {
      re += escapeRegExp(ch);
    }
  }
  return new RegExp(`^${re}$`);
}

export function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

export function hasGlobChars(text: string): boolean {
  return /[*?[]/.test(text);
}
