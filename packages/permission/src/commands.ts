/** One argv word: its value after quote removal, whether it is literal, and its source text. */
export interface Word {
  value: string;
  literal: boolean;
  raw: string;
}

export const PRIVILEGE = new Set(['sudo', 'sudoedit', 'su', 'doas', 'pkexec', 'run0', 'runuser', 'calife']);
export const DOWNLOADERS = new Set([
  'curl',
  'wget',
  'fetch',
  'aria2c',
  'http',
  'https',
  'xh',
  'lwp-request',
  'GET',
]);
export const SHELLS = new Set(['sh', 'bash', 'zsh', 'dash', 'ksh', 'ash', 'mksh', 'fish', 'yash', 'posh']);
const INTERPRETER_RE =
  /^(python[\d.]*|pypy[\d.]*|node|nodejs|perl[\d.]*|ruby[\d.]*|php[\d.]*|deno|bun|lua[\d.]*|luajit|tclsh|pwsh|powershell|osascript|Rscript|R)$/;
/** Variables that change what a later command runs or loads. */
export const DANGEROUS_ENV =
  /^(PATH|LD_[A-Z_]+|DYLD_[A-Z_]+|BASH_ENV|ENV|BASH_FUNC_.*|SHELLOPTS|BASHOPTS|PS4|PROMPT_COMMAND|IFS|CDPATH|GLOBIGNORE|HOME|NODE_OPTIONS|NODE_PATH|PYTHONPATH|PYTHONSTARTUP|PYTHONHOME|PERL5OPT|PERL5LIB|PERLLIB|RUBYOPT|RUBYLIB|GIT_[A-Z_]+|PAGER|MANPAGER|EDITOR|VISUAL|LESSOPEN|LESSCLOSE|SSH_ASKPASS|SUDO_ASKPASS|TMPDIR|ZDOTDIR|XDG_CONFIG_HOME|npm_config_.*|NPM_CONFIG_.*)$/;
/** Directories where a command given by path is the system's own binary. */
export const SYSTEM_DIRS = new Set(['/bin', '/usr/bin', '/usr/local/bin', '/sbin', '/usr/sbin']);

export function isInterpreter(base: string): boolean {
  return SHELLS.has(base) || INTERPRETER_RE.test(base) || base === 'busybox';
}

export function baseName(name: string): string {
  const i = name.lastIndexOf('/');
  return i >= 0 ? name.slice(i + 1) : name;
}

/** What a wrapper runs. */
export type Unwrapped =
  | { kind: 'inner'; words: Word[]; dynamicArgs?: boolean; cwdChange?: boolean; env?: Word[] }
  /** The wrapper runs a command line it receives as one string (`env -S`, `watch`, `flock -c`). */
  | { kind: 'string'; script: Word }
  /** No command: the wrapper alone (`env`, `time`, `command -v x`) behaves as a plain command. */
  | { kind: 'none'; safe?: boolean }
  | { kind: 'opaque'; reason: string };

function skipOptions(
  args: Word[],
  withValue: RegExp,
  flagOnly: RegExp,
): { rest: Word[]; opaque?: string } | undefined {
  let i = 0;
  while (i < args.length) {
    const a = args[i]!;
    if (!a.literal) return { rest: [], opaque: `option ${a.raw} is not literal` };
    if (a.value === '--') {
      i++;
      break;
    }
    if (!a.value.startsWith('-') || a.value === '-') break;
    if (withValue.test(a.value)) i += 2;
    else if (flagOnly.test(a.value)) i += 1;
    else return { rest: [], opaque: `unknown option ${a.value}` };
  }
  return { rest: args.slice(i) };
}

function inner(
  res: { rest: Word[]; opaque?: string } | undefined,
  extra: Partial<Unwrapped> = {},
): Unwrapped {
  if (!res) return { kind: 'none' };
  if (res.opaque) return { kind: 'opaque', reason: res.opaque };
  if (res.rest.length === 0) return { kind: 'none' };
  return { kind: 'inner', words: res.rest, ...(extra as object) };
}

