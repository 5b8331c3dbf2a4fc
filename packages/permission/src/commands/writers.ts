import { grammar, optionValue, parseArgs, type Grammar, type ParsedArgs } from '../grammar.js';
import { HOME_MARK } from '../paths.js';
import { escapeGlob, literalArg, runtimeArg, type Arg } from '../words.js';
import { GIT_EXEC_KEYS } from './git.js';
import { parseFind } from './find.js';
import { READ_ONLY, unzipMode } from './read-only.js';

/**
 * What writing commands write, for the deny rules (protected paths, recursive deletes of roots).
 * Each command's grammar finds targets wherever they are spelled (`-t dir`, `-vt dir`,
 * `--target-directory=dir`, `--targ=dir`, `curl -sSLo f`); when a command line does not parse,
 * every operand and option value counts as a possible target (over-approximation: a deny rule
 * must not miss a spelling).
 */
export interface WriteFacts {
  /** Files or directories the command creates, changes or removes. */
  writes: { target: Arg; via: string; followFinal: boolean }[];
  /** Directories the command writes files of unknown names into (`tar -x -C d`, `curl -J`). */
  intoDirs: { dir: Arg; via: string }[];
  /** Trees removed (rm -r), moved away (mv) or emptied (rsync --delete): root checks apply. */
  trees: { target: Arg; via: string }[];
  /** `git config <key> <value>` of a key that makes git run a program. */
  gitExecKey?: string;
  /**
   * Sources copied (or moved, linked) into a directory: each lands at `dir/<its name>`, and a
   * recursive copy brings the source's whole tree along.
   */
  copies?: { sources: Arg[]; dir: Arg; mustBeDir: boolean; recursive: boolean; via: string }[];
}

const g = grammar;
const common = 'help version';

function empty(): WriteFacts {
  return { writes: [], intoDirs: [], trees: [] };
}

/** Every operand and option value: what a command that did not parse may write. */
function everything(args: readonly Arg[], via: string): WriteFacts {
  const facts = empty();
  for (const a of args) {
    const v = a.value;
    if (v !== undefined && v.startsWith('-')) {
      const eq = v.indexOf('=');
      if (eq > 0) facts.writes.push({ target: literalArg(v.slice(eq + 1)), via, followFinal: true });
      continue;
    }
    facts.writes.push({ target: a, via, followFinal: true });
  }
  return facts;
}

function parsed(gr: Grammar, args: readonly Arg[], name: string): ParsedArgs | undefined {
  const r = parseArgs(gr, args, name);
  return r.ok ? r.args : undefined;
}

function values(p: ParsedArgs, ...keys: string[]): Arg[] {
  const out: Arg[] = [];
  for (const o of p.options) {
    if (!keys.includes(o.def.key) || o.value === undefined) continue;
    out.push(typeof o.value === 'string' ? literalArg(o.value) : o.value);
  }
  return out;
}

function hasOpt(p: ParsedArgs, ...keys: string[]): boolean {
  return p.options.some((o) => keys.includes(o.def.key));
}

type Extractor = (args: readonly Arg[], name: string) => WriteFacts;

/**
 * cp/mv/ln/install: the target directory option, else the last operand (and, for some, the
 * sources). A hard link (`ln`, `cp -l`) gives the source a new name: when the tool dereferences a
 * source symlink first (`ln -L`, `cp -l` unless `-P`/`-d`/`-a`, symbolic links of either) the
 * source is judged by what it points to, so a link to a link to `~/.bashrc` is `~/.bashrc`.
 */
