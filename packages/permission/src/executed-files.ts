// Owns what a command executes from files: for one simple command the gate has resolved (its
// innermost argv and the directory it runs in), the files that define what it runs and the part of
// each that counts — a package.json's `scripts` entries for the script it runs (so a new
// dependency changes nothing), a Makefile, a repository's config and hooks, a script handed to an
// interpreter or run by path. RUNNERS is the table: a tool is one entry; a program with no entry
// runs nothing a rule could be re-pointed through, and its rule stands on the command line alone.
//
// The same entries say, for a host rule's own text (with its wildcard), everything any command it
// matches could execute in the workspace: what rule-grants.ts snapshots when the rule is granted.
import { readdirSync } from 'node:fs';
import { posix } from 'node:path';
import { readRegularFileSync } from '@conch/core';
import { unwrap } from './commands/wrappers.js';
import {
  ABSENT,
  hooksDir,
  packageKey,
  read,
  scriptEntry,
  scriptsOf,
  shown,
  statQuiet,
  UNREADABLE,
  unique,
  wholeFile,
  type Piece,
  type Reader,
} from './executed-pieces.js';
import type { RunFacts } from './facts.js';
import { hookDelegates, type HookManagerIo } from '@conch/sandbox';
import { discoverRepository, includeTarget, parseGitConfig } from './git-config.js';
import { baseName, SYSTEM_DIRS } from './program.js';
import type { WorkspaceIndex } from './workspace-index.js';
import { literalArg } from './words.js';

/** What a command executes: its pieces, or why they cannot be told (then nothing can vouch for it). */
export interface Executed {
  pieces: Piece[];
  unknown?: string;
}

/** A host rule's text as the runners read it: its words; `partial`: the last may go on; `open`: more may follow. */
export interface Pattern {
  words: readonly string[];
  partial: boolean;
  open: boolean;
}

type Words = readonly (string | undefined)[];

/** One tool: what one command of it runs, and what any command a rule for it allows could run. */
interface Runner {
  command(argv: Words, cwd: string, r: Reader, dynamicArgs: boolean): Executed;
  granted(pattern: Pattern, index: () => WorkspaceIndex, r: Reader): Piece[];
}

/** What a part of a command line executes, in every directory it may run in. */
export function executedBy(run: RunFacts, r: Reader): Executed {
  const runner = runnerOf(run.argv[0]);
  if (!runner) return { pieces: [] };
  if (!run.cwds || run.cwds.length === 0)
    return { pieces: [], unknown: 'the directory it runs in is only known at run time' };
  const pieces: Piece[] = [];
  for (const cwd of run.cwds) {
    const e = runner.command(run.argv, cwd, r, run.dynamicArgs === true);
    if (e.unknown) return e;
    pieces.push(...e.pieces);
  }
  return { pieces };
}

/**
 * Everything a command matched by a rule with this pattern could execute in the workspace (the
 * rule's words looked through wrappers like `timeout 60`); 'any' (a regex whose program is not
 * spelled out, `*`): every package.json script, Makefile and repository.
 */
export function grantedBy(pattern: Pattern | 'any', index: () => WorkspaceIndex, r: Reader): Piece[] {
  if (pattern === 'any') return everything(index, r);
  let words = pattern.words;
  for (let level = 0; level < 8; level++) {
    if (words.length === 0 || (words.length === 1 && pattern.partial)) return everything(index, r);
    const name = words[0]!;
    const runner = runnerOf(name);
    if (runner) return runner.granted({ ...pattern, words }, index, r);
    const system = !name.includes('/') || SYSTEM_DIRS.has(posix.dirname(name));
    const u = system ? unwrap(baseName(name), words.slice(1).map(literalArg)) : undefined;
    if (!u) return [];
    if (u.kind !== 'inner') return pattern.open ? everything(index, r) : [];
    words = u.argv.map((a) => a.value ?? a.raw);
  }
  return pattern.open ? everything(index, r) : [];
}

function runnerOf(name: string | undefined): Runner | undefined {
  if (name === undefined || name === '') return undefined;
  if (name.includes('/') && !SYSTEM_DIRS.has(posix.dirname(name))) return PROGRAM_FILE;
  const base = baseName(name);
  if (Object.hasOwn(RUNNERS, base)) return RUNNERS[base];
  return FAMILIES.find(([re]) => re.test(base))?.[1];
}

const unknown = (why: string): Executed => ({ pieces: [], unknown: why });

function everything(index: () => WorkspaceIndex, r: Reader): Piece[] {
  return unique([
    ...packageScripts(index().packageJsons, () => true, ALL_PACKAGE_CONFIG, r),
    ...index().makefileDirs.flatMap((d) => makefilePieces(d, [], r)),
    ...repositoriesPieces(index, r),
  ]);
}

// ---------------------------------------------------------------------------------------------
// Package managers: npm, pnpm, yarn, bun (and npx, bunx handing over to the program they run)

