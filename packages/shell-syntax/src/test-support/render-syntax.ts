import type * as Syntax from '../syntax-types.js';

/**
 * Renders a typed syntax tree as one line of text, every field included except source offsets
 * and statement texts, so a test can pin a whole tree in a string a reviewer can read:
 *
 * - sequence `[a; b&]` (`;`/`&` are the items' separators; `&!` background without a separator)
 * - simple command `cmd(A=w "ls" "-la")`, declaration `decl:export(… | args: A=w)`
 * - pipeline `pipe(a | b |& c)`, and-or `(a && b)`, subshell `subshell[…]`, group `group[…]`,
 *   `if[c] then[b] elif[c] then[b] else[b]`, `for x in (w w) do[…]` (`select`, `for x do[…]`),
 *   `while[c] do[b]` / `until…`, `case w in (p|p)[…] …`, `function f {…}`, test `[[ expr ]]` /
 *   `[ expr ]`, arithmetic `arith{exp: …}` (+ ` do[…]` for a C-style for), `!stmt`, `?type`
 * - redirects after a statement: ` >[2>&"1", <<EOF(quoted,-) body="…" parts: … backtick]`
 * - word: its parts joined by `+`; text `"v"` (unquoted), `s"v"` single, `d"v"` double,
 *   `c"v"` ANSI-C, `e"v"` backslash-escaped; `tilde(~u)`; `$x`, `${#!name[sub] op args ?}` (`?`:
 *   form unknown), `q` suffix when double-quoted; `$(…)` / `` `…` `` / `<(…)`; `arith(text){…}`;
 *   `locale(text){parts}`; `brace(text){parts}`; `?type(text)` unknown
 * - after the body: `unknowns:`, `comments:`, `errors:`, `continuations:` when not empty
 */
export function renderSyntax(tree: Syntax.SyntaxTree): string {
  let out = sequence(tree.body);
  if (tree.unknowns.length)
    out += ` unknowns: ${tree.unknowns.map((u) => `${u.nodeType}(${u.text})@${u.start}`).join(' ')}`;
  if (tree.comments.length) out += ` comments: ${tree.comments.map((c) => `${c.text}@${c.start}`).join(' ')}`;
  if (tree.errors.length)
    out += ` errors: ${tree.errors.map((e) => `${e.kind}:${e.nodeType}(${e.text})@${e.start}`).join(' ')}`;
  if (tree.lineContinuations.length) out += ` continuations: ${tree.lineContinuations.join(' ')}`;
  return out;
}

function sequence(seq: Syntax.Sequence): string {
  return `[${seq.items
    .map(
      (i) => statement(i.statement) + (i.separator ?? '') + (i.background && i.separator !== '&' ? '&!' : ''),
    )
    .join(' ')}]`;
}

function statement(st: Syntax.Statement): string {
  return body(st) + (st.redirects.length ? ` >[${st.redirects.map(redirect).join(', ')}]` : '');
}

function body(st: Syntax.Statement): string {
  switch (st.kind) {
    case 'simple': {
      const head = [...st.assignments.map(assignment), ...st.words.map(word)].join(' ');
      const args = st.argumentAssignments.length
        ? ` | args: ${st.argumentAssignments.map(assignment).join(' ')}`
        : '';
      return `${st.declaration !== undefined ? `decl:${st.declaration}` : 'cmd'}(${head}${args})`;
    }
    case 'pipeline':
      return `pipe(${st.stages.map((s, i) => (i ? `${st.operators[i - 1] ?? '?'} ` : '') + statement(s)).join(' ')})`;
    case 'and-or':
      return `(${statement(st.left)} ${st.operator} ${statement(st.right)})`;
    case 'subshell':
      return `subshell${sequence(st.body)}`;
    case 'group':
      return `group${sequence(st.body)}`;
    case 'if':
      return (
        st.clauses
          .map((c, i) => `${i ? 'elif' : 'if'}${sequence(c.condition)} then${sequence(c.body)}`)
          .join(' ') + (st.otherwise ? ` else${sequence(st.otherwise)}` : '')
      );
    case 'for':
      return `${st.select ? 'select' : 'for'} ${st.variable}${st.values ? ` in (${st.values.map(word).join(' ')})` : ''} do${sequence(st.body)}`;
    case 'while':
      return `${st.until ? 'until' : 'while'}${sequence(st.condition)} do${sequence(st.body)}`;
    case 'case':
      return `case ${word(st.value)} in ${st.items.map((i) => `(${i.patterns.map(word).join('|')})${sequence(i.body)}`).join(' ')}`;
    case 'function':
      return `function ${st.name} {${statement(st.body)}}`;
    case 'test':
      return st.bracket === '[['
        ? `[[ ${st.expression ? test(st.expression) : ''} ]]`
        : `[ ${st.expression ? test(st.expression) : ''} ]`;
    case 'arithmetic':
      return `arith{exp: ${st.expansions.map(part).join(' ')}}${st.body ? ` do${sequence(st.body)}` : ''}`;
    case 'negated':
      return `!${statement(st.body)}`;
    case 'unknown':
      return `?${st.nodeType}`;
  }
}

