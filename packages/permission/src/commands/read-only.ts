import { grammar, has, optionValue, parseArgs, type Grammar, type ParsedArgs } from '../grammar.js';
import { mayVanish } from '../needs/listing.js';
import { shellGlob } from '../paths.js';
import { literalArg, type Arg } from '../words.js';
import { awkCheck } from './awk.js';
import { findCheck } from './find.js';
import { gitCheck } from './git.js';
import { sedCheck } from './sed.js';

/** What a read-only command's arguments reveal besides being safe to run. */
export interface ReadOnlyEffects {
  /** Names the command assigns (`printf -v x`, `read x`): judged by the assignment rules. */
  assigns?: { name: Arg; how: string }[];
  /** The working directory after it (`cd`): an Arg, '-' for OLDPWD, or 'unknown'. */
  cd?: Arg | 'unknown' | 'home';
  /** `cd -P`: the directory is resolved physically (symlinks first), not by lexical `..`. */
  cdPhysical?: boolean;
  /** A git command: its repository's config is checked (in `gitDir` for `git -C dir`). */
  git?: boolean;
  gitDir?: Arg;
  /** The repository named outright: `--git-dir=X` (relative to `gitDir`), or `--bare` (`gitDir` itself). */
  repository?: { gitDir: Arg } | { bare: true };
  /** Commands it runs (find -exec): judged like any command; `roots` are what `{}` starts from. */
  commands?: { argv: Arg[]; via: string; roots?: Arg[] }[];
  /** Files its own program names and reads (`sed 'r FILE'`): judged like its file operands. */
  reads?: Arg[];
  /** Directories whose every file it reads (`grep -r`, `rg`, `find … -exec`, `diff -r`). */
  recursiveReads?: Arg[];
}

export interface ReadOnlySpec {
  grammar: Grammar;
  /** Why these (parsed) arguments are not read-only; undefined when they are. */
  check?: (args: ParsedArgs, all: readonly Arg[]) => string | undefined;
  /** Effects to hand to the analysis (assignments, cwd). */
  effects?: (args: ParsedArgs, all: readonly Arg[]) => ReadOnlyEffects;
  /** Skip the grammar: the command parses its own arguments (git, find, test). */
  custom?: (all: readonly Arg[]) => { reason?: string; effects?: ReadOnlyEffects };
  /** Operands at most (e.g. `uniq in out` writes out). */
  maxOperands?: number;
}

const HARMLESS = { harmlessOptions: true } as const;
const common = 'help version';

function spec(s: Parameters<typeof grammar>[0], rest: Omit<ReadOnlySpec, 'grammar'> = {}): ReadOnlySpec {
  return { grammar: grammar(s), ...rest };
}

const hashSum = spec({
  flags: 'bctzw',
  values: 'la',
  long: `binary check tag text zero ignore-missing quiet status strict warn length= algorithm= base64 raw untagged debug ${common}`,
  ...HARMLESS,
});

/**
 * `test` / `[`: `-v` and `-R` evaluate their operand's array subscript as arithmetic, which runs
 * command substitutions (`test -v 'a[$(cmd)]'`). An operand that can hold a subscript (`[`) after
 * a word that can be `-v` or `-R` asks: a literal `-v`, or a run-time word (`[ "$op" "$x" ]`). An
 * unquoted expansion only known at run time asks anyway: it may split into any words
 * (`test $x` with x=`-v a[$(cmd)]`). Three words with a binary operator in the middle are a binary
 * test (`[ "$a" = "$b" ]`), which the rule lets through: the middle word is a known operator.
 */
export function testArgvRisk(args: readonly Arg[]): string | undefined {
  for (const a of args)
    if (maySplit(a))
      return `test ${a.raw}: an unquoted expansion only known at run time may split into -v and an array subscript, which test evaluates as arithmetic (it can run commands)`;
  for (let i = 0; i + 1 < args.length; i++) {
    const op = args[i]!;
    const operand = args[i + 1]!;
    if (!canBe(op, '-v') && !canBe(op, '-R')) continue;
    if (operand.value !== undefined && !operand.value.includes('[')) continue;
    return `test ${op.raw} ${operand.raw} evaluates an array subscript as arithmetic, which can run commands; only a plain variable name is known to be harmless`;
  }
  return undefined;
}

/** Whether a word can be `text` when the command runs (known, or a pattern that may match it). */
export function canBe(a: Arg, text: string): boolean {
  if (a.value !== undefined) return a.value === text;
  if (a.fields !== undefined) return a.fields.includes(text);
  try {
    return shellGlob(a.pattern, true).test(text);
  } catch {
    return true;
  }
}

