import { grammar, has, parseArgs, type Grammar, type ParsedArgs } from '../grammar.js';
import { literalArg, runtimeArg, type Arg } from '../words.js';
import type { ReadOnlyEffects } from './read-only.js';

/**
 * git read commands. Global options are read the way git's handle_options reads them (exact
 * spellings); each subcommand has the parse-options grammar of its read-only options (unique
 * prefixes of long options, bundled short flags). Options that write files or run programs
 * (`--output`, `--ext-diff`, `--textconv`, `-O`/`--open-files-in-pager`, `--show-signature`,
 * `-c`, `--work-tree`, `--exec-path=`) are not in any grammar, so they ask. What a repository's own
 * config makes git run (fsmonitor, textconv, filters, pagers) is checked separately
 * (`git-config.ts`), for the repository git will open (`-C`, `--git-dir`, `--bare`, discovery).
 */

const DIFF_LONG =
  'patch no-patch unified= output-indicator-new= output-indicator-old= output-indicator-context= raw patch-with-raw ' +
  'indent-heuristic no-indent-heuristic minimal patience histogram anchored= diff-algorithm= stat? compact-summary numstat ' +
  'shortstat dirstat? cumulative dirstat-by-file? summary patch-with-stat name-only name-status submodule? color? no-color ' +
  'color-moved? no-color-moved color-moved-ws= no-color-moved-ws word-diff? word-diff-regex= color-words? no-renames ' +
  'rename-empty no-rename-empty check ws-error-highlight= full-index binary abbrev? no-abbrev break-rewrites? find-renames? ' +
  'find-copies? find-copies-harder irreversible-delete diff-filter= pickaxe-all pickaxe-regex relative? no-relative text ' +
  'ignore-cr-at-eol ignore-space-at-eol ignore-space-change ignore-all-space ignore-blank-lines ignore-matching-lines= ' +
  'inter-hunk-context= function-context exit-code quiet no-ext-diff no-textconv ignore-submodules? src-prefix= dst-prefix= ' +
  'no-prefix default-prefix line-prefix= ita-invisible-in-index ita-visible-in-index stat-width= stat-name-width= ' +
  'stat-graph-width= stat-count= skip-to= rotate-to= follow';
const DIFF_FLAGS = 'pusRazbwWDrtmc';
const DIFF_VALUES = 'USGUlX';

const REV_LONG =
  'oneline graph decorate? no-decorate decorate-refs= decorate-refs-exclude= clear-decorations source all branches? tags? ' +
  'remotes? glob= exclude= reflog not first-parent merges no-merges min-parents= max-parents= no-min-parents no-max-parents ' +
  'ancestry-path? simplify-by-decoration simplify-merges full-history dense sparse show-pulls topo-order date-order ' +
  'author-date-order reverse walk-reflogs max-count= skip= since= after= until= before= since-as-filter= author= committer= ' +
  'grep= grep-reflog= all-match invert-grep regexp-ignore-case basic-regexp extended-regexp fixed-strings perl-regexp format= ' +
  'pretty? abbrev-commit no-abbrev-commit encoding= expand-tabs? no-expand-tabs notes? no-notes show-notes? standard-notes ' +
  'no-standard-notes relative-date date= parents children left-right cherry-mark cherry-pick cherry left-only right-only ' +
  'boundary no-walk? do-walk show-linear-break? mailmap use-mailmap no-mailmap no-use-mailmap log-size count ' +
  'single-worktree exclude-hidden= exclude-first-parent-only remerge-diff diff-merges= no-diff-merges combined-all-paths dd cc ' +
  'show-root root no-commit-id';

function withCommon(long: string): string {
  return `${long} help`;
}

const LOG = grammar({
  endOfOptions: true,
  flags: `${DIFF_FLAGS}iEFPgLm`,
  values: `${DIFF_VALUES}n`,
  long: withCommon(`${REV_LONG} ${DIFF_LONG}`),
  numeric: true,
});
const DIFF = grammar({
  endOfOptions: true,
  flags: `${DIFF_FLAGS}012`,
  values: `${DIFF_VALUES}O`,
  long: withCommon(`${DIFF_LONG} cached staged merge-base no-index base ours theirs`),
  numeric: true,
});

/** diff-tree: the diff options, plus how it walks and shows commits (`--no-commit-id`, `-r`, `--root`). */
const DIFF_TREE = grammar({
  endOfOptions: true,
  flags: `${DIFF_FLAGS}012sv`,
  values: `${DIFF_VALUES}O`,
  long: withCommon(
    `${DIFF_LONG} no-commit-id root merge-base stdin pretty? format= abbrev-commit no-abbrev-commit encoding= always cc dd combined-all-paths notes? no-notes show-notes? expand-tabs? no-expand-tabs first-parent`,
  ),
  numeric: true,
});