/** Looks through a wrapper command; undefined when `base` is not a wrapper. */
export function unwrap(base: string, args: Word[]): Unwrapped | undefined {
  switch (base) {
    case 'env': {
      const env: Word[] = [];
      let cwdChange = false;
      let i = 0;
      for (; i < args.length; i++) {
        const a = args[i]!;
        if (!a.literal) return { kind: 'opaque', reason: `env argument ${a.raw} is not literal` };
        const v = a.value;
        if (v === '--') {
          i++;
          break;
        }
        if (v === '-S' || v === '--split-string') {
          const s = args[i + 1];
          return s ? { kind: 'string', script: s } : { kind: 'none' };
        }
        if (v.startsWith('--split-string=')) return { kind: 'string', script: { ...a, value: v.slice(15) } };
        if (v.startsWith('-S') && v.length > 2)
          return { kind: 'string', script: { ...a, value: v.slice(2) } };
        if (v === '-u' || v === '--unset') {
          i++;
          continue;
        }
        if (v === '-C' || v === '--chdir') {
          cwdChange = true;
          i++;
          continue;
        }
        if (v.startsWith('--chdir=') || (v.startsWith('-C') && v.length > 2)) {
          cwdChange = true;
          continue;
        }
        if (/^(-[i0v]+|--ignore-environment|--null|--debug|--unset=.*|-u.+)$/.test(v) || v === '-') continue;
        if (v.startsWith('-')) return { kind: 'opaque', reason: `unknown env option ${v}` };
        if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(v)) {
          env.push(a);
          continue;
        }
        break;
      }
      const rest = args.slice(i);
      if (rest.length === 0) return { kind: 'none' };
      return { kind: 'inner', words: rest, cwdChange, env };
    }
    case 'command': {
      const lookup = args.some((a) => a.literal && /^-[pvV]*[vV][pvV]*$/.test(a.value));
      if (lookup) return { kind: 'none', safe: true };
      return inner(skipOptions(args, /^$/, /^-p$/));
    }
    case 'builtin':
      return inner({ rest: args });
    case 'exec':
      return inner(skipOptions(args, /^-a$/, /^-[cl]+$/));
    case 'nice':
      return inner(skipOptions(args, /^(-n|--adjustment)$/, /^(-\d+|-n-?\d+|--adjustment=-?\d+)$/));
    case 'nohup':
      return inner(skipOptions(args, /^$/, /^$/));
    case 'setsid':
      return inner(skipOptions(args, /^$/, /^-[cfw]+$|^--(ctty|fork|wait)$/));
    case 'ionice':
      return inner(skipOptions(args, /^-[cnp]$/, /^-[cnp]\d+$|^-t$/));
    case 'chronic':
    case 'unbuffer':
      return inner({ rest: args });
    case 'timeout': {
      const res = skipOptions(
        args,
        /^-[sk]$/,
        /^(--signal=.+|--kill-after=.+|--preserve-status|--foreground|-v|--verbose|-[sk].+)$/,
      );
      if (!res || res.opaque) return inner(res);
      return inner({ rest: res.rest.slice(1) });
    }
    case 'time':
      // GNU time's -o writes a file; callers see it as a write through `writesFile`.
      return inner(
        skipOptions(args, /^-[fo]$/, /^(-[pav]+|--portability|--append|--verbose|--format=.+|--output=.+)$/),
      );
    case 'stdbuf':
      return inner(skipOptions(args, /^-[ioe]$/, /^(-[ioe].+|--(input|output|error)=.+)$/));
    case 'taskset': {
      const res = skipOptions(args, /^$/, /^-[ac]+$|^--(all-tasks|cpu-list)$/);
      if (!res || res.opaque) return inner(res);
      return inner({ rest: res.rest.slice(1) });
    }
    case 'xargs': {
      const res = skipOptions(
        args,
        /^(-[ILnPdEsa]|--arg-file|--delimiter|--max-args|--max-procs|--max-lines|--eof|--max-chars|--replace|--process-slot-var)$/,
        /^(-[0rtpxo]+|-[ILnPdEsa].+|-[il].*|--null|--no-run-if-empty|--verbose|--interactive|--exit|--open-tty|--show-limits|--(arg-file|delimiter|max-args|max-procs|max-lines|eof|max-chars|replace)=.*)$/,
      );
      if (res?.opaque) return { kind: 'opaque', reason: res.opaque };
      const rest = res?.rest.length ? res.rest : [{ value: 'echo', literal: true, raw: 'echo' }];
      return { kind: 'inner', words: rest, dynamicArgs: true };
    }
    case 'watch': {
      const res = skipOptions(
        args,
        /^(-n|--interval|-d|-q)$/,
        /^(-[bcdegprtwx]+|-n.+|--(beep|color|differences|errexit|chgexit|precise|no-title|no-wrap|exec)(=.*)?|--interval=.+)$/,
      );
      if (!res || res.opaque) return inner(res);
      if (res.rest.length === 0) return { kind: 'none' };
      if (!res.rest.every((w) => w.literal))
        return { kind: 'opaque', reason: 'watch runs a non-literal command' };
      const joined = res.rest.map((w) => w.value).join(' ');
      return { kind: 'string', script: { value: joined, literal: true, raw: joined } };
    }
    case 'flock': {
      const res = skipOptions(
        args,
        /^(-w|--timeout|-E|--conflict-exit-code)$/,
        /^(-[sxnuoFe]+|--(shared|exclusive|nonblock|unlock|close|no-fork|verbose))$/,
      );
      if (!res || res.opaque) return inner(res);
      const rest = res.rest.slice(1);
      if (rest[0]?.literal && (rest[0].value === '-c' || rest[0].value === '--command')) {
        return rest[1] ? { kind: 'string', script: rest[1] } : { kind: 'none' };
      }
      return inner({ rest });
    }
    default:
      return undefined;
  }
}