/** An unquoted expansion only known at run time: bash may split it into several words (or none). */
export function maySplit(a: Arg): boolean {
  if (a.fields !== undefined) return false;
  return a.word.parts.some(
    (p) =>
      ((p.kind === 'param' && !/^[?#$!-]$/.test(p.name)) || p.kind === 'command-sub' || p.kind === 'arith') &&
      !p.quoted,
  );
}

function testCheck(all: readonly Arg[]): { reason?: string } {
  const risk = testArgvRisk(all);
  return risk ? { reason: risk } : {};
}

/** printenv NAME prints one variable; without a name (or with only words that may vanish) it lists them all. */
function printenvCheck(args: ParsedArgs): string | undefined {
  if (args.operands.length === 0 || args.operands.every(mayVanish))
    return 'printenv without a name prints every environment variable, secrets included';
  return undefined;
}

/**
 * ps lists processes; it lists their environments too with the BSD `e` option (`ps e`, `ps auxe`,
 * `ps ewwp 1`, `ps e1`) or the `environ` format (`ps -o pid,environ`, `ps --format=environ`). A
 * BSD word is read as procps reads it: letters up to one that takes a value (`p`, `q`, `t`, `U`,
 * `o`, `O`, `k`), which takes the rest of the word or the next word; an `e` before that lists.
 */
function psCheck(args: ParsedArgs, all: readonly Arg[]): string | undefined {
  for (const a of all)
    if (/environ/i.test(a.value ?? a.pattern))
      return `ps ${a.raw} prints each process's environment (the environ format), like env`;
  let value = false;
  for (const a of args.operands) {
    if (value) {
      value = false;
      continue;
    }
    if (a.value === undefined)
      return `ps ${a.raw} is only known at run time and could be the e option, which prints each process's environment`;
    for (let i = 0; i < a.value.length; i++) {
      const ch = a.value[i]!;
      if (ch === 'e') return `ps ${a.value} prints each process's environment (the BSD e option), like env`;
      if (/[pqtUoOk]/.test(ch)) {
        value = i === a.value.length - 1;
        break;
      }
    }
  }
  return undefined;
}

const JQ_FLAGS = new Set('nrjasecCMSRh'.split(''));
const JQ_LONG = new Set(
  (
    'null-input raw-input slurp compact-output raw-output raw-output0 join-output ascii-output sort-keys color-output ' +
    'monochrome-output tab unbuffered stream stream-errors seq exit-status args jsonargs build-configuration help version'
  ).split(' '),
);

/**
 * jq: a read-only filter unless it lists the environment (`env`, `$ENV`) or loads code the gate
 * does not see (a program file `-f`, modules through `import`/`include`). `--arg`, `--argjson`,
 * `--slurpfile` and `--rawfile` take two words each; the first operand is the program.
 */
function jqCheck(all: readonly Arg[]): { reason?: string } {
  let program: Arg | undefined;
  let optionsDone = false;
  for (let i = 0; i < all.length; i++) {
    const a = all[i]!;
    const v = a.value;
    if (v === undefined) {
      if (!optionsDone && a.mayBeOption)
        return {
          reason: `jq argument ${a.raw} is only known at run time and could be an option (-f reads the program from a file)`,
        };
      if (!program) return { reason: `the jq program ${a.raw} is only known at run time` };
      continue;
    }
    if (optionsDone || !v.startsWith('-') || v === '-') {
      program ??= a;
      continue;
    }
    if (v === '--') {
      optionsDone = true;
      continue;
    }
    if (/^--(arg|argjson|slurpfile|rawfile)$/.test(v)) {
      if (i + 2 >= all.length) return { reason: `jq ${v} needs a name and a value` };
      i += 2;
      continue;
    }
    if (v === '--indent' || v === '-L' || v === '--library-path') {
      i++;
      continue;
    }
    if (/^-L./.test(v)) continue;
    if (v === '-f' || v === '--from-file' || /^--from-file=/.test(v))
      return { reason: 'jq -f reads its program from a file, which the gate does not read' };
    if (v.startsWith('--')) {
      if (!JQ_LONG.has(v.slice(2))) return { reason: `jq option ${v} is not known to be harmless` };
      continue;
    }
    for (const ch of v.slice(1))
      if (!JQ_FLAGS.has(ch)) return { reason: `jq option -${ch} is not known to be harmless` };
  }
  if (!program) return {};
  const text = program.value!;
  // `$ENV` may be written `$ ENV` (jq reads `$` and the name as two tokens; blanks and comments
  // may come between).
  if (/\$(?:\s|#[^\n]*\n?)*ENV\b|(^|[^.$\w])env\b/.test(text))
    return {
      reason: `the jq program ${JSON.stringify(text)} reads env or $ENV, a listing of the environment`,
    };
  if (/(^|[^.$\w])(import|include)\b/.test(text))
    return { reason: `the jq program ${JSON.stringify(text)} loads a module, which the gate does not read` };
  return {};
}

/**
 * getent reads the system's databases. A key only known at run time asks (in any database: NSS may
 * send it to a server), and so does any key of a database resolved through DNS (`hosts`, `ahosts*`,
 * `networks`): a lookup is a network access, as `host`, `dig` and `nslookup` are, and its name
 * carries whatever it holds (`getent hosts $(cat .env | base64).example`). Enumerating a database
 * without keys reads the local files.
 */
function getentCheck(args: ParsedArgs): string | undefined {
  const dynamic = args.operands.find((o) => o.value === undefined);
  if (dynamic)
    return `getent ${dynamic.raw} looks up a name only known at run time (a DNS lookup can carry data out)`;
  const [database, ...keys] = args.operands;
  if (keys.length > 0 && /^(hosts|ahosts|ahostsv4|ahostsv6|networks)$/.test(database?.value ?? ''))
    return `getent ${database!.value} ${keys[0]!.raw} is a DNS lookup, a network access (like host or dig)`;
  return undefined;
}

/**
 * lsof only reads, but for `+m file` (writes a mount supplement file) and `-D` (a device cache);
 * its options start with `-` or `+`, and a word only known at run time could be either.
 */
function lsofCheck(all: readonly Arg[]): { reason?: string } {
  for (const a of all) {
    const v = a.value;
    if (v === undefined) {
      if (a.mayBeOption || /^[*?[]|^\+/.test(a.pattern))
        return { reason: `lsof argument ${a.raw} is only known at run time and could be an option` };
      continue;
    }
    if (/^\+m/.test(v)) return { reason: 'lsof +m writes a mount supplement file' };
    if (/^-D/.test(v)) return { reason: 'lsof -D builds or updates a device cache file' };
  }
  return {};
}

/**
 * tar reading an archive's table of contents (`tar -tf a.tar`, `tar tvzf a.tgz`, `tar --list`):
 * old-style letters are read as tar reads them (each letter that takes a value takes the next word).
 * Compressors chosen by name (`-I`, `--use-compress-program`), `--to-command`, checkpoint actions,
 * volume scripts and an archive on another host (`-f host:file`, run through rsh/ssh) are not in
 * the grammar or ask.
 */
const TAR_LIST = grammar({
  flags: 'tvzjJaZOiPkwU',
  values: 'fbTXC',
  long:
    'list file= verbose gzip gunzip ungzip bzip2 xz lzma lzip lzop zstd compress uncompress auto-compress no-auto-compress ' +
    'force-local wildcards no-wildcards wildcards-match-slash no-wildcards-match-slash anchored no-anchored ignore-case ' +
    'no-ignore-case exclude= exclude-from= files-from= numeric-owner full-time utc show-transformed-names show-stored-names ' +
    'quoting-style= quote-chars= no-quote-chars= null no-null blocking-factor= record-size= ignore-zeros occurrence? ' +
    'strip-components= transform= xform= no-recursion recursion totals? to-stdout directory= verbatim-files-from ' +
    'no-verbatim-files-from unquote no-unquote label= warning= absolute-names block-number help version usage',
});

function tarCheck(all: readonly Arg[]): { reason?: string } {
  let args = [...all];
  const first = args[0];
  if (first?.value !== undefined && /^[A-Za-z]+$/.test(first.value)) {
    // Old style (`tar tvf a.tar`): a bundle of letters without a dash, their values after it.
    const expanded: Arg[] = [];
    let next = 1;
    for (const ch of first.value) {
      const def = TAR_LIST.short.get(ch);
      if (!def) return { reason: `tar ${ch} is not known to only list an archive` };
      expanded.push({ ...first, value: `-${ch}`, fields: [`-${ch}`], raw: `-${ch}` });
      if (def.arg === 'required') {
        const value = args[next++];
        if (!value) return { reason: `tar ${ch} needs a value` };
        expanded.push(value);
      }
    }
    args = [...expanded, ...args.slice(next)];
  }
  const parsed = parseArgs(TAR_LIST, args, 'tar');
  if (!parsed.ok) return { reason: parsed.reason };
  if (!has(parsed.args, '-t', '--list'))
    return { reason: 'tar without -t/--list extracts or writes an archive' };
  const local = has(parsed.args, '--force-local');
  for (const o of parsed.args.options) {
    if (o.def.key !== '-f' && o.def.key !== '--file') continue;
    const file = typeof o.value === 'string' ? o.value : o.value?.value;
    if (file === undefined)
      return { reason: 'tar reads an archive named only at run time (host:file runs rsh)' };
    if (file.includes(':') && !local)
      return { reason: `tar -f ${file} reads an archive on another host through rsh/ssh` };
  }
  return {};
}

/** unzip listing or testing an archive, or printing members to stdout: `-l`, `-v`, `-t`, `-z`, `-Z`, `-p`, `-c`. */
function unzipCheck(all: readonly Arg[]): { reason?: string } {
  const mode = unzipMode(all);
  return mode.ok ? {} : { reason: mode.reason };
}

export function unzipMode(all: readonly Arg[]): { ok: true } | { ok: false; reason: string } {
  let listing = false;
  let excluding = false;
  for (const a of all) {
    const v = a.value;
    if (v === undefined) {
      if (a.mayBeOption)
        return {
          ok: false,
          reason: `unzip argument ${a.raw} is only known at run time and could be an option`,
        };
      continue;
    }
    if (!v.startsWith('-') || excluding) {
      continue;
    }
    if (v === '-x') {
      excluding = true;
      continue;
    }
    if (!/^-[lvtzZpcqCM12hmsT]+$/.test(v))
      return { ok: false, reason: `unzip ${v} extracts or changes files` };
    if (/[lvtzZpc]/.test(v)) listing = true;
  }
  return listing ? { ok: true } : { ok: false, reason: 'unzip without -l/-v/-t/-Z/-p/-c extracts files' };
}

/** Commands known to only read (or print), each with the options it accepts. */
export const READ_ONLY: Record<string, ReadOnlySpec> = {
  ls: spec({
    flags: 'aAbBcCdDfFgGhHiklLmnNopqQrRsStuUvwxXZ1',
    values: 'ITw',
    long: `all almost-all author escape block-size= ignore-backups color? directory dired classify? file-type format= full-time group-directories-first no-group human-readable si dereference-command-line dereference-command-line-symlink-to-dir hide= hyperlink? indicator-style= inode ignore= kibibytes dereference literal numeric-uid-gid hide-control-chars show-control-chars quote-name quoting-style= reverse recursive size sort= time= time-style= tabsize= width= context zero ${common}`,
    ...HARMLESS,
  }),
  dir: spec({ flags: 'aAlhR1', long: `all almost-all recursive ${common}`, ...HARMLESS }),
  cat: spec({
    flags: 'AbeEnstTuv',
    long: `show-all number-nonblank show-ends number squeeze-blank show-tabs show-nonprinting ${common}`,
    ...HARMLESS,
  }),
  head: spec({
    flags: 'qvz',
    values: 'cn',
    long: `bytes= lines= quiet silent verbose zero-terminated ${common}`,
    numeric: true,
    ...HARMLESS,
  }),
  tail: spec({
    flags: 'fFqvz',
    values: 'cns',
    long: `bytes= follow? lines= max-unchanged-stats= pid= quiet silent retry sleep-interval= verbose zero-terminated ${common}`,
    numeric: true,
    ...HARMLESS,
  }),
  wc: spec({
    flags: 'clmwL',
    long: `bytes chars lines files0-from= max-line-length words total= ${common}`,
    ...HARMLESS,
  }),
  grep: grepSpec(),
  egrep: grepSpec(),
  fgrep: grepSpec(),
  rg: spec(
    {
      flags: 'iSsvwxclLnNoqua.FPHI0hpb',
      values: 'jmABCefgtTMrEd',
      long:
        'files type-list hidden no-ignore glob= iglob= type= type-not= type-add= type-clear= max-count= max-depth= maxdepth= max-filesize= ' +
        'json vimgrep heading no-heading color= colors= sort= sortr= sort-files stats count count-matches files-with-matches files-without-match ' +
        'fixed-strings follow ignore-case smart-case case-sensitive invert-match line-number no-line-number only-matching passthru passthrough pcre2 engine= ' +
        'replace= context= after-context= before-context= multiline multiline-dotall no-messages null null-data one-file-system path-separator= quiet ' +
        'text threads= trim unrestricted word-regexp line-regexp with-filename no-filename column no-column byte-offset max-columns= max-columns-preview ' +
        'no-config ignore-file= no-ignore-vcs no-ignore-parent no-ignore-dot no-ignore-global no-ignore-exclude no-ignore-files no-require-git binary ' +
        'crlf encoding= debug trace pretty field-match-separator= field-context-separator= include-zero no-unicode glob-case-insensitive regexp= file= ' +
        'context-separator= no-context-separator ignore-file-case-insensitive no-pcre2-unicode auto-hybrid-regex dfa-size-limit= regex-size-limit= ' +
        `mmap no-mmap block-buffered line-buffered generate= no-block-buffered no-line-buffered hyperlink-format= ${common}`,
      abbreviations: false,
    },
    {
      effects: (args) =>
        has(args, '--files') ? {} : searched(args, true, ['-e', '-f', '--regexp', '--file']),
    },
  ),
  // bash's echo takes only words of -n/-e/-E as options and prints every other word (`echo ---`,
  // `echo --help`); coreutils' echo the same. Nothing it is given can do more than print.
  echo: { grammar: grammar({}), custom: () => ({}) },
  // printf -v NAME assigns, however it is written (`-v NAME`, `-vNAME`, the last of several -v
  // counts): every name is judged. A word only known at run time could be -v (`printf "$f" PS1 x`).
  printf: spec(
    { values: 'v', permute: false },
    {
      effects: (args) => ({
        assigns: args.options
          .filter((o) => o.def.key === '-v' && o.value !== undefined)
          .map((o) => ({
            name: typeof o.value === 'string' ? literalArg(o.value) : o.value!,
            how: 'printf -v',
          })),
      }),
    },
  ),
  pwd: spec({ flags: 'LP', long: common }),
  true: spec({ ...HARMLESS }),
  yes: spec({ long: common, ...HARMLESS }),
  false: spec({ ...HARMLESS }),
  ':': spec({ ...HARMLESS }),
  test: { grammar: grammar({}), custom: testCheck },
  '[': { grammar: grammar({}), custom: testCheck },
  which: spec({ flags: 'as', long: 'all skip-alias skip-functions read-alias read-functions', ...HARMLESS }),
  type: spec({ flags: 'afptP', permute: false, ...HARMLESS }),
  whoami: spec({ long: common }),
  id: spec({ flags: 'aZgGnruz', long: `context group groups name real user zero ${common}`, ...HARMLESS }),
  groups: spec({ long: common, ...HARMLESS }),
  uname: spec({
    flags: 'asnrvmpio',
    long: `all kernel-name nodename kernel-release kernel-version machine processor hardware-platform operating-system ${common}`,
  }),
  arch: spec({ long: common }),
  nproc: spec({ long: `all ignore= ${common}` }),
  uptime: spec({ flags: 'psh', long: `pretty since ${common}` }),
  tty: spec({ flags: 's', long: `silent quiet ${common}` }),
  logname: spec({ long: common }),
  locale: spec({ flags: 'amkcv', long: `all-locales charmaps category-name keyword-name verbose ${common}` }),
  free: spec({
    flags: 'bkmghltwv',
    values: 'sc',
    long: `bytes kilo mega giga tera peta kibi mebi gibi tebi pebi human si lohi total wide committed seconds= count= ${common}`,
  }),
  printenv: spec({ flags: '0', long: `null ${common}`, ...HARMLESS }, { check: printenvCheck }),
  cd: spec(
    { flags: 'LPe@', permute: false, ...HARMLESS },
    {
      maxOperands: 1,
      effects: (args) => {
        const target = args.operands[0];
        if (!target) return { cd: 'home' };
        if (target.value === '-') return { cd: 'unknown' };
        // `cd -P` resolves symlinks first: `cd -P link/..` is the parent of the link's target.
        const last = [...args.options].reverse().find((o) => o.def.key === '-P' || o.def.key === '-L');
        return { cd: target, ...(last?.def.key === '-P' ? { cdPhysical: true } : {}) };
      },
    },
  ),
  pushd: spec(
    { flags: 'n', permute: false, ...HARMLESS },
    {
      maxOperands: 1,
      effects: (args) => {
        const target = args.operands[0];
        if (!target || /^[+-]/.test(target.value ?? '+')) return { cd: 'unknown' };
        return { cd: target };
      },
    },
  ),
  popd: spec({ flags: 'n', permute: false, ...HARMLESS }, { effects: () => ({ cd: 'unknown' }) }),
  dirs: spec({ flags: 'clpv', permute: false, ...HARMLESS }),
  sleep: spec({ long: common, ...HARMLESS }),
  seq: spec({
    flags: 'w',
    values: 'fs',
    long: `format= separator= equal-width ${common}`,
    numeric: true,
    ...HARMLESS,
  }),
  basename: spec({ flags: 'az', values: 's', long: `multiple suffix= zero ${common}`, ...HARMLESS }),
  dirname: spec({ flags: 'z', long: `zero ${common}`, ...HARMLESS }),
  realpath: spec({
    flags: 'emLPqsz',
    long: `canonicalize-existing canonicalize-missing logical physical quiet relative-to= relative-base= strip no-symlinks zero ${common}`,
    ...HARMLESS,
  }),
  readlink: spec({
    flags: 'femnqsvz',
    long: `canonicalize canonicalize-existing canonicalize-missing no-newline quiet silent verbose zero ${common}`,
    ...HARMLESS,
  }),
  stat: spec({
    flags: 'Lft',
    values: 'c',
    long: `dereference file-system format= printf= terse cached= ${common}`,
    ...HARMLESS,
  }),
  du: spec({
    flags: '0abcDhHklLmPsSx',
    values: 'dBtX',
    long: `null all apparent-size block-size= bytes total dereference-args max-depth= human-readable inodes si summarize threshold= time? time-style= exclude-from= exclude= count-links dereference no-dereference separate-dirs one-file-system files0-from= ${common}`,
    ...HARMLESS,
  }),
  df: spec({
    flags: 'ahHiklPTv',
    values: 'xtB',
    long: `all block-size= human-readable si inodes local output? portability print-type sync no-sync total type= exclude-type= ${common}`,
    ...HARMLESS,
  }),
  diff: spec(
    {
      flags: 'qscuenylrtTpNabwBEZidHPuv',
      values: 'CUWFIxXSLD',
      long:
        'normal brief report-identical-files context? unified? ed rcs side-by-side width= left-column suppress-common-lines show-c-function ' +
        'show-function-line= label= expand-tabs initial-tab tabsize= suppress-blank-empty paginate recursive no-dereference new-file ' +
        'unidirectional-new-file ignore-file-name-case no-ignore-file-name-case exclude= exclude-from= starting-file= from-file= to-file= ' +
        'ignore-case ignore-tab-expansion ignore-trailing-space ignore-space-change ignore-all-space ignore-blank-lines ignore-matching-lines= ' +
        'text strip-trailing-cr minimal horizon-lines= speed-large-files color? palette= old-line-format= new-line-format= unchanged-line-format= ' +
        `line-format= old-group-format= new-group-format= unchanged-group-format= changed-group-format= ifdef= GTYPE-group-format= ${common}`,
      numeric: true,
      ...HARMLESS,
    },
    { effects: (args) => (has(args, '-r', '--recursive') ? { recursiveReads: args.operands } : {}) },
  ),
  cmp: spec({
    flags: 'blsv',
    values: 'in',
    long: `print-bytes ignore-initial= verbose bytes= quiet silent ${common}`,
    ...HARMLESS,
  }),
  comm: spec({
    flags: '123z',
    long: `check-order nocheck-order output-delimiter= total zero-terminated ${common}`,
    ...HARMLESS,
  }),
  cut: spec({
    flags: 'nsz',
    values: 'bcdf',
    long: `bytes= characters= delimiter= fields= complement only-delimited output-delimiter= zero-terminated ${common}`,
    ...HARMLESS,
  }),
  tr: spec({
    flags: 'cCdst',
    long: `complement delete squeeze-repeats truncate-set1 ${common}`,
    ...HARMLESS,
  }),
  nl: spec({
    flags: 'p',
    values: 'bdfhilnsvw',
    long: `body-numbering= section-delimiter= footer-numbering= header-numbering= line-increment= join-blank-lines= number-format= no-renumber number-separator= starting-line-number= number-width= ${common}`,
    ...HARMLESS,
  }),
  tac: spec({ flags: 'br', values: 's', long: `before regex separator= ${common}`, ...HARMLESS }),
  rev: spec({ long: common, ...HARMLESS }),
  od: spec({
    flags: 'bcdfilosvx',
    values: 'AjNStw',
    long: `address-radix= endian= skip-bytes= read-bytes= strings? format= output-duplicates width? traditional ${common}`,
    ...HARMLESS,
  }),
  hexdump: spec({
    flags: 'bcCdoxv',
    values: 'efns',
    long: `one-byte-octal one-byte-char canonical two-bytes-decimal two-bytes-octal two-bytes-hex format= format-file= length= skip= no-squeezing color? ${common}`,
    ...HARMLESS,
  }),
  strings: spec({
    flags: 'adfwsz',
    values: 'ntesT',
    long: `all data print-file-name bytes= radix= encoding= output-separator= include-all-whitespace target= unicode= ${common}`,
    numeric: true,
    ...HARMLESS,
  }),
  column: spec({
    flags: 'txneJLHVR',
    values: 'csoNdOrEWlhC',
    long: `table separator= output-separator= columns= fillrows table-empty-lines table-columns= table-order= table-right= table-truncate= table-noextreme= table-wrap= table-hide= table-name= tree= tree-id= tree-parent= json keep-empty-lines use-spaces= ${common}`,
    ...HARMLESS,
  }),
  paste: spec({
    flags: 'sz',
    values: 'd',
    long: `delimiters= serial zero-terminated ${common}`,
    ...HARMLESS,
  }),
  fold: spec({ flags: 'bs', values: 'w', long: `bytes spaces width= ${common}`, ...HARMLESS }),
  expand: spec({ flags: 'i', values: 't', long: `initial tabs= ${common}`, numeric: true, ...HARMLESS }),
  unexpand: spec({ flags: 'a', values: 't', long: `all first-only tabs= ${common}`, ...HARMLESS }),
  fmt: spec({
    flags: 'cstu',
    values: 'pwg',
    long: `crown-margin prefix= split-only tagged-paragraph uniform-spacing width= goal= ${common}`,
    numeric: true,
    ...HARMLESS,
  }),
  md5sum: hashSum,
  sha1sum: hashSum,
  sha224sum: hashSum,
  sha256sum: hashSum,
  sha384sum: hashSum,
  sha512sum: hashSum,
  b2sum: hashSum,
  cksum: hashSum,
  base64: spec({ flags: 'di', values: 'w', long: `decode ignore-garbage wrap= ${common}`, ...HARMLESS }),
  jq: { grammar: grammar({}), custom: jqCheck },
  file: spec({
    flags: 'bcEhiklLNnrsvzZ0d',
    values: 'eFfmP',
    long: `brief checking-printout exclude= exclude-quiet= extension files-from= separator= mime apple mime-type mime-encoding keep-going list dereference magic-file= no-dereference no-buffer no-pad print0 parameter= raw special-files uncompress uncompress-noreport ${common}`,
  }),
  tree: spec({
    flags: 'adlfxiqNQpugshDFvtcUrnCASJHXn',
    values: 'LPIT',
    long: `prune noreport si du timefmt= inodes device dirsfirst filesfirst sort= charset= filelimit= gitignore matchdirs ignore-case info fromfile metafirst nolinks hintro= houtro= ${common}`,
  }),
  date: spec(
    {
      flags: 'uRI',
      values: 'dfr',
      long: `utc universal rfc-email rfc-2822 rfc-3339= iso-8601? debug date= file= reference= resolution ${common}`,
    },
    {
      check: (args) => {
        const bad = args.operands.find((o) => o.value === undefined || !o.value.startsWith('+'));
        return bad ? `date ${bad.raw} sets the system clock (only +FORMAT operands print)` : undefined;
      },
    },
  ),
  hostname: spec(
    {
      flags: 'aAdfiIs',
      long: `alias all-fqdns domain fqdn long ip-address all-ip-addresses short ${common}`,
    },
    { maxOperands: 0 },
  ),
  sort: spec({
    flags: 'bcCdfghiMmnRrsuVz',
    values: 'ktS',
    long: `ignore-leading-blanks dictionary-order ignore-case general-numeric-sort ignore-nonprinting month-sort human-numeric-sort numeric-sort random-sort random-source= reverse sort= version-sort batch-size= check? debug files0-from= key= merge buffer-size= field-separator= unique zero-terminated stable parallel= ${common}`,
  }),
  uniq: spec(
    {
      flags: 'cdDiuz',
      values: 'fsw',
      long: `count repeated all-repeated? skip-fields= group? ignore-case skip-chars= unique zero-terminated check-chars= ${common}`,
      numeric: true,
    },
    { maxOperands: 1 },
  ),
  xxd: spec({ flags: 'abCEeiprudR', values: 'cglnos', abbreviations: false }, { maxOperands: 1 }),
  ps: spec(
    {
      flags: 'AaCcdeEfFgGHhjlLMNOpqrsStTuUvVwxXyZ',
      values: 'CGgopqstuUkO',
      long:
        'pid= ppid= sid= tty= user= group= sort= format= cols= columns= rows= lines= width= forest headers no-headers cumulative deselect context info ' +
        common,
      abbreviations: false,
    },
    { check: psCheck },
  ),
  pgrep: spec({
    flags: 'lacfinovwxrA',
    values: 'dgGPstuUF',
    long: `list-name list-full count delimiter= full pgroup= group= ignore-case newest oldest older= parent= session= terminal= euid= uid= inverse lightweight exact pidfile= logpidfile runstates= ignore-ancestors ns= nslist= ${common}`,
  }),
  getent: spec(
    { flags: 'i', values: 's', long: `no-idn service= ${common}`, ...HARMLESS },
    { check: getentCheck },
  ),
  lsof: { grammar: grammar({}), custom: lsofCheck },
  tar: { grammar: grammar({}), custom: tarCheck },
  unzip: { grammar: grammar({}), custom: unzipCheck },
  awk: { grammar: grammar({}), custom: awkCheck },
  gawk: { grammar: grammar({}), custom: awkCheck },
  mawk: { grammar: grammar({}), custom: awkCheck },
  nawk: { grammar: grammar({}), custom: awkCheck },
  git: { grammar: grammar({}), custom: gitCheck },
  find: { grammar: grammar({}), custom: findCheck },
  sed: { grammar: grammar({}), custom: sedCheck },
};

/**
 * The directories a search reads every file of: grep with -r/-R (`--directories=recurse`), rg
 * always; the operands after the pattern (the first operand unless -e/-f give it), else `.`.
 */
function searched(args: ParsedArgs, recursive: boolean, patternKeys: string[]): ReadOnlyEffects {
  if (!recursive) return {};
  const paths = has(args, ...patternKeys) ? args.operands : args.operands.slice(1);
  return { recursiveReads: paths.length > 0 ? paths : [literalArg('.')] };
}

function grepSpec(): ReadOnlySpec {
  return spec(
    {
      flags: 'EFGPiyvwxcLloqsbHhnTZzrRUaIV',
      values: 'efABCmdD',
      long:
        'extended-regexp fixed-strings basic-regexp perl-regexp regexp= file= ignore-case no-ignore-case invert-match word-regexp line-regexp count ' +
        'color? colour? files-without-match files-with-matches max-count= only-matching quiet silent no-messages byte-offset with-filename ' +
        'no-filename label= line-number initial-tab unix-byte-offsets null null-data after-context= before-context= context= group-separator= ' +
        `no-group-separator text binary-files= devices= directories= exclude= exclude-from= exclude-dir= include= recursive dereference-recursive line-buffered binary ${common}`,
      numeric: true,
      ...HARMLESS,
    },
    {
      effects: (args) =>
        searched(
          args,
          has(args, '-r', '-R', '--recursive', '--dereference-recursive') ||
            args.options.some(
              (o) =>
                (o.def.key === '-d' || o.def.key === '--directories') &&
                optionValue(o) !== 'read' &&
                optionValue(o) !== 'skip',
            ),
          ['-e', '-f', '--regexp', '--file'],
        ),
    },
  );
}

/**
 * Programs whose `--version` (the only argument) is known to print and exit without reading the
 * project's files or running anything else.
 */
export const VERSION_ONLY: Record<string, readonly string[]> = {
  node: ['--version', '-v'],
  bash: ['--version'],
  zsh: ['--version'],
  gcc: ['--version'],
  'g++': ['--version'],
  cc: ['--version'],
  clang: ['--version'],
  rustc: ['--version', '-V'],
  make: ['--version', '-v'],
  cmake: ['--version'],
  tmux: ['-V'],
  java: ['-version', '--version'],
  javac: ['-version', '--version'],
  tsc: ['--version', '-v'],
  docker: ['--version'],
  ssh: ['-V'],
  perl: ['--version', '-v'],
  python3: ['--version', '-V'],
  python: ['--version', '-V'],
  ruby: ['--version'],
};

export { has, optionValue };