function test(e: Syntax.TestExpression): string {
  switch (e.kind) {
    case 'unary':
      return `(${e.operator} ${test(e.operand)})`;
    case 'binary':
      return `(${test(e.left)} ${e.operator} ${test(e.right)})`;
    case 'word':
      return word(e.word);
    case 'regex':
      return `regex(${e.text})`;
    case 'unknown':
      return `?${e.nodeType}(${e.text})`;
  }
}

function assignment(a: Syntax.Assignment): string {
  const value = a.array ? `(${a.array.map(word).join(' ')})` : a.value ? word(a.value) : '';
  return `${a.name}${a.subscript ?? ''}${a.append ? '+=' : '='}${value}`;
}

function redirect(r: Syntax.Redirect): string {
  let out = `${r.fd ?? ''}${r.fdVariable !== undefined ? `{${r.fdVariable}}` : ''}${r.operator}`;
  if (r.target) out += word(r.target);
  const h = r.heredoc;
  if (h) {
    const flags = [h.quoted ? 'quoted' : '', h.stripTabs ? '-' : ''].filter(Boolean).join(',');
    out += `${h.delimiter}${flags ? `(${flags})` : ''} body=${JSON.stringify(h.body)}`;
    if (h.parts.length) out += ` parts: ${h.parts.map(part).join(' ')}`;
    if (h.backtick) out += ' backtick';
  }
  return out;
}

function word(w: Syntax.Word): string {
  return w.parts.map(part).join('+');
}

const QUOTING: Record<Syntax.Quoting, string> = {
  none: '',
  single: 's',
  double: 'd',
  'ansi-c': 'c',
  escape: 'e',
};

function part(p: Syntax.WordPart): string {
  switch (p.kind) {
    case 'text':
      return `${QUOTING[p.quoting]}${JSON.stringify(p.value)}`;
    case 'tilde':
      return `tilde(${p.prefix})`;
    case 'param': {
      const inner =
        (p.length ? '#' : '') +
        (p.indirect ? '!' : '') +
        p.name +
        (p.subscript !== undefined ? `[${p.subscript}]` : '') +
        (p.op !== undefined ? ` ${p.op}` : '') +
        (p.args.length ? ` ${p.args.map(word).join(' ')}` : '') +
        (p.form === 'unknown' ? ' ?' : '');
      const form = p.form === 'operator' && p.op === undefined ? '!op' : '';
      return `${p.braced ? `\${${inner}}` : `$${inner}`}${form}${p.quoted ? 'q' : ''}`;
    }
    case 'command-sub':
      return `${p.backtick ? `\`${sequence(p.body)}\`` : `$(${sequence(p.body)})`}${p.quoted ? 'q' : ''}`;
    case 'process-sub':
      return `${p.direction}(${sequence(p.body)})`;
    case 'arith':
      return `arith(${p.text})${p.quoted ? 'q' : ''}{${p.expansions.map(part).join(' ')}}`;
    case 'locale':
      return `locale(${p.text}){${p.parts.map(part).join('+')}}`;
    case 'brace':
      return `brace(${p.text}){${p.parts.map(part).join('+')}}`;
    case 'unknown':
      return `?${p.nodeType}(${p.text})`;
  }
}