interface PackageTool {
  /** Subcommands that run the script the next word names. */
  run: ReadonlySet<string>;
  /** Subcommands that run fixed scripts (`npm test` runs `test`, `npm install` the install scripts). */
  lifecycle: Readonly<Record<string, readonly string[]>>;
  /** The scripts the tool alone runs (`yarn` installs). */
  bare?: readonly string[];
  /** `<tool> <name>` runs the script `name` unless `name` is one of these built-ins (pnpm, yarn, bun). */
  shorthand?: ReadonlySet<string>;
  /** Subcommands that run another program: the rest of the line is read by that program's entry. */
  exec: ReadonlySet<string>;
  /** Subcommands that run scripts of other packages: what they run cannot be told. */
  unknownSubs?: Readonly<Record<string, string>>;
  /** Options naming the directory it works in: `prefix` (the package's own), `chdir` (search from there). */
  dirFlags: Readonly<Record<string, 'prefix' | 'chdir'>>;
  /** Options that take the next word as their value. */
  valueFlags: ReadonlySet<string>;
  /** Options that take no value (anything else before the script name cannot be read with certainty). */
  booleans: ReadonlySet<string>;
  /** Options that make it run other code or other packages' scripts: what runs cannot be told. */
  unknownFlags: Readonly<Record<string, string>>;
  /** Whether options after the script name are the tool's (npm) or the script's arguments. */
  flagsAfterScript: boolean;
  /** Config files it reads in the package's directory and the workspace root (script-shell, node-options, yarnPath). */
  config: readonly string[];
  /** `bun run x.ts`, `bun x.ts`: a word in the script's place may name a file it runs. */
  runsFiles?: boolean;
}

const INSTALL = [
  'preinstall',
  'install',
  'postinstall',
  'prepublish',
  'preprepare',
  'prepare',
  'postprepare',
];
const TEST = ['test'];

const OTHER_PACKAGES = 'runs scripts of other packages of the workspace';
const NPM_UNKNOWN: Record<string, string> = {
  '--script-shell': 'sets the program scripts run with',
  '--node-options': 'sets options of every node it starts',
  '--userconfig': 'reads another config file',
  '--globalconfig': 'reads another config file',
  '-w': OTHER_PACKAGES,
  '--workspace': OTHER_PACKAGES,
  '--workspaces': OTHER_PACKAGES,
  '-ws': OTHER_PACKAGES,
  '--include-workspace-root': OTHER_PACKAGES,
};
const COMMON_BOOLEANS = [
  '--silent',
  '-s',
  '-q',
  '--quiet',
  '--verbose',
  '-d',
  '--no-color',
  '--color',
  '--no-progress',
  '--no-fund',
  '--no-audit',
  '--if-present',
  '--ignore-scripts',
  '--foreground-scripts',
  '--json',
  '--offline',
  '--prefer-offline',
  '--prefer-online',
  '--no-update-notifier',
  '--yes',
  '-y',
  '--force',
  '-f',
  '--frozen-lockfile',
  '--bun',
  '--watch',
  '--hot',
];

const NPM: PackageTool = {
  run: new Set(['run', 'run-script', 'rum', 'urn']),
  lifecycle: {
    test: TEST,
    t: TEST,
    tst: TEST,
    start: ['start'],
    stop: ['stop'],
    restart: ['restart', 'stop', 'start'],
    ...Object.fromEntries(
      ['install', 'i', 'in', 'ins', 'inst', 'insta', 'instal', 'isnt', 'isnta', 'isntal', 'isntall', 'add']
        .concat([
          'ci',
          'clean-install',
          'ic',
          'install-clean',
          'isntall-clean',
          'rebuild',
          'rb',
          'update',
          'up',
        ])
        .map((w) => [w, INSTALL]),
    ),
    'install-test': [...INSTALL, ...TEST],
    it: [...INSTALL, ...TEST],
    'install-ci-test': [...INSTALL, ...TEST],
    cit: [...INSTALL, ...TEST],
    pack: ['prepack', 'prepare', 'postpack'],
    publish: ['prepublishOnly', 'prepack', 'prepare', 'postpack', 'publish', 'postpublish'],
    version: ['preversion', 'version', 'postversion'],
  },
  exec: new Set(['exec', 'x']),
  dirFlags: { '--prefix': 'prefix', '-C': 'prefix' },
  valueFlags: new Set(['--loglevel', '--registry', '--cache', '--tag', '--otp']),
  booleans: new Set(COMMON_BOOLEANS),
  unknownFlags: NPM_UNKNOWN,
  flagsAfterScript: true,
  config: ['.npmrc'],
};

const PNPM: PackageTool = {
  run: new Set(['run', 'run-script']),
  lifecycle: {
    test: TEST,
    t: TEST,
    tst: TEST,
    start: ['start'],
    stop: ['stop'],
    restart: ['restart', 'stop', 'start'],
    ...Object.fromEntries(['install', 'i', 'add', 'rebuild', 'rb', 'update', 'up'].map((w) => [w, INSTALL])),
    'install-test': [...INSTALL, ...TEST],
    it: [...INSTALL, ...TEST],
  },
  shorthand: new Set(
    (
      'add audit approve-builds bin cat-file cat-index catalog config create dedupe deploy dlx doctor env exec ' +
      'fetch find-hash help i ignored-builds import init install install-test it licenses link list ln ls ' +
      'outdated pack patch patch-commit patch-remove prune publish rb rebuild recursive remove rm root ' +
      'self-update server setup store un uninstall unlink up update upgrade version why'
    ).split(' '),
  ),
  exec: new Set(['exec', 'dlx']),
  unknownSubs: { recursive: OTHER_PACKAGES, multi: OTHER_PACKAGES, m: OTHER_PACKAGES },
  dirFlags: { '-C': 'chdir', '--dir': 'chdir' },
  valueFlags: new Set(['--loglevel', '--reporter']),
  booleans: new Set(COMMON_BOOLEANS),
  unknownFlags: {
    '-r': OTHER_PACKAGES,
    '--recursive': OTHER_PACKAGES,
    '--filter': OTHER_PACKAGES,
    '-F': OTHER_PACKAGES,
    '--filter-prod': OTHER_PACKAGES,
    '-w': 'runs in the workspace root',
    '--workspace-root': 'runs in the workspace root',
    '--shell-mode': 'runs its command through a shell',
    '-c': 'runs its command through a shell',
  },
  flagsAfterScript: false,
  config: ['.npmrc', '.pnpmfile.cjs'],
};

