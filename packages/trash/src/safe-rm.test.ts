// Invariant: the safe-rm function behaves as GNU rm does — same exit status, messages and surviving files, under bash, zsh and sh — except that what rm would delete lands in the trash, byte-identical and restorable.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TrashStore } from './trash-store.js';

const SHELLS = {
  bash: { file: '/bin/bash', args: ['--norc', '--noprofile', '-c'] },
  zsh: { file: '/usr/bin/zsh', args: ['-f', '-c'] },
  sh: { file: '/bin/sh', args: ['-c'] },
} as const;
type Dialect = keyof typeof SHELLS;
const HAS_ZSH = existsSync(SHELLS.zsh.file);
if (process.env.CI && !HAS_ZSH) throw new Error('the safe-rm tests need zsh under CI');

/** A fixture: files (content), directories (trailing /), symlinks (`-> target`). */
const FIXTURE: Record<string, string> = {
  'f1.txt': 'one\n',
  'f2.txt': 'two\n',
  'f3.log': 'three\n',
  'a b.txt': 'spaces\n',
  "it's": 'quote\n',
  '-dash': 'dash\n',
  'empty/': '',
  'd/': '',
  'd/x': 'x\n',
  'd/sub/': '',
  'd/sub/y.bin': '\u0000\u0001binary\u00ff',
  'nested/deep/file': 'deep\n',
  lnk: '-> f1.txt',
  dirlink: '-> d',
  dangling: '-> nowhere',
  'ro.txt': 'read only\n',
};

function build(root: string): void {
  mkdirSync(root, { recursive: true });
  for (const [name, content] of Object.entries(FIXTURE)) {
    const path = join(root, name);
    if (name.endsWith('/')) mkdirSync(path, { recursive: true });
    else if (content.startsWith('-> ')) symlinkSync(content.slice(3), path);
    else {
      mkdirSync(join(path, '..'), { recursive: true });
      writeFileSync(path, content, 'latin1');
    }
  }
  chmodSync(join(root, 'ro.txt'), 0o444);
}

/** Every path under `root` with its type and content digest (what "the same files" means). */
function tree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string, rel: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const key = rel ? `${rel}/${name}` : name;
      const st = lstatSync(path);
      if (st.isSymbolicLink()) out[key] = `link:${readlinkSync(path)}`;
      else if (st.isDirectory()) {
        out[key] = `dir:${(st.mode & 0o777).toString(8)}`;
        walk(path, key);
      } else
        out[key] =
          `file:${(st.mode & 0o777).toString(8)}:${createHash('sha256').update(readFileSync(path)).digest('hex')}`;
    }
  };
  walk(root, '');
  return out;
}

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

