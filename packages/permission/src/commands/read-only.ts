import { grammar, has, optionValue, type Grammar, type ParsedArgs } from '../grammar.js';
import type { Arg } from '../words.js';
import { findCheck } from './find.js';
import { gitCheck } from './git.js';
import { sedCheck } from './sed.js';

/** What a read-only command's arguments reveal besides being safe to run. */
export interface ReadOnlyEffects {
  /** Names the command assigns (`printf -v x`, `read x`): judged by the assignment rules. */
  assigns?: { name: Arg; how: string }[];
  /** The working directory after it (`cd`): an Arg, '-' for OLDPWD, or 'unknown'. */
  cd?: Arg | 'unknown' | 'home';
  /** A git command: its repository's config is checked (in `gitDir` for `git -C dir`). */
  git?: boolean;
  gitDir?: Arg;
  /** Commands it runs (find -exec): judged like any command; `roots` are what `{}` starts from. */
  commands?: { argv: Arg[]; via: string; roots?: Arg[] }[];
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

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `test` / `[`: unary and binary operators; `-v` and `-R` take a variable name that must be plain. */
function testCheck(all: readonly Arg[]): { reason?: string } {
  for (let i = 0; i < all.length; i++) {
    const a = all[i]!;
    if (a.value === '-v' || a.value === '-R') {
      const name = all[i + 1];
      if (!name || name.value === undefined || !NAME.test(name.value)) {
        return {
          reason: `test ${a.value} ${name?.raw ?? ''} evaluates an array subscript as arithmetic, which can run commands; only a plain variable name is known to be harmless`,
        };
      }
    }
  }
  return {};
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
  rg: spec({
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
  }),
  echo: spec({ flags: 'neE', ...HARMLESS, permute: false }),
  printf: spec(
    { values: 'v', permute: false, ...HARMLESS },
    {
      effects: (args) => {
        const v = args.options.find((o) => o.def.key === '-v');
        const name = v?.value;
        return name && typeof name !== 'string' ? { assigns: [{ name, how: 'printf -v' }] } : {};
      },
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
  printenv: spec(
    { flags: '0', long: `null ${common}`, ...HARMLESS },
    {
      check: (args) =>
        args.operands.length === 0
          ? 'printenv without a name prints every environment variable, secrets included'
          : undefined,
    },
  ),
  cd: spec(
    { flags: 'LPe@', permute: false, ...HARMLESS },
    {
      maxOperands: 1,
      effects: (args) => {
        const target = args.operands[0];
        if (!target) return { cd: 'home' };
        if (target.value === '-') return { cd: 'unknown' };
        return { cd: target };
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
  diff: spec({
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
  }),
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
  jq: spec({
    flags: 'nrjasecCMSRh',
    values: 'fL',
    long:
      'null-input raw-input slurp compact-output raw-output raw-output0 join-output ascii-output sort-keys color-output monochrome-output tab indent= unbuffered stream stream-errors seq exit-status arg= argjson= slurpfile= rawfile= args jsonargs from-file= library-path= build-configuration ' +
      common,
    abbreviations: false,
    ...HARMLESS,
  }),
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
  ps: spec({
    flags: 'AaCcdeEfFgGHhjlLMNOpqrsStTuUvVwxXyZ',
    values: 'CGgopqstuUkO',
    long:
      'pid= ppid= sid= tty= user= group= sort= format= cols= columns= rows= lines= width= forest headers no-headers cumulative deselect context info ' +
      common,
    abbreviations: false,
  }),
  pgrep: spec({
    flags: 'lacfinovwxrA',
    values: 'dgGPstuUF',
    long: `list-name list-full count delimiter= full pgroup= group= ignore-case newest oldest older= parent= session= terminal= euid= uid= inverse lightweight exact pidfile= logpidfile runstates= ignore-ancestors ns= nslist= ${common}`,
  }),
  getent: spec({ flags: 'i', values: 's', long: `no-idn service= ${common}`, ...HARMLESS }),
  git: { grammar: grammar({}), custom: gitCheck },
  find: { grammar: grammar({}), custom: findCheck },
  sed: { grammar: grammar({}), custom: sedCheck },
};

function grepSpec(): ReadOnlySpec {
  return spec({
    flags: 'EFGPiyvwxcLloqsbHhnTZzrRUaIV',
    values: 'efABCmdD',
    long:
      'extended-regexp fixed-strings basic-regexp perl-regexp regexp= file= ignore-case no-ignore-case invert-match word-regexp line-regexp count ' +
      'color? colour? files-without-match files-with-matches max-count= only-matching quiet silent no-messages byte-offset with-filename ' +
      'no-filename label= line-number initial-tab unix-byte-offsets null null-data after-context= before-context= context= group-separator= ' +
      `no-group-separator text binary-files= devices= directories= exclude= exclude-from= exclude-dir= include= recursive dereference-recursive line-buffered binary ${common}`,
    numeric: true,
    ...HARMLESS,
  });
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