const YARN: PackageTool = {
  run: new Set(['run']),
  lifecycle: {
    test: TEST,
    start: ['start'],
    stop: ['stop'],
    restart: ['restart', 'stop', 'start'],
    install: INSTALL,
    add: INSTALL,
    upgrade: INSTALL,
    up: INSTALL,
  },
  bare: INSTALL,
  shorthand: new Set(
    (
      'add audit autoclean bin cache check config constraints create dedupe dlx exec explain generate-lock-entry ' +
      'global help import info init install licenses link list login logout node npm outdated owner pack ' +
      'patch patch-commit plugin policies publish rebuild remove search set stage tag team unlink unplug up ' +
      'upgrade upgrade-interactive version versions why workspace workspaces'
    ).split(' '),
  ),
  exec: new Set(['exec', 'dlx']),
  unknownSubs: { workspace: OTHER_PACKAGES, workspaces: OTHER_PACKAGES },
  dirFlags: { '--cwd': 'chdir' },
  valueFlags: new Set(['--mutex', '--network-timeout']),
  booleans: new Set(COMMON_BOOLEANS),
  unknownFlags: {
    '-T': 'runs a binary of the workspace root',
    '--top-level': 'runs a binary of the workspace root',
  },
  flagsAfterScript: false,
  config: ['.npmrc', '.yarnrc', '.yarnrc.yml'],
};

const BUN: PackageTool = {
  run: new Set(['run']),
  lifecycle: { ...Object.fromEntries(['install', 'i', 'add', 'a', 'update'].map((w) => [w, INSTALL])) },
  shorthand: new Set(
    (
      'add a audit build c completions create discord exec help i info init install link outdated patch pm ' +
      'publish remove repl rm test unlink update upgrade why x'
    ).split(' '),
  ),
  exec: new Set(['x']),
  unknownFlags: {
    '--filter': OTHER_PACKAGES,
    '-F': OTHER_PACKAGES,
    '--workspaces': OTHER_PACKAGES,
    '--shell': 'sets the shell scripts run with',
    '--preload': 'loads another module first',
    '-r': 'loads another module first',
  },
  dirFlags: { '--cwd': 'chdir' },
  valueFlags: new Set(['--env-file']),
  booleans: new Set(COMMON_BOOLEANS),
  flagsAfterScript: false,
  config: ['.npmrc', 'bunfig.toml'],
  runsFiles: true,
};

const ALL_PACKAGE_CONFIG = [...new Set([NPM, PNPM, YARN, BUN].flatMap((t) => t.config))];

interface PackageCall {
  /** The subcommand as written, and where. */
  sub?: { word: string; at: number };
  /** The scripts it runs, and the word that names them. */
  names?: { word: string; at: number; kind: 'script' | 'lifecycle' | 'shorthand'; list: readonly string[] };
  /** Where the program it hands over to starts (`npm exec`, `pnpm dlx`). */
  exec?: number;
  prefix?: string;
  chdirs: string[];
  unknown?: string;
}

/** Reads a package manager's words up to the script they name (and past it for npm's own options). */
function parsePackage(tool: PackageTool, argv: Words): PackageCall {
  const call: PackageCall = { chdirs: [] };
  let expectScript = false;
  for (let i = 1; i < argv.length; i++) {
    const w = argv[i];
    if (call.names && !tool.flagsAfterScript) break;
    if (w === undefined) return { ...call, unknown: 'one of its words is only known at run time' };
    if (w === '--') break;
    if (w.startsWith('-') && w.length > 1) {
      const eq = w.indexOf('=');
      const flag = eq > 0 ? w.slice(0, eq) : w;
      const why = Object.hasOwn(tool.unknownFlags, flag) ? tool.unknownFlags[flag] : undefined;
      if (why) return { ...call, unknown: `${flag} ${why}` };
      const dir = Object.hasOwn(tool.dirFlags, flag) ? tool.dirFlags[flag] : undefined;
      if (dir || tool.valueFlags.has(flag)) {
        const value = eq > 0 ? w.slice(eq + 1) : argv[++i];
        if (value === undefined)
          return { ...call, unknown: `the value of ${flag} is only known at run time` };
        if (dir === 'prefix') call.prefix = value;
        else if (dir === 'chdir') call.chdirs.push(value);
      } else if (eq < 0 && !call.names && !tool.booleans.has(flag))
        return { ...call, unknown: `${flag} may take the next word as its value` };
      continue;
    }
    if (expectScript) {
      call.names = { word: w, at: i, kind: 'script', list: [w] };
      expectScript = false;
      continue;
    }
    if (call.sub) continue;
    call.sub = { word: w, at: i };
    if (tool.unknownSubs && Object.hasOwn(tool.unknownSubs, w))
      return { ...call, unknown: `${w} ${tool.unknownSubs[w]}` };
    if (tool.run.has(w)) expectScript = true;
    else if (Object.hasOwn(tool.lifecycle, w))
      call.names = { word: w, at: i, kind: 'lifecycle', list: tool.lifecycle[w]! };
    else if (tool.exec.has(w)) return { ...call, exec: i + 1 };
    else if (tool.shorthand && !tool.shorthand.has(w))
      call.names = { word: w, at: i, kind: 'shorthand', list: [w] };
  }
  if (!call.sub && tool.bare) call.names = { word: '', at: argv.length, kind: 'lifecycle', list: tool.bare };
  return call;
}