function copyLike(
  gr: Grammar,
  sourcesAreWritten: (p: ParsedArgs) => boolean,
  followSources: (p: ParsedArgs) => boolean = () => false,
): Extractor {
  return (args, name) => {
    const p = parsed(gr, args, name);
    if (!p) return everything(args, name);
    const facts = empty();
    const dirs = values(p, '--target-directory', '-t');
    const targets = dirs.length > 0 ? dirs : p.operands.slice(-1);
    const sources = dirs.length > 0 ? p.operands : p.operands.slice(0, -1);
    const noTargetDir = hasOpt(p, '-T', '--no-target-directory');
    for (const t of targets) facts.writes.push({ target: t, via: name, followFinal: !noTargetDir });
    if (!noTargetDir && sources.length > 0)
      facts.copies = targets.map((dir) => ({
        sources,
        dir,
        // With -t, several sources or a trailing slash the target must be a directory; else it
        // is one only if it exists as one.
        mustBeDir: dirs.length > 0 || sources.length > 1 || (dir.value?.endsWith('/') ?? false),
        recursive: name === 'mv' || hasOpt(p, '-r', '-R', '--recursive', '-a', '--archive'),
        via: name,
      }));
    if (sourcesAreWritten(p)) {
      const follow = followSources(p);
      for (const s of sources) facts.writes.push({ target: s, via: name, followFinal: follow });
    }
    if (name === 'mv') for (const s of sources) facts.trees.push({ target: s, via: 'mv' });
    return facts;
  };
}

const CP = g({
  flags: 'abdfHilLnPprRsTuvxZ',
  values: 'St',
  long: `archive attributes-only backup? copy-contents debug force interactive link dereference no-clobber no-dereference preserve? no-preserve= parents recursive reflink? remove-destination sparse= strip-trailing-slashes suffix= symbolic-link target-directory= no-target-directory update? verbose keep-directory-symlink one-file-system context? ${common}`,
});
const MV = g({
  flags: 'bfinuvZT',
  values: 'St',
  long: `backup? debug exchange force interactive no-clobber no-copy strip-trailing-slashes suffix= target-directory= no-target-directory update? verbose context ${common}`,
});
const LN = g({
  flags: 'bdFfiLnPrsTv',
  values: 'St',
  long: `backup? directory force interactive logical no-dereference physical relative symbolic suffix= target-directory= no-target-directory verbose ${common}`,
});
const INSTALL = g({
  flags: 'bCcDdpsTvZ',
  values: 'gmoSt',
  long: `backup? compare directory group= mode= owner= preserve-timestamps strip strip-program= suffix= target-directory= no-target-directory verbose preserve-context context? debug ${common}`,
});
const RM = g({
  flags: 'dfiIrRv',
  long: `force interactive? one-file-system no-preserve-root preserve-root? recursive dir verbose ${common}`,
});
const SIMPLE_TARGETS: Record<string, Grammar> = {
  rmdir: g({ flags: 'pv', long: `ignore-fail-on-non-empty parents verbose ${common}` }),
  unlink: g({ long: common }),
  shred: g({
    flags: 'fuvxz',
    values: 'ns',
    long: `force iterations= random-source= size= remove? verbose exact zero ${common}`,
  }),
  truncate: g({ flags: 'co', values: 'rs', long: `no-create io-blocks reference= size= ${common}` }),
  touch: g({
    flags: 'acfhm',
    values: 'drt',
    long: `no-create date= no-dereference reference= time= ${common}`,
  }),
  tee: g({ flags: 'aip', long: `append ignore-interrupts output-error? ${common}` }),
  mkdir: g({ flags: 'pvZ', values: 'm', long: `mode= parents verbose context? ${common}` }),
  mkfifo: g({ flags: 'Z', values: 'm', long: `mode= context? ${common}` }),
  'ssh-keygen': g({ flags: 'ABcDeFgHhiKkLlMpQqRrUuvy', values: 'abCEfGIJjmNnOPrSsTtwYZz' }),
};
const CHMOD = g({
  flags: 'cfvR',
  long: `changes silent quiet verbose no-preserve-root preserve-root reference= recursive ${common}`,
});
const CHOWN = g({
  flags: 'cfhvRHLP',
  long: `changes silent quiet verbose dereference no-dereference from= reference= recursive no-preserve-root preserve-root ${common}`,
});
const SED_FULL = g({
  flags: 'nErsuzi',
  values: 'elf',
  long: `quiet silent regexp-extended separate unbuffered null-data zero-terminated posix debug sandbox expression= file= line-length= in-place? follow-symlinks binary ${common}`,
});
const CURL_WRITES = g({
  flags: 'aBfgGhiIjJkLlMnNOpqRsSvVZ012346#',
  values: 'AbcCdDeEFHKmoPQrtTuUwxXyYz',
  long:
    'output= output-dir= dump-header= cookie-jar= trace= trace-ascii= stderr= libcurl= etag-save= hsts= alt-svc= remote-name remote-name-all ' +
    'remote-header-name create-dirs config= write-out= url=',
});
const WGET = g({
  flags: 'bqvnNxrkKmpcSdhV',
  values: 'OoaPieQtTlwUADR',
  long:
    'output-document= output-file= append-output= directory-prefix= force-directories no-directories input-file= config= execute= ' +
    'recursive mirror page-requisites continue timestamping no-clobber content-disposition default-page= quiet verbose no-verbose ' +
    'tries= timeout= user-agent= header= post-data= post-file= method= body-data= body-file= no-check-certificate level= accept= reject= ' +
    `domains= user= password= https-only no-parent span-hosts convert-links adjust-extension backups= ${common}`,
});
const TAR_DIR = /^-([A-Za-z]*)C$|^--directory(=.*)?$/;
const SPLIT = g({
  flags: 'dxeu',
  values: 'abClnt',
  long: `suffix-length= additional-suffix= bytes= line-bytes= numeric-suffixes? hex-suffixes? elide-empty-files filter= lines= number= separator= unbuffered verbose ${common}`,
});
const CSPLIT = g({
  flags: 'ksz',
  values: 'bfn',
  long: `suffix-format= prefix= keep-files suppress-matched digits= quiet silent elide-empty-files ${common}`,
});
const MKTEMP = g({
  flags: 'dqut',
  values: 'p',
  long: `directory dry-run quiet suffix= tmpdir? ${common}`,
});