/** How a shell is told what to run: a `-c` string, a script file, or stdin. */
export function shellInvocation(
  args: Word[],
):
  | { kind: 'string'; script: Word }
  | { kind: 'file'; file: Word }
  | { kind: 'stdin' }
  | { kind: 'opaque'; reason: string } {
  let wantsString = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (!a.literal) {
      if (wantsString) return { kind: 'string', script: a };
      return { kind: 'opaque', reason: `shell argument ${a.raw} is not literal` };
    }
    const v = a.value;
    if (v === '--' || v === '-') {
      const next = args[i + 1];
      if (wantsString && next) return { kind: 'string', script: next };
      if (v === '-' || !next) return { kind: 'stdin' };
      return { kind: 'file', file: next };
    }
    if (v === '--rcfile' || v === '--init-file' || v === '-o' || v === '+o' || v === '-O' || v === '+O') {
      i++;
      continue;
    }
    if (v.startsWith('--')) continue;
    if (/^[-+][A-Za-z]+$/.test(v)) {
      if (v.startsWith('-') && v.includes('c')) wantsString = true;
      if (v.startsWith('-') && v.includes('s') && !wantsString) return { kind: 'stdin' };
      continue;
    }
    if (wantsString) return { kind: 'string', script: a };
    return { kind: 'file', file: a };
  }
  return wantsString ? { kind: 'opaque', reason: 'shell -c without a command string' } : { kind: 'stdin' };
}

/** Whether an interpreter invoked with `args` reads its program from stdin. */
export function readsProgramFromStdin(base: string, args: Word[]): boolean {
  if (SHELLS.has(base)) return shellInvocation(args).kind === 'stdin';
  if (base === 'busybox')
    return (
      args[0] !== undefined &&
      SHELLS.has(args[0].value) &&
      readsProgramFromStdin(args[0].value, args.slice(1))
    );
  const codeFlags = /^python|^pypy/.test(base)
    ? /^-[A-Za-z]*[cm]/
    : /^(node|nodejs|deno|bun)$/.test(base)
      ? /^(-e|-p|--eval|--print|eval|run|x|-r)$/
      : /^php/.test(base)
        ? /^-[rBRFE]/
        : /^-[A-Za-z]*[eE]/;
  for (const a of args) {
    if (a.value === '-' || a.value === '/dev/stdin') return true;
    if (codeFlags.test(a.value)) return false;
    if (!a.value.startsWith('-')) return false;
  }
  return true;
}

/** Why a known read-only command is not safe with these arguments; undefined when it is safe. */
export type SafeCheck = (args: Word[]) => string | undefined;

const anyArgs: SafeCheck = () => undefined;

function literalArgs(args: Word[]): string | undefined {
  const bad = args.find((a) => !a.literal);
  return bad ? `argument ${bad.raw} is not literal (it could expand to an option)` : undefined;
}

function forbidOptions(re: RegExp, what: string): SafeCheck {
  return (args) => literalArgs(args) ?? (args.some((a) => re.test(a.value)) ? `${what}` : undefined);
}

function maxPositionals(n: number, what: string): SafeCheck {
  return (args) => {
    const lit = literalArgs(args);
    if (lit) return lit;
    const positionals = args.filter((a) => !a.value.startsWith('-') || a.value === '-');
    return positionals.length > n ? what : undefined;
  };
}

const SED_SIMPLE_CMD = /^(?:[pdDnNPgGhHxlq=]|[qQ]\s*\d*|[{}]|y(.)(?:(?!\1).)*\1(?:(?!\1).)*\1)$/;