/** A script with what runs around it: `pre<name>` and `post<name>`. */
function withPrePost(names: Iterable<string>): string[] {
  const out = new Set<string>();
  for (const n of names) for (const m of [n, `pre${n}`, `post${n}`]) out.add(m);
  return [...out];
}

/** The nearest package.json from `dir` upward, within the workspace when `dir` is in it. */
function nearestPackageJson(dir: string, ws: string): string | undefined {
  const inside = dir === ws || dir.startsWith(`${ws}/`);
  for (let d = dir; ;) {
    const candidate = posix.join(d, 'package.json');
    if (statQuiet(candidate) !== undefined) return candidate;
    const parent = posix.dirname(d);
    if ((inside && d === ws) || parent === d) return undefined;
    d = parent;
  }
}

/** The config files a package manager reads beside the package and at the workspace root (and yarnPath). */
function packageConfig(config: readonly string[], dir: string, r: Reader): Piece[] {
  const dirs = [...new Set([dir, r.workspaceRoot])];
  const pieces: Piece[] = [];
  for (const d of dirs) {
    for (const name of config) {
      const path = posix.join(d, name);
      pieces.push(wholeFile(path, r));
      // yarn runs the file `yarnPath` (berry) or `yarn-path` (v1) names instead of itself.
      if (name === '.yarnrc.yml' || name === '.yarnrc') {
        const bytes = r.files.get(path);
        if (typeof bytes === 'string' || bytes === undefined) continue;
        const m = /^\s*(?:yarnPath:|yarn-path)\s*["']?([^"'\n#]+?)["']?\s*$/m.exec(bytes.toString('utf8'));
        if (m) pieces.push(wholeFile(posix.resolve(d, m[1]!), r));
      }
    }
  }
  return pieces;
}

/** The scripts `select` picks in each package.json, with their pre/post scripts and the tool's config. */
function packageScripts(
  packageJsons: readonly string[],
  select: (name: string) => boolean,
  config: readonly string[],
  r: Reader,
  fixed?: readonly string[],
): Piece[] {
  const pieces: Piece[] = [];
  for (const pkg of packageJsons) {
    const scripts = scriptsOf(pkg, r);
    const names = fixed ?? (typeof scripts === 'string' ? [] : Object.keys(scripts).filter(select));
    for (const n of withPrePost(names)) pieces.push(scriptEntry(pkg, n, r));
    if (names.includes('start')) pieces.push(wholeFile(posix.join(posix.dirname(pkg), 'server.js'), r));
    pieces.push(...packageConfig(config, posix.dirname(pkg), r));
  }
  return pieces;
}

function looksLikeFile(word: string): boolean {
  return word.includes('/') || /\.(?:[cm]?[jt]sx?|sh)$/.test(word);
}

function packageRunner(tool: PackageTool): Runner {
  return {
    command(argv, cwd, r, dynamicArgs) {
      const call = parsePackage(tool, argv);
      if (call.unknown) return unknown(call.unknown);
      let dir = cwd;
      for (const c of call.chdirs) dir = posix.resolve(dir, c);
      if (call.exec !== undefined) return handOver(argv.slice(call.exec), dir, r, dynamicArgs);
      if (!call.names) {
        return dynamicArgs && (!call.sub || tool.run.has(call.sub.word))
          ? unknown('the script it runs is supplied at run time')
          : { pieces: [] };
      }
      const pkg =
        call.prefix !== undefined
          ? posix.join(posix.resolve(cwd, call.prefix), 'package.json')
          : nearestPackageJson(dir, r.workspaceRoot);
      const pieces: Piece[] = [];
      if (pkg) pieces.push(...packageScripts([pkg], () => false, tool.config, r, call.names.list));
      else pieces.push(...packageConfig(tool.config, dir, r));
      if (tool.runsFiles && call.names.kind !== 'lifecycle' && looksLikeFile(call.names.word))
        pieces.push(wholeFile(posix.resolve(dir, call.names.word), r));
      return { pieces: unique(pieces) };
    },
    granted(pattern, index, r) {
      const call = parsePackage(tool, pattern.words);
      if (call.unknown) return [];
      const last = pattern.words.length - 1;
      if (call.exec !== undefined) {
        if (call.exec > last) return pattern.open ? everything(index, r) : [];
        return grantedBy({ ...pattern, words: pattern.words.slice(call.exec) }, index, r);
      }
      const packages = [...index().packageJsons];
      if (call.prefix !== undefined)
        packages.push(posix.join(posix.resolve(r.workspaceRoot, call.prefix), 'package.json'));
      // `yarn` alone installs, but `yarn *` may run any script.
      const n = call.names && !(call.names.word === '' && pattern.open) ? call.names : undefined;
      const lastIsOpen = (at: number) => at === last && pattern.partial;
      let pieces: Piece[];
      if (n && !lastIsOpen(n.at)) pieces = packageScripts(packages, () => false, tool.config, r, n.list);
      else if (n && n.kind !== 'lifecycle')
        pieces = packageScripts(packages, (s) => s.startsWith(n.word), tool.config, r);
      else if (n || (pattern.open && (!call.sub || lastIsOpen(call.sub.at) || tool.run.has(call.sub.word))))
        pieces = packageScripts(packages, () => true, tool.config, r);
      else pieces = [];
      if (tool.runsFiles && n && n.kind !== 'lifecycle' && !lastIsOpen(n.at) && looksLikeFile(n.word))
        pieces.push(wholeFile(posix.resolve(r.workspaceRoot, n.word), r));
      return unique(pieces);
    },
  };
}