const EXTRACTORS: Record<string, Extractor> = {
  cp: copyLike(
    CP,
    (p) => hasOpt(p, '-l', '--link', '-s', '--symbolic-link'),
    (p) =>
      hasOpt(p, '-L', '--dereference', '-s', '--symbolic-link') ||
      !hasOpt(p, '-P', '--no-dereference', '-d', '-a', '--archive'),
  ),
  mv: copyLike(MV, () => true),
  ln: copyLike(
    LN,
    () => true,
    (p) => hasOpt(p, '-L', '--logical', '-s', '--symbolic'),
  ),
  // `link FILE1 FILE2`: a second name for FILE1 (link(2) does not follow a symlink FILE1).
  link(args, name) {
    const p = parsed(g({ long: common }), args, name);
    if (!p) return everything(args, name);
    const facts = empty();
    for (const t of p.operands) facts.writes.push({ target: t, via: 'link', followFinal: false });
    return facts;
  },
  split(args, name) {
    const p = parsed(SPLIT, args, name);
    if (!p) return everything(args, name);
    const facts = empty();
    const prefix = p.operands[1] ?? literalArg('x');
    const suffix = values(p, '--additional-suffix')[0];
    const chars = hasOpt(p, '-d', '--numeric-suffixes')
      ? '[0-9]'
      : hasOpt(p, '-x', '--hex-suffixes')
        ? '[0-9a-f]'
        : '[a-z]';
    facts.writes.push({ target: prefixed(prefix, `${chars}*`, suffix), via: 'split', followFinal: true });
    return facts;
  },
  csplit(args, name) {
    const p = parsed(CSPLIT, args, name);
    if (!p) return everything(args, name);
    const facts = empty();
    const prefix = values(p, '-f', '--prefix')[0] ?? literalArg('xx');
    facts.writes.push({ target: prefixed(prefix, '*', undefined), via: 'csplit', followFinal: true });
    return facts;
  },
  mktemp(args, name) {
    const p = parsed(MKTEMP, args, name);
    if (!p) return everything(args, name);
    const facts = empty();
    const template = p.operands[0] ?? literalArg('tmp.XXXXXXXXXX');
    const dirOption = values(p, '-p', '--tmpdir')[0];
    const inDir = dirOption !== undefined || hasOpt(p, '--tmpdir', '-t') || p.operands.length === 0;
    const dir = dirOption ?? (inDir ? literalArg('/tmp') : undefined);
    const suffix = values(p, '--suffix')[0];
    facts.writes.push({ target: templated(dir, template, suffix), via: 'mktemp', followFinal: false });
    return facts;
  },
  install: copyLike(INSTALL, () => false),
  rm(args, name) {
    const p = parsed(RM, args, name);
    if (!p) {
      const facts = everything(args, name);
      facts.trees.push(...facts.writes.map((w) => ({ target: w.target, via: 'rm -r' })));
      return facts;
    }
    const facts = empty();
    const recursive = hasOpt(p, '-r', '-R', '--recursive');
    for (const t of p.operands) {
      facts.writes.push({ target: t, via: 'rm', followFinal: false });
      if (recursive) facts.trees.push({ target: t, via: 'rm -r' });
    }
    return facts;
  },
  chmod: modeFirst(CHMOD),
  chown: modeFirst(CHOWN),
  chgrp: modeFirst(CHOWN),
  dd(args) {
    const facts = empty();
    for (const a of args) {
      const v = a.value ?? a.raw;
      if (v.startsWith('of='))
        facts.writes.push({
          target: a.value !== undefined ? literalArg(v.slice(3)) : a,
          via: 'dd of=',
          followFinal: true,
        });
    }
    return facts;
  },
  sed(args, name) {
    const p = parsed(SED_FULL, args, name);
    if (!p) return everything(args, name);
    const facts = empty();
    const scripts = values(p, '-e', '--expression');
    let operands = p.operands;
    if (scripts.length === 0 && !hasOpt(p, '-f', '--file') && operands[0]) {
      scripts.push(operands[0]);
      operands = operands.slice(1);
    }
    for (const s of scripts) {
      if (s.value === undefined) continue;
      for (const file of sedWriteFiles(s.value))
        facts.writes.push({ target: literalArg(file), via: 'sed w', followFinal: true });
    }
    if (hasOpt(p, '-i', '--in-place'))
      for (const t of operands)
        facts.writes.push({ target: t, via: 'sed -i', followFinal: hasOpt(p, '--follow-symlinks') });
    return facts;
  },
  perl: inPlace('perl'),
  ruby: inPlace('ruby'),
  curl(args, name) {
    const p = parsed(CURL_WRITES, args, name);
    if (!p) return everything(args, name);
    const facts = empty();
    for (const t of values(
      p,
      '-o',
      '--output',
      '-D',
      '--dump-header',
      '-c',
      '--cookie-jar',
      '--trace',
      '--trace-ascii',
      '--stderr',
      '--libcurl',
      '--etag-save',
      '--hsts',
      '--alt-svc',
    ))
      facts.writes.push({ target: t, via: 'curl', followFinal: true });
    for (const w of values(p, '-w', '--write-out')) {
      const m = w.value && /%output\{>?>?([^}]*)\}/.exec(w.value);
      if (m) facts.writes.push({ target: literalArg(m[1]!), via: 'curl -w %output', followFinal: true });
    }
    const dir = values(p, '--output-dir')[0] ?? literalArg('.');
    if (hasOpt(p, '-O', '--remote-name', '--remote-name-all')) {
      for (const url of [...p.operands, ...values(p, '--url')]) {
        const base = urlBase(url);
        if (base === undefined) facts.intoDirs.push({ dir, via: 'curl -O' });
        else facts.writes.push({ target: joinArg(dir, base), via: 'curl -O', followFinal: true });
      }
    }
    if (hasOpt(p, '-J', '--remote-header-name', '-K', '--config')) facts.intoDirs.push({ dir, via: 'curl' });
    return facts;
  },
  wget(args, name) {
    const p = parsed(WGET, args, name);
    if (!p) return everything(args, name);
    const facts = empty();
    for (const t of values(p, '-O', '--output-document', '-o', '--output-file', '-a', '--append-output'))
      if (t.value !== '-') facts.writes.push({ target: t, via: 'wget', followFinal: true });
    const dir = values(p, '-P', '--directory-prefix')[0] ?? literalArg('.');
    if (!hasOpt(p, '-O', '--output-document')) {
      const unknownNames = hasOpt(
        p,
        '-r',
        '--recursive',
        '-m',
        '--mirror',
        '--content-disposition',
        '-x',
        '--force-directories',
        '-i',
        '--input-file',
        '-e',
        '--execute',
        '--config',
      );
      if (unknownNames) facts.intoDirs.push({ dir, via: 'wget' });
      for (const url of p.operands) {
        const base = urlBase(url);
        if (base === undefined) facts.intoDirs.push({ dir, via: 'wget' });
        else facts.writes.push({ target: joinArg(dir, base), via: 'wget', followFinal: true });
      }
    }
    return facts;
  },
  tar(args) {
    const facts = empty();
    const extract = args.some((a, i) => {
      const v = a.value ?? '';
      if (/^--(extract|get)$/.test(v)) return true;
      if (i === 0 && /^[A-Za-z]+$/.test(v)) return v.includes('x'); // old style: tar xzf a.tgz
      return /^-[A-Za-z]*x/.test(v);
    });
    for (let i = 0; i < args.length; i++) {
      const v = args[i]!.value ?? '';
      const m = TAR_DIR.exec(v);
      if (m) {
        const dir = m[2] ? literalArg(m[2].slice(1)) : args[i + 1];
        if (dir && extract) facts.intoDirs.push({ dir, via: 'tar -x' });
      }
    }
    if (extract && !facts.intoDirs.length) facts.intoDirs.push({ dir: literalArg('.'), via: 'tar -x' });
    return facts;
  },
  unzip(args) {
    const facts = empty();
    if (unzipMode(args).ok) return facts;
    const d = args.findIndex((a) => a.value === '-d');
    facts.intoDirs.push({ dir: d >= 0 && args[d + 1] ? args[d + 1]! : literalArg('.'), via: 'unzip' });
    return facts;
  },
  rsync(args) {
    const facts = empty();
    const operands = args.filter((a) => !(a.value ?? '').startsWith('-'));
    const dest = operands[operands.length - 1];
    if (dest && !/^[^/]*:/.test(dest.value ?? '')) {
      facts.writes.push({ target: dest, via: 'rsync', followFinal: true });
      if (args.some((a) => /^--(delete|del$|remove-source)/.test(a.value ?? '')))
        facts.trees.push({ target: dest, via: 'rsync --delete' });
    }
    return facts;
  },
  scp(args) {
    const facts = empty();
    const operands = args.filter((a) => !(a.value ?? '').startsWith('-'));
    const dest = operands[operands.length - 1];
    if (dest && !/^[^/]*:/.test(dest.value ?? ''))
      facts.writes.push({ target: dest, via: 'scp', followFinal: true });
    return facts;
  },
  sort(args) {
    const facts = empty();
    for (let i = 0; i < args.length; i++) {
      const v = args[i]!.value ?? '';
      if (v === '-o' && args[i + 1])
        facts.writes.push({ target: args[i + 1]!, via: 'sort -o', followFinal: true });
      else if (/^-[a-zA-Z]*o./.test(v))
        facts.writes.push({
          target: literalArg(v.slice(v.indexOf('o') + 1)),
          via: 'sort -o',
          followFinal: true,
        });
      else if (/^--o(u(t(p(ut?)?)?)?)?=/.test(v))
        facts.writes.push({
          target: literalArg(v.slice(v.indexOf('=') + 1)),
          via: 'sort --output',
          followFinal: true,
        });
      else if (/^--o(u(t(p(ut?)?)?)?)?$/.test(v) && args[i + 1])
        facts.writes.push({ target: args[i + 1]!, via: 'sort --output', followFinal: true });
    }
    return facts;
  },
  uniq: secondOperand(READ_ONLY.uniq!.grammar),
  xxd: secondOperand(READ_ONLY.xxd!.grammar),
  tree(args) {
    const facts = empty();
    for (let i = 0; i < args.length; i++) {
      const v = args[i]!.value ?? '';
      if (v === '-o' && args[i + 1])
        facts.writes.push({ target: args[i + 1]!, via: 'tree -o', followFinal: true });
    }
    return facts;
  },
  find(args) {
    const plan = parseFind(args);
    const facts = empty();
    for (const w of plan.writes)
      facts.writes.push({ target: w.target, via: `find ${w.action}`, followFinal: true });
    if (plan.deletes && !plan.narrowed)
      for (const s of plan.starts.length ? plan.starts : [literalArg('.')])
        facts.trees.push({ target: s, via: 'find -delete' });
    return facts;
  },
  git(args) {
    const facts = empty();
    let i = 0;
    const chdir: Arg[] = [];
    while (i < args.length && (args[i]!.value ?? '-').startsWith('-')) {
      if (args[i]!.value === '-C' && args[i + 1]) chdir.push(args[i + 1]!);
      // Global options that take the next word (`--git-dir x config …` is still `git config`).
      i += /^(-C|-c|--git-dir|--work-tree|--namespace|--super-prefix|--config-env)$/.test(
        args[i]!.value ?? '',
      )
        ? 2
        : 1;
    }
    if (args[i]?.value === 'clone') return gitClone(args.slice(i + 1), chdir);
    if (args[i]?.value !== 'config') return facts;
    const rest = args.slice(i + 1);
    const file = rest.findIndex((a) => a.value === '--file' || a.value === '-f');
    if (file >= 0 && rest[file + 1])
      facts.writes.push({ target: rest[file + 1]!, via: 'git config --file', followFinal: true });
    const eqFile = rest.find((a) => a.value?.startsWith('--file='));
    if (eqFile)
      facts.writes.push({
        target: literalArg(eqFile.value!.slice(7)),
        via: 'git config --file',
        followFinal: true,
      });
    const read = rest.some((a) =>
      /^--(get|get-all|get-regexp|get-urlmatch|list|get-color|get-colorbool)$|^-l$/.test(a.value ?? ''),
    );
    if (read) return facts;
    const words = rest.filter(
      (a, j) =>
        !(a.value ?? '').startsWith('-') &&
        !(j > 0 && /^(--file|-f|--blob|--type|--default)$/.test(rest[j - 1]!.value ?? '')),
    );
    const [first, second, third] = words;
    const key = first?.value === 'set' ? second : first;
    const hasValue = first?.value === 'set' ? third !== undefined : second !== undefined;
    // The user's or the system's git config: git runs what they name (core.pager, aliases with
    // `!`) in every repository. A change to it (a value, an unset, an edit) is judged by name:
    // `.gitconfig` is protected wherever it is. Reads of one key (`git config --global user.name`)
    // change nothing.
    const changes =
      hasValue ||
      /^(unset|rename-section|remove-section|edit)$/.test(first?.value ?? '') ||
      rest.some((a) =>
        /^(--(unset|unset-all|add|replace-all|rename-section|remove-section|edit)|-e)$/.test(a.value ?? ''),
      );
    if (changes && rest.some((a) => a.value === '--global'))
      facts.writes.push({
        target: literalArg(`${HOME_MARK}/.gitconfig`),
        via: 'git config --global',
        followFinal: true,
      });
    if (changes && rest.some((a) => a.value === '--system'))
      facts.writes.push({
        target: literalArg('/etc/gitconfig'),
        via: 'git config --system',
        followFinal: true,
      });
    if (key && hasValue) {
      if (key.value === undefined) facts.gitExecKey = `a key only known at run time (${key.raw})`;
      else if (GIT_EXEC_KEYS.test(key.value)) facts.gitExecKey = key.value;
    }
    return facts;
  },
};

