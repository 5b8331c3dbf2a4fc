import { andOrChain, type Syntax } from '@conch/shell-syntax';

/** The shell that will run the command: what the gate must read it as. */
export type Dialect = 'bash' | 'sh' | 'zsh';

/** Constructs the shell that will run the command reads differently from bash. */
export function dialectRisk(tree: Syntax.SyntaxTree, dialect: Dialect): string | undefined {
  if (dialect === 'bash') return undefined;
  let found: string | undefined;
  const word = (w: Syntax.Word) => {
    if (dialect === 'zsh') {
      const sub = zshSubscript(w.parts);
      if (sub) found = sub;
    }
    for (const p of w.parts) {
      if (found) return;
      if (dialect === 'sh') {
        if (p.kind === 'text' && p.quoting === 'ansi-c') found = `$'…' is not ANSI-C quoting in /bin/sh`;
        else if (p.kind === 'locale' || p.kind === 'process-sub' || p.kind === 'brace')
          found = `${p.kind} is a bash construct /bin/sh reads differently`;
        else if (p.kind === 'param' && p.op && !/^(:?[-=?+]|##?|%%?)$/.test(p.op))
          found = `\${…${p.op}…} is a bash expansion /bin/sh does not have`;
      } else if (p.kind === 'text' && p.quoting === 'none' && /[()]|^=/.test(p.value)) {
        found = `zsh reads ${JSON.stringify(w.text)} as a glob qualifier or an = expansion, which bash does not`;
      }
    }
  };
  const seq = (s: Syntax.Sequence) => s.items.forEach((i) => stmt(i.statement));
  const stmt = (st: Syntax.Statement): void => {
    if (found) return;
    for (const r of st.redirects) {
      if (
        dialect === 'sh' &&
        /^(&>>?|<<<|>&)$/.test(r.operator) &&
        !(r.operator === '>&' && r.target && /^\d+$/.test(r.target.text))
      )
        found = `${r.operator} is a bash redirection /bin/sh reads differently`;
      if (r.target) word(r.target);
    }
    switch (st.kind) {
      case 'simple':
        st.words.forEach(word);
        st.assignments.forEach((a) => {
          if (a.value) word(a.value);
          if (dialect === 'sh' && (a.array || a.subscript))
            found = 'arrays are a bash construct /bin/sh does not have';
        });
        return;
      case 'pipeline':
        if (dialect === 'sh' && st.operators.includes('|&'))
          found = '|& is a bash construct /bin/sh reads differently';
        st.stages.forEach(stmt);
        return;
      case 'and-or':
        for (const item of andOrChain(st).items) stmt(item);
        return;
      case 'subshell':
      case 'group':
        seq(st.body);
        return;
      case 'test':
        if (dialect === 'sh' && st.bracket === '[[')
          found = '[[ … ]] is a bash construct /bin/sh does not have';
        return;
      case 'function':
        if (dialect === 'sh' && st.text.startsWith('function'))
          found = 'the function keyword is a bash construct';
        stmt(st.body);
        return;
      case 'negated':
        stmt(st.body);
        return;
      case 'if':
        st.clauses.forEach((c) => {
          seq(c.condition);
          seq(c.body);
        });
        if (st.otherwise) seq(st.otherwise);
        return;
      case 'for':
        if (dialect === 'sh' && st.select) found = 'select is a bash construct';
        (st.values ?? []).forEach(word);
        seq(st.body);
        return;
      case 'while':
        seq(st.condition);
        seq(st.body);
        return;
      case 'case':
        st.items.forEach((i) => seq(i.body));
        return;
      default:
        return;
    }
  };
  seq(tree.body);
  return found;
}

/**
 * zsh reads `$name[…]` (no braces) as a subscript and evaluates it, quoted text included
 * (`$x['$(cmd)']` runs cmd); bash reads a glob after `$name`. Only literal numbers, ranges and
 * negative indexes are known to be harmless.
 */
function zshSubscript(parts: readonly Syntax.WordPart[]): string | undefined {
  for (let i = 0; i < parts.length - 1; i++) {
    const p = parts[i]!;
    const next = parts[i + 1]!;
    if (p.kind !== 'param' || p.braced || next.kind !== 'text' || !next.value.startsWith('[')) continue;
    let text = '';
    let literal = true;
    for (let j = i + 1; j < parts.length; j++) {
      const q = parts[j]!;
      if (q.kind !== 'text' || (q.quoting !== 'none' && q.quoting !== 'double')) {
        literal = false;
        break;
      }
      text += q.value;
      if (text.includes(']')) break;
    }
    if (!literal || !/^\[[-\d, ]*\]/.test(text))
      return `zsh evaluates the subscript in ${JSON.stringify(textOf(parts))} (quoted text included), which can run commands`;
  }
  return undefined;
}

function textOf(parts: readonly Syntax.WordPart[]): string {
  return parts
    .map((p) => (p.kind === 'text' ? p.value : p.kind === 'param' ? `$${p.name}` : '…'))
    .join('')
    .slice(0, 80);
}