interface Sub {
  grammar: Grammar;
  /** Why these arguments are not read-only. */
  check?: (args: ParsedArgs) => string | undefined;
}

function sub(spec: Parameters<typeof grammar>[0], check?: Sub['check']): Sub {
  return {
    grammar: grammar({ ...spec, endOfOptions: true, long: withCommon(spec.long ?? '') }),
    ...(check ? { check } : {}),
  };
}

function listOnly(what: string, listKeys: string[]): (args: ParsedArgs) => string | undefined {
  return (args) =>
    args.operands.length > 0 && !has(args, ...listKeys) ? `git ${what} <name> creates a ${what}` : undefined;
}

const SUBCOMMANDS: Record<string, Sub> = {
  status: sub({
    flags: 'sbvz',
    optional: 'u',
    long: 'short branch porcelain? long verbose untracked-files? ignore-submodules? ignored? column? no-column ahead-behind no-ahead-behind renames no-renames find-renames? null show-stash',
  }),
  log: { grammar: LOG },
  whatchanged: { grammar: LOG },
  show: { grammar: LOG },
  'rev-list': { grammar: LOG },
  shortlog: sub({
    flags: `nsec${DIFF_FLAGS}`,
    values: 'w',
    long: `numbered summary email committer group= format= ${REV_LONG}`,
    numeric: true,
  }),
  diff: { grammar: DIFF },
  'diff-tree': { grammar: DIFF_TREE },
  'diff-files': { grammar: DIFF },
  'diff-index': { grammar: DIFF },
  'range-diff': {
    grammar: grammar({
      endOfOptions: true,
      flags: DIFF_FLAGS,
      long: withCommon(`${DIFF_LONG} creation-factor= no-dual-color left-only right-only`),
    }),
  },
  blame: sub({
    flags: 'bclstfnepwMC',
    values: 'LS',
    long: 'root show-stats score-debug show-name show-number porcelain line-porcelain incremental encoding= contents= date= progress no-progress reverse= first-parent ignore-rev= ignore-revs-file= color-lines color-by-age minimal abbrev= show-email',
  }),
  annotate: sub({
    flags: 'bclstfnepwMC',
    values: 'LS',
    long: 'root show-stats porcelain incremental encoding= date= abbrev= show-email',
  }),
  'rev-parse': sub({
    long: 'show-toplevel git-dir is-inside-work-tree is-inside-git-dir abbrev-ref? short? verify quiet symbolic-full-name show-prefix show-cdup absolute-git-dir git-common-dir is-bare-repository is-shallow-repository show-superproject-working-tree all branches? tags? remotes? default= sq sq-quote local-env-vars path-format= git-path= show-object-format? resolve-git-dir= since= after= until= before= keep-dashdash stop-at-non-option stuck-long revs-only no-revs flags no-flags symbolic disambiguate= exclude= exclude-hidden= glob= not show-ref-format',
    flags: 'q',
  }),
  'ls-files': sub({
    flags: 'cdoisukmtvfz',
    values: 'xX',
    long: 'cached deleted others ignored stage unmerged killed modified directory no-empty-directory eol exclude= exclude-from= exclude-per-directory= exclude-standard error-unmatch with-tree= full-name recurse-submodules abbrev? debug deduplicate sparse format= resolve-undo',
  }),
  'ls-tree': sub({
    flags: 'drtlz',
    long: 'name-only name-status object-only full-name full-tree abbrev? format= long',
  }),
  describe: sub({
    long: 'all tags contains abbrev= candidates= exact-match debug long match= exclude= always first-parent dirty? broken?',
  }),
  'cat-file': sub({
    flags: 'tsepZ',
    long: 'batch? batch-check? batch-command? batch-all-objects buffer follow-symlinks unordered allow-unknown-type use-mailmap no-use-mailmap mailmap no-mailmap',
  }),
  grep: sub({
    flags: 'aiIwvhHEGFPnlLcoqzr',
    values: 'efABCm',
    long: 'cached no-index untracked no-exclude-standard exclude-standard recurse-submodules text no-textconv ignore-case word-regexp invert-match full-name extended-regexp basic-regexp perl-regexp fixed-strings line-number column files-with-matches name-only files-without-match null count color? no-color break heading show-function function-context threads= max-depth= max-count= and or not all-match quiet only-matching after-context= before-context= context=',
    numeric: true,
  }),
  reflog: sub({ flags: `${DIFF_FLAGS}`, values: 'n', long: REV_LONG, numeric: true }, (args) => {
    const first = args.operands[0]?.value;
    if (
      first !== undefined &&
      !['show', 'list', 'exists'].includes(first) &&
      /^(expire|delete|drop|write)$/.test(first)
    )
      return `git reflog ${first} changes the reflog`;
    return undefined;
  }),
  'merge-base': sub({ flags: 'a', long: 'all octopus independent is-ancestor fork-point' }),
  'name-rev': sub({ long: 'tags refs= exclude= all annotate-stdin name-only no-undefined always' }),
  version: sub({ long: 'build-options' }),
  // `--merged`, `--contains` and their negations take the next word unless they are the last one
  // (then HEAD): git's PARSE_OPT_LASTARG_DEFAULT.
  branch: sub(
    {
      flags: 'arlvqi',
      long: 'list all remotes verbose contains~ no-contains~ merged~ no-merged~ points-at= sort= format= color? no-color column? no-column show-current abbrev= no-abbrev ignore-case omit-empty quiet',
    },
    listOnly('branch', ['-l', '--list']),
  ),
  tag: sub(
    {
      flags: 'li',
      values: 'n',
      long: 'list contains~ no-contains~ merged~ no-merged~ points-at= sort= format= color? column? no-column ignore-case omit-empty',
    },
    listOnly('tag', ['-l', '--list', '-n']),
  ),
  remote: sub({ flags: 'v', long: 'verbose push all' }, (args) => {
    const first = args.operands[0]?.value;
    if (first === undefined) return undefined;
    if (first === 'get-url') return undefined;
    return `git remote ${args.operands[0]!.raw} changes remotes or contacts them`;
  }),
  stash: sub(
    {
      flags: `${DIFF_FLAGS}`,
      values: 'n',
      long: `${DIFF_LONG} ${REV_LONG} include-untracked only-untracked`,
      numeric: true,
    },
    (args) => {
      const first = args.operands[0]?.value;
      return first === 'list' || first === 'show'
        ? undefined
        : 'git stash without list/show changes the working tree';
    },
  ),
  worktree: sub({ flags: 'vz', long: 'porcelain verbose expire=' }, (args) =>
    args.operands[0]?.value === 'list' && args.operands.length === 1
      ? undefined
      : 'only git worktree list is read-only',
  ),
  config: sub(
    {
      flags: 'lzf',
      long: 'get get-all get-regexp get-urlmatch get-color get-colorbool list show-origin show-scope name-only null local global system worktree file= blob= type= bool int bool-or-int path expiry-date default= includes no-includes fixed-value all regexp value= url=',
    },
    (args) => {
      const first = args.operands[0]?.value;
      const read = has(
        args,
        '--get',
        '--get-all',
        '--get-regexp',
        '--get-urlmatch',
        '--get-color',
        '--get-colorbool',
        '--list',
        '-l',
      );
      if (read) return undefined;
      if (first === 'get' || first === 'list') return undefined;
      // `git config <key>` with no value reads it (set/unset/edit/… are subcommands that write).
      if (
        args.operands.length === 1 &&
        first !== undefined &&
        !/^(set|unset|edit|rename-section|remove-section)$/.test(first)
      )
        return undefined;
      return 'git config without --get/--list (or get/list) writes the config';
    },
  ),
  'count-objects': sub({ flags: 'vH', long: 'verbose human-readable' }),
  'for-each-ref': sub({
    long: 'format= sort= count= points-at= merged~ no-merged~ contains~ no-contains~ ignore-case omit-empty exclude= shell perl python tcl include-root-refs',
  }),
  'show-ref': sub({
    flags: 'dsq',
    long: 'head dereference hash? abbrev? tags heads branches verify quiet exists',
  }),
  'symbolic-ref': sub({ flags: 'q', long: 'short quiet no-recurse recurse' }, (args) =>
    args.operands.length > 1 ? 'git symbolic-ref with two operands changes a ref' : undefined,
  ),
  'check-ignore': sub({ flags: 'qvnz', long: 'quiet verbose non-matching no-index' }),
  'check-attr': sub({ flags: 'az', long: 'all cached source=' }),
  cherry: sub({ flags: 'v', long: 'abbrev?' }),
  var: sub({ flags: 'l' }),
};