const GIT_CLONE = g({
  flags: 'lsqvn',
  values: 'obucj',
  long:
    'local no-hardlinks shared quiet verbose progress no-checkout bare mirror origin= branch= upload-pack= template= ' +
    'config= depth= shallow-since= shallow-exclude= single-branch no-single-branch no-tags recurse-submodules? ' +
    'shallow-submodules no-shallow-submodules remote-submodules no-remote-submodules separate-git-dir= jobs= ' +
    'filter= also-filter-submodules sparse reject-shallow no-reject-shallow reference= reference-if-able= dissociate ' +
    'server-option= bundle-uri= ref-format= revision= no-progress',
});

/** `git clone [options] <repo> [<dir>]`: the directory it creates (and a separate git dir). */
function gitClone(args: readonly Arg[], chdir: readonly Arg[]): WriteFacts {
  const p = parsed(GIT_CLONE, args, 'git clone');
  if (!p) return everything(args, 'git clone');
  const facts = empty();
  // `git -C a -C b clone r d` creates a/b/d: relative targets are judged from the -C directories.
  const from = (t: Arg): Arg => {
    if (chdir.length === 0) return t;
    const parts = [...chdir, t].map((a) => a.value);
    if (parts.some((v) => v === undefined)) return runtimeArg(t.raw);
    let path = '';
    for (const v of parts as string[]) path = v.startsWith('/') || path === '' ? v : `${path}/${v}`;
    return literalArg(path);
  };
  const dir = p.operands[1];
  if (dir) facts.writes.push({ target: from(dir), via: 'git clone', followFinal: true });
  for (const d of values(p, '--separate-git-dir'))
    facts.writes.push({ target: from(d), via: 'git clone --separate-git-dir', followFinal: true });
  return facts;
}