function sedScriptSafe(script: string): boolean {
  const pieces = script.split(/[;\n]/);
  for (let piece of pieces) {
    piece = piece.trim();
    if (piece === '') continue;
    piece = piece.replace(
      /^(?:\d+|\$|\/(?:[^/\\]|\\.)*\/)(?:\s*,\s*(?:\d+|\$|\/(?:[^/\\]|\\.)*\/|[+~]\d+))?\s*!?\s*/,
      '',
    );
    if (piece === '' || SED_SIMPLE_CMD.test(piece)) continue;
    if (piece.startsWith('s') && piece.length > 1) {
      const sepChar = piece[1]!;
      if (/[\s\\\n]/.test(sepChar)) return false;
      let i = 2;
      let seen = 0;
      while (i < piece.length && seen < 2) {
        if (piece[i] === '\\') i += 2;
        else {
          if (piece[i] === sepChar) seen++;
          i++;
        }
      }
      if (seen < 2) return false;
      if (/^[gIiMm0-9p]*$/.test(piece.slice(i))) continue;
    }
    return false;
  }
  return true;
}

const sedCheck: SafeCheck = (args) => {
  const lit = literalArgs(args);
  if (lit) return lit;
  const scripts: string[] = [];
  let sawScriptOption = false;
  for (let i = 0; i < args.length; i++) {
    const v = args[i]!.value;
    if (/^(-i|--in-place)/.test(v) || /^-[a-zA-Z]*i/.test(v)) return 'sed -i edits files in place';
    if (/^(-f|--file)/.test(v)) return 'sed -f runs a script file the gate cannot read';
    if (v === '-e' || v === '--expression') {
      scripts.push(args[++i]?.value ?? '');
      sawScriptOption = true;
    } else if (v.startsWith('--expression=')) {
      scripts.push(v.slice(13));
      sawScriptOption = true;
    } else if (v.startsWith('-')) {
      if (
        !/^(-[nErsuz]+|--(quiet|silent|regexp-extended|separate|unbuffered|null-data|posix|debug|sandbox))$/.test(
          v,
        )
      )
        return `sed option ${v} is not known to be read-only`;
    } else if (!sawScriptOption) {
      scripts.push(v);
      sawScriptOption = true;
    }
  }
  const bad = scripts.find((s) => !sedScriptSafe(s));
  return bad === undefined
    ? undefined
    : `sed script ${JSON.stringify(bad)} may write files or run commands (w, e, r)`;
};

const GIT_READ = new Set([
  'status',
  'log',
  'diff',
  'show',
  'blame',
  'rev-parse',
  'ls-files',
  'ls-tree',
  'describe',
  'shortlog',
  'cat-file',
  'grep',
  'reflog',
  'rev-list',
  'merge-base',
  'name-rev',
  'whatchanged',
  'version',
  'help',
  'branch',
  'tag',
  'remote',
  'stash',
]);
const GIT_FORBIDDEN =
  /^(--output(=.*)?|-O.*|--open-files-in-pager(=.*)?|--ext-diff|--textconv|--exec(=.*)?|--upload-pack(=.*)?|--paginate|-p=.*)$/;

