import type { Syntax } from '@conch/shell-syntax';
import type { CodeSource } from './facts.js';
import { evaluate, literalArg, runtimeArg, type Arg, type ShellState } from './words.js';

// Where interpreters take the code they run from — what the download rules judge — and the text a
// literal pipeline stage feeds a shell on stdin (judged like a -c string). Word splitting of argv.

/** How a shell is told what to run: a `-c` string, a script file, or stdin. */
export function shellInvocation(
  args: Arg[],
  dynamicArgs: boolean,
): (
  | { kind: 'string'; script: Arg }
  | { kind: 'file'; file: Arg }
  | { kind: 'stdin' }
  | { kind: 'opaque'; reason: string }
) & { code: CodeSource } {
  let wantsString = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const v = a.value;
    if (v === undefined) {
      if (wantsString) return { kind: 'string', script: a, code: 'dynamic' };
      if (a.subs.some((s) => s.kind === 'process-sub')) return { kind: 'file', file: a, code: 'stdin' };
      return { kind: 'opaque', reason: `shell argument ${a.raw} is only known at run time`, code: 'dynamic' };
    }
    if (v === '--' || v === '-') {
      const next = args[i + 1];
      if (wantsString && next)
        return { kind: 'string', script: next, code: next.value === undefined ? 'dynamic' : 'literal' };
      if (v === '-' || !next) return { kind: 'stdin', code: 'stdin' };
      return { kind: 'file', file: next, code: fileSource(next) };
    }
    if (v === '--rcfile' || v === '--init-file' || v === '-o' || v === '+o' || v === '-O' || v === '+O') {
      i++;
      continue;
    }
    if (v.startsWith('--')) continue;
    if (/^[-+][A-Za-z]+$/.test(v)) {
      if (v.startsWith('-') && v.includes('c')) wantsString = true;
      if (v.startsWith('-') && v.includes('s') && !wantsString) return { kind: 'stdin', code: 'stdin' };
      continue;
    }
    if (wantsString) return { kind: 'string', script: a, code: 'literal' };
    return { kind: 'file', file: a, code: fileSource(a) };
  }
  if (wantsString)
    return dynamicArgs
      ? { kind: 'string', script: runtimeArg('(a command string supplied at run time)'), code: 'dynamic' }
      : { kind: 'opaque', reason: 'shell -c without a command string', code: 'literal' };
  return { kind: 'stdin', code: dynamicArgs ? 'dynamic' : 'stdin' };
}

/** Where a script path argument really reads from. */
export function fileSource(a: Arg): CodeSource {
  if (a.subs.some((s) => s.kind === 'process-sub')) return 'stdin';
  const v = a.value;
  if (v === undefined) return 'dynamic';
  if (v === '-' || /^\/dev\/(stdin|fd\/\d+|tcp\/|udp\/)|^\/proc\/[^/]+\/fd\//.test(v)) return 'stdin';
  return 'file';
}

/** Where an interpreter (python, node, perl, …) takes its program from. */
export function interpreterSource(base: string, args: Arg[], dynamicArgs: boolean): CodeSource {
  const codeFlag = /^python|^pypy/.test(base)
    ? /^-[A-Za-z]*c$/
    : /^(node|nodejs|deno|bun|ts-node|tsx)$/.test(base)
      ? /^(-e|-p|--eval|--print)$/
      : /^php/.test(base)
        ? /^-[A-Za-z]*[rBRFE]$/
        : /^(awk|gawk|mawk|nawk)$/.test(base)
          ? /^$/
          : /^-[A-Za-z]*[eE]$/;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const v = a.value;
    if (v === undefined) return a.subs.some((s) => s.kind === 'process-sub') ? 'stdin' : 'dynamic';
    if (codeFlag.test(v)) {
      const code = args[i + 1];
      if (!code) return dynamicArgs ? 'dynamic' : 'stdin';
      return code.value === undefined ? 'dynamic' : 'literal';
    }
    if (/^python|^pypy/.test(base) && /^-[A-Za-z]*m$/.test(v)) return 'file';
    if (/^(awk|gawk|mawk|nawk)$/.test(base)) {
      if (v === '-f') return args[i + 1] ? fileSource(args[i + 1]!) : 'stdin';
      if (v.startsWith('-')) continue;
      return 'literal';
    }
    if (v === 'run' && /^(deno|bun)$/.test(base)) continue;
    if (v.startsWith('-') && v !== '-') continue;
    return fileSource(a);
  }
  return dynamicArgs ? 'dynamic' : 'stdin';
}

/** What a pipeline stage writes when it is literal: `echo words`, `printf 'text'` without conversions. */
export function literalOutput(st: Syntax.Statement, shell: ShellState): string | undefined {
  if (st.kind !== 'simple' || st.assignments.length > 0) return undefined;
  const args = splitFields(st.words.map((w) => evaluate(w, shell)));
  if (args.some((a) => a.value === undefined)) return undefined;
  const [name, ...rest] = args.map((a) => a.value!);
  // `cat <<'EOF' … EOF | sh`, `cat <<< 'text' | bash`: cat passes its here-document through.
  if (name === 'cat' && rest.length === 0 && st.redirects.length === 1)
    return inputText(st.redirects[0]!, shell);
  if (st.redirects.length > 0) return undefined;
  if (name === 'echo') {
    let newline = true;
    while (rest[0] !== undefined && /^-[nEe]+$/.test(rest[0])) {
      if (rest[0].includes('e')) return undefined;
      if (rest[0].includes('n')) newline = false;
      rest.shift();
    }
    return `${rest.join(' ')}${newline ? '\n' : ''}`;
  }
  if (name === 'printf' && rest.length === 1 && !/[%\\]/.test(rest[0]!)) return rest[0];
  return undefined;
}

/** The text a here-document or here-string feeds to stdin, when the gate knows it. */
function inputText(r: Syntax.Redirect, shell: ShellState): string | undefined {
  if (r.heredoc) {
    if (r.heredoc.quoted) return r.heredoc.body;
    // Unquoted: the body as written when nothing in it expands (no expansions, no backslashes).
    return r.heredoc.parts.length === 0 && !/[\\$`]/.test(r.heredoc.body) ? r.heredoc.body : undefined;
  }
  if (r.operator === '<<<' && r.target) {
    const v = evaluate(r.target, shell).value;
    return v === undefined ? undefined : `${v}\n`;
  }
  return undefined;
}

/** argv after field splitting: a known word that expands to several fields is several words. */
export function splitFields(args: Arg[]): Arg[] {
  const out: Arg[] = [];
  for (const a of args) {
    if (a.fields && a.fields.length !== 1)
      for (const f of a.fields) {
        const arg = literalArg(f);
        arg.raw = a.raw;
        out.push(arg);
      }
    else out.push(a);
  }
  return out;
}