for (const [name, gr] of Object.entries(SIMPLE_TARGETS)) {
  EXTRACTORS[name] = (args) => {
    const p = parsed(gr, args, name);
    if (!p) return everything(args, name);
    const facts = empty();
    const targets = name === 'ssh-keygen' ? values(p, '-f') : p.operands;
    for (const t of targets)
      facts.writes.push({ target: t, via: name, followFinal: name !== 'rmdir' && name !== 'unlink' });
    for (const r of values(p, '-r', '--reference')) void r;
    return facts;
  };
}

function modeFirst(gr: Grammar): Extractor {
  return (args, name) => {
    const p = parsed(gr, args, name);
    if (!p) return everything(args, name);
    const facts = empty();
    const targets = hasOpt(p, '--reference') ? p.operands : p.operands.slice(1);
    for (const t of targets) facts.writes.push({ target: t, via: name, followFinal: true });
    if (hasOpt(p, '-R', '--recursive'))
      for (const t of targets) facts.trees.push({ target: t, via: `${name} -R` });
    return facts;
  };
}

function inPlace(name: string): Extractor {
  return (args) => {
    const facts = empty();
    const edits = args.some((a) => /^-[A-Za-z]*i/.test(a.value ?? ''));
    if (!edits) return facts;
    let skipNext = false;
    for (const a of args) {
      if (skipNext) {
        skipNext = false;
        continue;
      }
      const v = a.value ?? '';
      if (/^-[A-Za-z]*[eE]$/.test(v)) {
        skipNext = true;
        continue;
      }
      if (v.startsWith('-')) continue;
      facts.writes.push({ target: a, via: `${name} -i`, followFinal: true });
    }
    return facts;
  };
}