/** git's global flags that change neither the command nor the repository it opens (host rules look through them). */
export const GIT_HARMLESS_FLAGS: ReadonlySet<string> = new Set([
  '--no-pager',
  '-P',
  '--no-optional-locks',
  '--literal-pathspecs',
  '--glob-pathspecs',
  '--noglob-pathspecs',
  '--icase-pathspecs',
  '--no-replace-objects',
  '--no-lazy-fetch',
  '--no-advice',
]);

/** git's global options that neither change the repository nor run anything. */
const GLOBAL_FLAGS = new Set([...GIT_HARMLESS_FLAGS, '--html-path', '--man-path', '--info-path']);

/**
 * git read commands: the global options git's handle_options reads (exact spellings), then a
 * read-only subcommand by its grammar. The repository the read opens is reported for its config to
 * be checked: where `-C` dirs lead (each relative to the one before), and `--git-dir=X` /
 * `--git-dir X` or `--bare` (the directory itself is the git dir) when they name it.
 */
export function gitCheck(all: readonly Arg[]): { reason?: string; effects?: ReadOnlyEffects } {
  let i = 0;
  const chdirs: Arg[] = [];
  let repository: ReadOnlyEffects['repository'];
  for (; i < all.length; i++) {
    const a = all[i]!;
    const v = a.value;
    if (v === undefined) return { reason: `git option ${a.raw} is only known at run time` };
    if (v === '-C') {
      const dir = all[++i];
      if (!dir) return { reason: 'git -C needs a directory' };
      chdirs.push(dir);
      continue;
    }
    if (v === '--bare') {
      repository = { bare: true };
      continue;
    }
    if (v === '--git-dir' || v.startsWith('--git-dir=')) {
      const dir = v === '--git-dir' ? all[++i] : literalArg(v.slice('--git-dir='.length));
      if (!dir) return { reason: 'git --git-dir needs a directory' };
      if (dir.value === undefined)
        return { reason: `git --git-dir ${dir.raw} names a repository only known at run time` };
      repository = { gitDir: dir };
      continue;
    }
    if (GLOBAL_FLAGS.has(v)) continue;
    if (v === '--version' || v === '-v' || v === '--exec-path') {
      // Printing the version or the exec path reads no repository config.
      return i === all.length - 1 ? {} : { reason: `git ${v} with more arguments` };
    }
    if (v.startsWith('-'))
      return {
        reason: `git ${v} can change what git runs or where it reads its config (-c, --work-tree, --exec-path=, -p); only plain read-only subcommands are known to be harmless`,
      };
    break;
  }
  const effects = gitEffects(chdirs, repository);
  const name = all[i]?.value;
  if (name === undefined) return { effects };
  const spec = Object.hasOwn(SUBCOMMANDS, name) ? SUBCOMMANDS[name] : undefined;
  if (!spec) return { reason: `git ${name} is not a read-only git command` };
  const parsed = parseArgs(spec.grammar, all.slice(i + 1), `git ${name}`);
  if (!parsed.ok) return { reason: parsed.reason };
  const why = spec.check?.(parsed.args);
  if (why) return { reason: why };
  return { effects };
}