/** npx, bunx, `npm exec`, `pnpm dlx`: the program it runs, after its own options, read by its entry. */
function handOver(argv: Words, cwd: string, r: Reader, dynamicArgs: boolean): Executed {
  const at = execProgram(argv);
  if (typeof at === 'string') return at === 'call' ? { pieces: [] } : unknown(at);
  if (at >= argv.length)
    return dynamicArgs ? unknown('the program it runs is supplied at run time') : { pieces: [] };
  const runner = runnerOf(argv[at]);
  return runner ? runner.command(argv.slice(at), cwd, r, dynamicArgs) : { pieces: [] };
}

/** Where the program of an exec-like command starts, 'call' for `-c '<command line>'`, or why it cannot be told. */
function execProgram(argv: Words): number | string {
  for (let i = 0; i < argv.length; i++) {
    const w = argv[i];
    if (w === undefined) return 'one of its words is only known at run time';
    if (w === '--') return i + 1;
    if (!w.startsWith('-') || w === '-') return i;
    if (w === '-c' || w === '--call' || w.startsWith('--call=')) return 'call';
    if (w === '-p' || w === '--package') i++;
  }
  return argv.length;
}

const EXEC: Runner = {
  command: (argv, cwd, r, dynamicArgs) => handOver(argv.slice(1), cwd, r, dynamicArgs),
  granted(pattern, index, r) {
    const at = execProgram(pattern.words.slice(1));
    if (typeof at === 'string') return [];
    const words = pattern.words.slice(at + 1);
    if (words.length === 0) return pattern.open ? everything(index, r) : [];
    return grantedBy({ ...pattern, words }, index, r);
  },
};

// ---------------------------------------------------------------------------------------------
// make

interface MakeCall {
  chdirs: string[];
  files: string[];
  unknown?: string;
}

function parseMake(argv: Words): MakeCall {
  const call: MakeCall = { chdirs: [], files: [] };
  for (let i = 1; i < argv.length; i++) {
    const w = argv[i];
    if (w === undefined) return { ...call, unknown: 'one of its words is only known at run time' };
    if (w === '--') break;
    if (w.startsWith('--')) {
      const eq = w.indexOf('=');
      const flag = eq > 0 ? w.slice(0, eq) : w;
      const takes = MAKE_LONG_VALUES.has(flag);
      if (!takes) continue;
      const value = eq > 0 ? w.slice(eq + 1) : argv[++i];
      if (value === undefined) return { ...call, unknown: `the value of ${flag} is only known at run time` };
      if (flag === '--directory') call.chdirs.push(value);
      else if (flag === '--file' || flag === '--makefile') call.files.push(value);
      continue;
    }
    if (!w.startsWith('-') || w === '-') continue;
    for (let k = 1; k < w.length; k++) {
      const c = w[k]!;
      if ('CfIoW'.includes(c)) {
        const value = k + 1 < w.length ? w.slice(k + 1) : argv[++i];
        if (value === undefined) return { ...call, unknown: `the value of -${c} is only known at run time` };
        if (c === 'C') call.chdirs.push(value);
        else if (c === 'f') call.files.push(value);
        break;
      }
      if (c === 'j' || c === 'l') {
        if (k + 1 < w.length) break;
        if (/^\d+(\.\d+)?$/.test(argv[i + 1] ?? '')) i++;
        break;
      }
    }
  }
  return call;
}

const MAKE_LONG_VALUES = new Set([
  '--directory',
  '--file',
  '--makefile',
  '--include-dir',
  '--old-file',
  '--assume-old',
  '--new-file',
  '--assume-new',
  '--what-if',
]);

/**
 * The makefiles make reads in `dir`: the ones `-f` names, else GNUmakefile, makefile and Makefile
 * (all three: a new one that takes precedence is new), and what they `include` by a literal name.
 */