/** `uniq IN OUT`, `xxd IN OUT`: the second operand, read by the program's own grammar (`xxd -l 16 f`). */
function secondOperand(gr: Grammar): Extractor {
  return (args, name) => {
    const p = parsed(gr, args, name);
    if (!p) return everything(args, name);
    const facts = empty();
    const out = p.operands[1];
    if (out && out.value !== '-') facts.writes.push({ target: out, via: name, followFinal: true });
    return facts;
  };
}

/** The files a writer names by a prefix (`split f ~/.bash` writes `~/.bashaa`): a pattern. */
function prefixed(prefix: Arg, rest: string, suffix: Arg | undefined): Arg {
  const head = prefix.value !== undefined ? escapeGlob(prefix.value) : prefix.pattern;
  const tail =
    suffix === undefined ? '' : suffix.value !== undefined ? escapeGlob(suffix.value) : suffix.pattern;
  return patternArg(`${prefix.raw}…`, `${head}${rest}${tail}`);
}

/** What `mktemp` creates: its template with the run of X's at the end made `?`s, in `dir`. */
function templated(dir: Arg | undefined, template: Arg, suffix: Arg | undefined): Arg {
  if (template.value === undefined || (dir && dir.value === undefined)) return runtimeArg(template.raw);
  const name = escapeGlob(template.value).replace(/X{3,}$/, (xs) => '?'.repeat(xs.length));
  const tail =
    suffix === undefined ? '' : suffix.value !== undefined ? escapeGlob(suffix.value) : suffix.pattern;
  const base = dir ? `${escapeGlob(dir.value!.replace(/\/+$/, ''))}/` : '';
  return patternArg(template.raw, `${base}${name}${tail}`);
}