/** The directory every `-C` leads to (`git -C a -C b` runs in a/b), as one word. */
function gitEffects(chdirs: readonly Arg[], repository: ReadOnlyEffects['repository']): ReadOnlyEffects {
  const effects: ReadOnlyEffects = { git: true, ...(repository ? { repository } : {}) };
  if (chdirs.length === 0) return effects;
  const values = chdirs.map((a) => a.value);
  if (values.some((v) => v === undefined))
    return { ...effects, gitDir: runtimeArg(chdirs.map((a) => a.raw).join('/')) };
  let path = '';
  for (const v of values as string[]) path = v.startsWith('/') || path === '' ? v : `${path}/${v}`;
  return { ...effects, gitDir: literalArg(path) };
}

/**
 * Config keys that make git run a program (or write where it should not). Setting one is denied
 * like a write to a protected file; a repository config that sets one makes git reads ask.
 */
export const GIT_EXEC_KEYS =
  /^(core\.(pager|editor|hookspath|fsmonitor|sshcommand|askpass|gitproxy|alternaterefscommand)|diff\.external|diff\.guitool|diff\..+\.(textconv|command)|merge\..+\.driver|mergetool\..+\.(cmd|path)|difftool\..+\.(cmd|path)|filter\..+\.(clean|smudge|process)|alias\..+|credential\.helper|credential\..+\.helper|gpg\.program|gpg\..+\.program|sequence\.editor|include\.path|includeif\..+\.path|uploadpack\.packobjectshook|receive\.procreceiverefs|pager\..+|web\.browser|browser\..+\.(cmd|path)|man\.viewer|man\..+\.(cmd|path)|sendemail\..*(cmd|smtpserver)|remote\..+\.(uploadpack|receivepack|vcs)|protocol\..+\.allow|protocol\.allow|ssh\.variant|log\.showsignature|submodule\..+\.update|interactive\.difffilter|instaweb\..+|guitool\..+\.cmd|init\.templatedir|trace2\..+)$/i;