const gitCheck: SafeCheck = (args) => {
  const lit = literalArgs(args);
  if (lit) return lit;
  let i = 0;
  for (; i < args.length; i++) {
    const v = args[i]!.value;
    if (v === '-C') {
      i++;
      continue;
    }
    if (
      v === '--no-pager' ||
      v === '-P' ||
      v === '--no-optional-locks' ||
      v === '--literal-pathspecs' ||
      v === '--no-replace-objects'
    )
      continue;
    if (v.startsWith('-'))
      return `git ${v} can change what git runs (config, pager, exec path, git dir); only plain read-only subcommands are safe`;
    break;
  }
  const sub = args[i]?.value;
  if (sub === undefined) return undefined;
  if (!GIT_READ.has(sub)) return `git ${sub} is not a read-only git command`;
  const rest = args.slice(i + 1).map((a) => a.value);
  const forbidden = rest.find((v) => GIT_FORBIDDEN.test(v));
  if (forbidden) return `git ${sub} ${forbidden} writes a file or runs an external program`;
  const positionals = rest.filter((v) => !v.startsWith('-'));
  if (sub === 'branch') {
    if (
      rest.some((v) =>
        /^(-[dDmMcCfu]|--(delete|move|copy|force|set-upstream-to|unset-upstream|edit-description|track|create-reflog))/.test(
          v,
        ),
      )
    )
      return 'git branch with that option changes branches';
    if (
      positionals.length &&
      !rest.some(
        (v) =>
          v === '--list' ||
          v === '-l' ||
          v.startsWith('--contains') ||
          v.startsWith('--merged') ||
          v.startsWith('--no-merged') ||
          v.startsWith('--points-at'),
      )
    )
      return 'git branch <name> creates a branch';
  }
  if (
    sub === 'tag' &&
    positionals.length &&
    !rest.some(
      (v) => v === '-l' || v === '--list' || v.startsWith('--contains') || v.startsWith('--points-at'),
    )
  )
    return 'git tag <name> creates a tag';
  if (sub === 'tag' && rest.some((v) => /^-[dsafu]|^--(delete|sign|annotate|force)/.test(v)))
    return 'git tag with that option changes tags';
  if (
    sub === 'remote' &&
    rest.some((v) => !/^(-v|--verbose|show|get-url)$/.test(v) && !positionals.includes(v))
  )
    return 'git remote with that option changes remotes';
  if (sub === 'remote' && positionals.length && !['show', 'get-url'].includes(positionals[0]!))
    return `git remote ${positionals[0]} changes remotes`;
  if (sub === 'stash' && !['list', 'show'].includes(positionals[0] ?? ''))
    return 'git stash without list/show changes the working tree';
  if (sub === 'reflog' && positionals.length && !['show'].includes(positionals[0]!))
    return `git reflog ${positionals[0]} changes the reflog`;
  return undefined;
};

const findCheck: SafeCheck = (args) => {
  const lit = literalArgs(args);
  if (lit) return lit;
  // -exec / -execdir / -ok commands are decided separately, like any other command.
  const bad = args.find((a) => /^-(delete|fprint0?|fprintf|fls)$/.test(a.value));
  return bad ? `find ${bad.value} writes or deletes files` : undefined;
};

/** Commands known to only read, with the argument checks that keep them read-only. */
export const SAFE_COMMANDS: Record<string, SafeCheck> = {
  ls: anyArgs,
  cat: anyArgs,
  head: anyArgs,
  tail: anyArgs,
  wc: anyArgs,
  grep: anyArgs,
  egrep: anyArgs,
  fgrep: anyArgs,
  rg: forbidOptions(/^--pre(-glob)?(=.*)?$/, 'rg --pre runs a program on every file'),
  pwd: anyArgs,
  echo: anyArgs,
  printf: anyArgs,
  true: anyArgs,
  false: anyArgs,
  test: anyArgs,
  '[': anyArgs,
  which: anyArgs,
  whoami: anyArgs,
  id: anyArgs,
  uname: anyArgs,
  cd: anyArgs,
  sleep: anyArgs,
  seq: anyArgs,
  basename: anyArgs,
  dirname: anyArgs,
  realpath: anyArgs,
  readlink: anyArgs,
  stat: anyArgs,
  du: anyArgs,
  df: anyArgs,
  diff: anyArgs,
  cmp: anyArgs,
  comm: anyArgs,
  cut: anyArgs,
  tr: anyArgs,
  nl: anyArgs,
  tac: anyArgs,
  rev: anyArgs,
  od: anyArgs,
  hexdump: anyArgs,
  strings: anyArgs,
  column: anyArgs,
  paste: anyArgs,
  fold: anyArgs,
  expand: anyArgs,
  fmt: anyArgs,
  jq: anyArgs,
  md5sum: anyArgs,
  sha1sum: anyArgs,
  sha256sum: anyArgs,
  sha512sum: anyArgs,
  file: forbidOptions(/^(-C|--compile)$/, 'file -C writes a compiled magic file'),
  tree: forbidOptions(/^(-o|--output)/, 'tree -o writes a file'),
  date: forbidOptions(/^(-s|--set)/, 'date -s sets the clock'),
  hostname: maxPositionals(0, 'hostname <name> sets the host name'),
  uniq: maxPositionals(1, 'uniq <in> <out> writes <out>'),
  xxd: maxPositionals(1, 'xxd <in> <out> writes <out>'),
  sort: forbidOptions(
    /^(-o.*|--output(=.*)?|--compress-program(=.*)?)$/,
    'sort -o writes a file and --compress-program runs one',
  ),
  sed: sedCheck,
  git: gitCheck,
  find: findCheck,
};