/** A target known only as a glob pattern (every name it can take). */
function patternArg(raw: string, pattern: string): Arg {
  return { ...runtimeArg(raw), pattern, opaque: false, glob: true, mayBeOption: pattern.startsWith('-') };
}

/** Files a sed script writes: `w file`, `W file`, `s/…/…/w file`. */
export function sedWriteFiles(script: string): string[] {
  const out: string[] = [];
  for (const line of script.split('\n')) {
    for (const m of line.matchAll(/(?:^|[;}\s])\s*(?:[0-9$,/\\!~+]*\s*)?[wW]\s+(\S[^;\n]*)/g))
      out.push(m[1]!.trim());
    for (const m of line.matchAll(/s(.)(?:(?!\1).|\\.)*\1(?:(?!\1).|\\.)*\1[gpIiMm0-9e]*w\s*(\S[^\n]*)/g))
      out.push(m[2]!.trim());
  }
  return out;
}

/** The file name a download of `url` is saved under (-O, wget), or undefined when it cannot be told. */
function urlBase(url: Arg): string | undefined {
  if (url.value === undefined) return undefined;
  // scheme://host/path or host/path (curl and wget assume http).
  const m = /^(?:[a-z][a-z0-9+.-]*:\/\/)?[^/?#]*(\/[^?#]*)?/i.exec(url.value);
  const path = m?.[1] ?? '';
  const base = path.slice(path.lastIndexOf('/') + 1);
  if (!base) return undefined;
  try {
    return decodeURIComponent(base);
  } catch {
    return base;
  }
}

function joinArg(dir: Arg, base: string): Arg {
  if (dir.value === undefined)
    return { ...runtimeArg(`${dir.raw}/${base}`), pattern: `${dir.pattern}/${base}` };
  return literalArg(dir.value === '.' ? base : `${dir.value.replace(/\/$/, '')}/${base}`);
}

/** Write facts of a command (empty for commands not known to write). */
export function writeFacts(name: string, args: readonly Arg[]): WriteFacts | undefined {
  const extractor = Object.hasOwn(EXTRACTORS, name) ? EXTRACTORS[name] : undefined;
  return extractor?.(args, name);
}

export { optionValue };