function makefilePieces(dir: string, files: readonly string[], r: Reader): Piece[] {
  const named = files.length
    ? files.map((f) => posix.resolve(dir, f))
    : [...MAKEFILE_NAMES].map((n) => posix.join(dir, n));
  const pieces: Piece[] = [];
  const queue = named.map((path) => ({ path, depth: 0 }));
  for (let n = 0; queue.length > 0 && n < 64; n++) {
    const { path, depth } = queue.shift()!;
    pieces.push(wholeFile(path, r));
    const bytes = r.files.get(path);
    if (bytes === undefined || typeof bytes === 'string' || depth >= 3) continue;
    for (const line of bytes.toString('utf8').split('\n')) {
      const m = /^\s*-?s?include\s+(.+)$/.exec(line);
      if (!m) continue;
      for (const word of m[1]!.replace(/#.*$/, '').trim().split(/\s+/)) {
        // A name only known when make runs ($(VAR), a glob) is not followed.
        if (word === '' || /[$*?[%]/.test(word)) continue;
        queue.push({ path: posix.resolve(dir, word), depth: depth + 1 });
      }
    }
  }
  return pieces;
}

const MAKEFILE_NAMES = ['GNUmakefile', 'makefile', 'Makefile'];

const MAKE: Runner = {
  command(argv, cwd, r) {
    const call = parseMake(argv);
    if (call.unknown) return unknown(call.unknown);
    let dir = cwd;
    for (const c of call.chdirs) dir = posix.resolve(dir, c);
    return { pieces: unique(makefilePieces(dir, call.files, r)) };
  },
  granted(pattern, index, r) {
    const call = parseMake(pattern.words);
    const pieces = index().makefileDirs.flatMap((d) => makefilePieces(d, [], r));
    if (!call.unknown && (call.chdirs.length || call.files.length) && !pattern.partial) {
      let dir = r.workspaceRoot;
      for (const c of call.chdirs) dir = posix.resolve(dir, c);
      pieces.push(...makefilePieces(dir, call.files, r));
    }
    return unique(pieces);
  },
};

// ---------------------------------------------------------------------------------------------
// git

interface GitCall {
  chdirs: string[];
  gitDir?: string;
  workTree?: string;
  unknown?: string;
}

/** git's global options before the subcommand: where it looks for the repository. */
function parseGit(argv: Words): GitCall {
  const call: GitCall = { chdirs: [] };
  for (let i = 1; i < argv.length; i++) {
    const w = argv[i];
    if (w === undefined) return { ...call, unknown: 'one of its words is only known at run time' };
    if (!w.startsWith('-')) break;
    const value = (name: string): string | undefined => (w === name ? argv[++i] : w.slice(name.length + 1));
    if (w === '-C') {
      const v = argv[++i];
      if (v === undefined) return { ...call, unknown: 'the value of -C is only known at run time' };
      call.chdirs.push(v);
    } else if (
      w === '-c' ||
      w === '--namespace' ||
      w === '--config-env' ||
      w === '--super-prefix' ||
      w === '--attr-source'
    )
      i++;
    else if (w === '--git-dir' || w.startsWith('--git-dir=')) {
      const v = value('--git-dir');
      if (v === undefined) return { ...call, unknown: 'the value of --git-dir is only known at run time' };
      call.gitDir = v;
    } else if (w === '--work-tree' || w.startsWith('--work-tree=')) {
      const v = value('--work-tree');
      if (v === undefined) return { ...call, unknown: 'the value of --work-tree is only known at run time' };
      call.workTree = v;
    } else if (w === '--bare') call.gitDir = '.';
    else if (w.startsWith('--exec-path='))
      return { ...call, unknown: '--exec-path runs git commands from another directory' };
  }
  return call;
}

/**
 * What git may run from a repository: its configs (common dir, `config.worktree`, what they
 * include), the hooks directory (`core.hooksPath` honoured, from the repository's configs or the
 * user's global one) and the same for every submodule's git dir under `modules/`.
 */
function repositoryPieces(
  gitDir: string,
  workTree: string | undefined,
  r: Reader,
  budget = { dirs: 64 },
  depth = 0,
): Piece[] {
  const pieces: Piece[] = [];
  let common = gitDir;
  const commondir = read(posix.join(gitDir, 'commondir'), r);
  if (typeof commondir !== 'string') common = posix.resolve(gitDir, commondir.toString('utf8').trim());
  else if (commondir !== ABSENT) pieces.push(wholeFile(posix.join(gitDir, 'commondir'), r));
  const hooksPaths: string[] = [];
  const configs = (path: string, level: number, counted: boolean): void => {
    if (counted) pieces.push(wholeFile(path, r));
    const bytes = counted ? r.files.get(path) : readQuiet(path);
    if (bytes === undefined || typeof bytes === 'string') return;
    const parsed = parseGitConfig(bytes.toString('latin1'));
    if ('error' in parsed) return;
    for (const e of parsed.entries) {
      if (e.section === 'core' && e.key === 'hookspath' && e.value) hooksPaths.push(e.value);
      if (
        e.key === 'path' &&
        e.value &&
        level < 10 &&
        (e.section === 'include' || e.section.startsWith('includeif.'))
      ) {
        const target = includeTarget(e.value, path);
        if (target) configs(target, level + 1, counted);
      }
    }
  };
  // The user's own configs are trusted (outside every sandbox); only their core.hooksPath matters here.
  for (const global of [posix.join(r.home, '.gitconfig'), posix.join(r.home, '.config', 'git', 'config')])
    configs(global, 0, false);
  for (const path of new Set([
    posix.join(common, 'config'),
    posix.join(gitDir, 'config'),
    posix.join(common, 'config.worktree'),
    posix.join(gitDir, 'config.worktree'),
  ]))
    configs(path, 0, true);
  // The default hooks directory and every one a config names (whichever git takes, all are checked:
  // an include's condition is not evaluated here).
  const hookDirs = [
    posix.join(common, 'hooks'),
    ...hooksPaths.map((p) =>
      p.startsWith('~/') ? posix.join(r.home, p.slice(2)) : posix.resolve(workTree ?? gitDir, p),
    ),
  ];
  for (const dir of hookDirs) pieces.push(hooksDir(dir, r));
  // What a hook manager's installed hooks run from the work tree (@conch/sandbox hook-managers.ts):
  // husky 9's `.husky`, pre-commit's and lefthook's configs, husky 4's rc files and package.json key.
  if (workTree !== undefined) {
    const io: HookManagerIo = {
      text: (path) => {
        const bytes = read(path, r);
        return typeof bytes === 'string' ? undefined : bytes.toString('utf8');
      },
      names: (dir) => {
        try {
          return readdirSync(dir);
        } catch {
          return [];
        }
      },
    };
    for (const dir of hookDirs)
      for (const found of hookDelegates(dir, workTree, io)) {
        for (const file of found.files) pieces.push(wholeFile(file, r));
        for (const sub of found.dirs) pieces.push(hooksDir(sub, r));
        if (found.packageJson) pieces.push(packageKey(found.packageJson, 'husky', r));
      }
  }
  if (depth < 4) pieces.push(...modulesPieces(posix.join(common, 'modules'), r, budget, depth));
  return pieces;
}

/** A file read outside the counted pieces and the budget (the user's global git config). */
function readQuiet(path: string): Buffer | undefined {
  try {
    return readRegularFileSync(path, { maxBytes: 8 * 1024 * 1024 });
  } catch {
    return undefined;
  }
}

/** Every submodule git dir under `modules/` (a submodule named `a/b` lives in `modules/a/b`). */
function modulesPieces(dir: string, r: Reader, budget: { dirs: number }, depth: number): Piece[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const pieces: Piece[] = [];
  for (const name of names.sort()) {
    const path = posix.join(dir, name);
    const st = statQuiet(path);
    if (st === undefined || st === 'error' || !st.isDirectory()) continue;
    if (--budget.dirs < 0) {
      pieces.push({
        key: `modules:${dir}`,
        label: shown(dir, r),
        file: shown(dir, r),
        digest: `${UNREADABLE}it holds more submodules than conch reads`,
      });
      return pieces;
    }
    const head = statQuiet(posix.join(path, 'HEAD'));
    if (head !== undefined && head !== 'error' && head.isFile())
      pieces.push(...repositoryPieces(path, undefined, r, budget, depth + 1));
    else if (depth < 4) pieces.push(...modulesPieces(path, r, budget, depth + 1));
  }
  return pieces;
}

function repositoriesPieces(index: () => WorkspaceIndex, r: Reader): Piece[] {
  const pieces: Piece[] = [];
  const repos = [...index().repositories];
  // A repository enclosing the workspace is opened by a git command run at its root.
  const enclosing = discoverRepository(r.workspaceRoot);
  if (enclosing && !('risk' in enclosing)) repos.push(enclosing);
  for (const repo of repos) pieces.push(...repositoryPieces(repo.gitDir, repo.workTree, r));
  return pieces;
}

const GIT: Runner = {
  command(argv, cwd, r) {
    const call = parseGit(argv);
    if (call.unknown) return unknown(call.unknown);
    let dir = cwd;
    for (const c of call.chdirs) dir = posix.resolve(dir, c);
    if (call.gitDir !== undefined) {
      const gitDir = posix.resolve(dir, call.gitDir);
      return {
        pieces: unique(repositoryPieces(gitDir, call.workTree ? posix.resolve(dir, call.workTree) : dir, r)),
      };
    }
    const found = discoverRepository(dir);
    if (!found) return { pieces: [] };
    if ('risk' in found) return unknown(found.risk);
    return { pieces: unique(repositoryPieces(found.gitDir, found.workTree, r)) };
  },
  granted: (_pattern, index, r) => unique(repositoriesPieces(index, r)),
};

// ---------------------------------------------------------------------------------------------
// Scripts: a program run by path, a script handed to a shell or an interpreter

/** How an interpreter reads its words up to the script file. */
interface Interpreter {
  /** Options after which it runs code given on the line or on stdin, not a file: nothing more to check. */
  code: RegExp;
  /** Options that run a module by name (`python -m`): no script file. */
  module?: RegExp;
  /** Options that take the next word as their value. */
  value?: RegExp;
  /** Options whose value is a file it runs too, when written as a path (`node -r ./x.js`, `bash --rcfile f`). */
  file?: RegExp;
  /** Options whose effect the gate does not follow (`ruby -C dir` moves where the script is found). */
  unknown?: RegExp;
  /** Words before the script that are the tool's subcommands (`tsx watch x.ts`). */
  subcommands?: ReadonlySet<string>;
}

/** The script file an interpreter runs, and files its options load: 'none' (code on the line), or why it cannot be told. */
function scriptFiles(spec: Interpreter, argv: Words): { files: string[]; script?: number } | string {
  const files: string[] = [];
  for (let i = 1; i < argv.length; i++) {
    const w = argv[i];
    if (w === undefined) return 'one of its words is only known at run time';
    if (w === '-') return { files };
    if (w === '--') {
      const next = argv[i + 1];
      if (next === undefined) return i + 1 < argv.length ? 'its script is only known at run time' : { files };
      return { files: [...files, next], script: i + 1 };
    }
    if (w.startsWith('-') || (w.startsWith('+') && spec === SHELL)) {
      const eq = w.indexOf('=');
      const flag = eq > 0 ? w.slice(0, eq) : w;
      if (spec.unknown?.test(flag)) return `${flag} runs what the gate does not follow`;
      if (spec.code.test(flag) || spec.module?.test(flag)) return { files };
      if (spec.file?.test(flag)) {
        const v = eq > 0 ? w.slice(eq + 1) : argv[++i];
        if (v === undefined) return `the value of ${flag} is only known at run time`;
        if (v.startsWith('.') || v.startsWith('/')) files.push(v);
      } else if (spec.value?.test(flag) && eq < 0) i++;
      continue;
    }
    if (spec.subcommands?.has(w) && files.length === 0 && i === 1) continue;
    return { files: [...files, w], script: i };
  }
  return { files };
}

function scriptRunner(spec: Interpreter): Runner {
  return {
    command(argv, cwd, r, dynamicArgs) {
      const found = scriptFiles(spec, argv);
      if (typeof found === 'string') return unknown(found);
      if (found.script === undefined && dynamicArgs) return unknown('its script is supplied at run time');
      return { pieces: unique(found.files.map((f) => wholeFile(posix.resolve(cwd, f), r))) };
    },
    granted(pattern, _index, r) {
      const found = scriptFiles(spec, pattern.words);
      if (typeof found === 'string') return [];
      const last = pattern.words.length - 1;
      // A script the rule leaves open (`python3 *`, `bash scripts/*`) cannot be snapshotted: it asks.
      const files = found.files.filter(
        (_, k) => !(pattern.partial && k === found.files.length - 1 && found.script === last),
      );
      return unique(files.map((f) => wholeFile(posix.resolve(r.workspaceRoot, f), r)));
    },
  };
}

const SHELL: Interpreter = {
  code: /^-[A-Za-z]*[cs][A-Za-z]*$/,
  // A shell running a script reads no rc file.
  value: /^([-+][oO]|--rcfile|--init-file)$/,
};

const PYTHON: Interpreter = {
  code: /^-[A-Za-z]*c$/,
  module: /^-[A-Za-z]*m$/,
  value: /^(-[WXQ]|--check-hash-based-pycs)$/,
};

const NODE: Interpreter = {
  code: /^(-e|-p|--eval|--print|-pe|-ep|--test)$/,
  unknown: /^--run$/,
  value: /^(--input-type|--conditions|-C|--title|--inspect-port|--stack-size|--max-old-space-size)$/,
  file: /^(-r|--require|--import|--loader|--experimental-loader|--env-file|--env-file-if-exists)$/,
};

const TS_NODE: Interpreter = {
  code: /^(-e|-p|--eval|--print)$/,
  file: /^(-r|--require|--import|--loader|--tsconfig|--env-file)$/,
  subcommands: new Set(['watch']),
};

const RUBY: Interpreter = {
  code: /^-[A-Za-z]*e$/,
  value: /^-[Irx]$/,
  unknown: /^-C/,
};

const PERL: Interpreter = {
  code: /^-[A-Za-z]*[eE]$/,
  value: /^-[Ix]$/,
};

const PHP: Interpreter = {
  code: /^-[A-Za-z]*[rBRFE]$/,
  value: /^-[cdz]$/,
};

const SOURCE: Interpreter = { code: /^$/ };

/** A program run by its path (`./deploy.sh`, `scripts/release.sh`): that file. */
const PROGRAM_FILE: Runner = {
  command: (argv, cwd, r) => ({ pieces: [wholeFile(posix.resolve(cwd, argv[0]!), r)] }),
  granted: (pattern, _index, r) => [wholeFile(posix.resolve(r.workspaceRoot, pattern.words[0]!), r)],
};

/** The table: a program's base name and its entry. */
const RUNNERS: Record<string, Runner> = {
  npm: packageRunner(NPM),
  pnpm: packageRunner(PNPM),
  yarn: packageRunner(YARN),
  bun: packageRunner(BUN),
  npx: EXEC,
  bunx: EXEC,
  make: MAKE,
  gmake: MAKE,
  git: GIT,
  ...Object.fromEntries(
    ['sh', 'bash', 'dash', 'zsh', 'ksh', 'ash', 'mksh', 'yash', 'posh', 'rbash'].map((s) => [
      s,
      scriptRunner(SHELL),
    ]),
  ),
  node: scriptRunner(NODE),
  nodejs: scriptRunner(NODE),
  tsx: scriptRunner(TS_NODE),
  'ts-node': scriptRunner(TS_NODE),
  'ts-node-esm': scriptRunner(TS_NODE),
  source: scriptRunner(SOURCE),
  '.': scriptRunner(SOURCE),
};

/** Versioned names (`python3.12`, `perl5.36`). */
const FAMILIES: [RegExp, Runner][] = [
  [/^(python|pypy)[\d.]*$/, scriptRunner(PYTHON)],
  [/^ruby[\d.]*$/, scriptRunner(RUBY)],
  [/^perl[\d.]*$/, scriptRunner(PERL)],
  [/^php[\d.]*$/, scriptRunner(PHP)],
];