function run(dialect: Dialect, script: string, cwd: string, input = ''): Run {
  const { file, args } = SHELLS[dialect];
  const env: NodeJS.ProcessEnv = { ...process.env, LC_ALL: 'C', LANG: 'C' };
  delete env.BASH_ENV;
  delete env.ENV;
  const r = spawnSync(file, [...args, script], { cwd, env, input, encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** [label, rm words as typed, stdin] */
const CASES: readonly [string, string, string?][] = [
  ['a file', 'rm f1.txt'],
  ['a name with spaces', 'rm "a b.txt"'],
  ['a name with a quote', `rm "it's"`],
  ['a glob', 'rm *.txt'],
  ['a dash name after --', 'rm -- -dash'],
  ['options after an operand', 'rm f1.txt -v'],
  ['a directory without -r', 'rm d'],
  ['-r on a directory', 'rm -r d'],
  ['-rf with a missing operand', 'rm -rf d nope'],
  ['-R -f bundled separately', 'rm -R -f d f2.txt'],
  ['long options and abbreviations', 'rm --rec --force d'],
  ['an ambiguous long option', 'rm --v f1.txt'],
  ['an unknown long option', 'rm --frobnicate f1.txt'],
  ['an invalid short option', 'rm -z f1.txt'],
  ['a long option with an argument it does not take', 'rm --force=yes f1.txt'],
  ['a missing operand', 'rm nope'],
  ['-f and a missing operand', 'rm -f nope'],
  ['no operand', 'rm'],
  ['-f and no operand', 'rm -f'],
  ['-d on an empty directory', 'rm -d empty'],
  ['-d on a non-empty directory', 'rm -d d'],
  ['-r on .', 'rm -r .'],
  ['-r on d/.', 'rm -r d/.'],
  ['-r on ..', 'rm -r ..'],
  ['. without -r', 'rm .'],
  ['verbose files', 'rm -v f1.txt "a b.txt"'],
  ['a symlink to a file', 'rm lnk'],
  ['a symlink to a directory, no -r', 'rm dirlink'],
  ['a dangling symlink', 'rm dangling'],
  ['a nested path', 'rm nested/deep/file'],
  ['a write-protected file, stdin not a terminal', 'rm ro.txt'],
  ['-i answered no', 'rm -i f1.txt', 'n\n'],
  ['-i answered yes', 'rm -i f1.txt f2.txt', 'y\nn\n'],
  ['-I over three operands, declined', 'rm -I f1.txt f2.txt f3.log "a b.txt"', 'n\n'],
  ['-I recursive, accepted', 'rm -I -r d', 'y\n'],
  ['--interactive=never', 'rm --interactive=never f1.txt'],
  ['-f after -i wins', 'rm -i -f f1.txt'],
  ['a variable', 'x=f2.txt; rm "$x"'],
  ['a trailing slash on a directory', 'rm -r d/'],
];

const shells = (Object.keys(SHELLS) as Dialect[]).filter((d) => d !== 'zsh' || HAS_ZSH);

describe.each(shells)('safe rm under %s matches GNU rm', (dialect) => {
  let root: string;
  let fnFile: string;
  let trashDir: string;
  let store: TrashStore;

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), `conch-safe-rm-${dialect}-`));
    trashDir = join(root, 'trash');
    store = new TrashStore({ dir: trashDir });
    fnFile = join(root, 'rm.sh');
    writeFileSync(fnFile, store.shellFunction(dialect));
  });
  afterAll(() => {
    rmSync(root, { recursive: true, force: true });
  });

  it.each(CASES.map(([l, c, s], i) => [l, c, s ?? '', i] as const))(
    '%s: %s',
    async (label, line, input, i) => {
      const slug = `${i}-${label.replace(/\W+/g, '-')}`;
      const real = join(root, `real-${slug}`, 'w');
      const safe = join(root, `safe-${slug}`, 'w');
      build(real);
      build(safe);
      const before = tree(safe);
      const expected = run(dialect, line, real, input);
      const got = run(dialect, `. '${fnFile}'; ${line}`, safe, input);
      expect({ status: got.status, stdout: got.stdout, stderr: got.stderr }).toEqual(expected);
      expect(tree(safe)).toEqual(tree(real));
      // What rm deleted is in the trash, byte-identical, and goes back.
      const gone = Object.keys(before).filter((k) => !(k in tree(safe)));
      const roots = gone.filter((k) => !gone.some((o) => k.startsWith(`${o}/`)));
      const entries = (await store.list()).filter((e) => e.originalPath.startsWith(`${safe}/`));
      expect(entries.map((e) => e.originalPath.slice(safe.length + 1)).sort()).toEqual(roots.sort());
      for (const e of entries) await store.restore(e.id);
      expect(tree(safe)).toEqual(before);
    },
  );

  it('refuses / like rm, and never moves the trash into itself', () => {
    const r = run(dialect, `. '${fnFile}'; rm -rf /; echo "status $?"`, root);
    expect(r.stderr).toBe(
      "rm: it is dangerous to operate recursively on '/'\nrm: use --no-preserve-root to override this failsafe\n",
    );
    expect(r.stdout).toBe('status 1\n');
    const r2 = run(dialect, `. '${fnFile}'; rm -r '${root}'; echo "status $?"`, '/');
    expect(r2.stderr).toContain('it contains the trash');
    expect(r2.stdout).toBe('status 1\n');
    expect(existsSync(fnFile)).toBe(true);
  });

  it('leaves the shell in an existing directory when its own cwd goes to the trash', () => {
    const dir = join(root, `cwd-${dialect}`, 'inner');
    mkdirSync(dir, { recursive: true });
    const r = run(dialect, `. '${fnFile}'; rm -r "$PWD"; pwd`, dir);
    expect(r.stdout.trim()).toBe(join(root, `cwd-${dialect}`));
    expect(r.stderr).toContain('the current directory was moved to the trash');
  });

  it('is not changed by aliases or functions named like the commands it runs', () => {
    if (dialect === 'sh') return;
    const dir = join(root, `alias-${dialect}`);
    build(dir);
    const setup =
      dialect === 'bash'
        ? 'shopt -s expand_aliases; alias mv=false; alias rm="rm -v"; printf() { echo hijacked; }'
        : 'alias mv=false; alias rm="rm -v"; printf() { echo hijacked; }';
    // eval: parsed after the aliases exist (zsh parses a whole -c string first).
    const r = run(dialect, `${setup}\n. '${fnFile}'\neval 'rm f1.txt'`, dir);
    expect(r).toEqual({ status: 0, stdout: "removed 'f1.txt'\n", stderr: '' });
    expect(existsSync(join(dir, 'f1.txt'))).toBe(false);
  });

  it('keeps working under set -eu and leaves noclobber as it was', () => {
    const dir = join(root, `strict-${dialect}`);
    build(dir);
    const r = run(
      dialect,
      `set -eu; . '${fnFile}'; rm f1.txt nope || echo "failed $?"; case $- in *C*) echo C;; *) echo noC;; esac`,
      dir,
    );
    expect(r.stdout).toBe('failed 1\nnoC\n');
    expect(existsSync(join(dir, 'f1.txt'))).toBe(false);
  });
});

describe('safe rm and the rm binary agree on the machine', () => {
  it('GNU rm is what the differential runs against', () => {
    expect(execFileSync('rm', ['--version'], { encoding: 'utf8' })).toMatch(/GNU coreutils/);
  });
});
