// Invariant: an hgrc is read the way hg reads it (each expected value is what the real hg prints for
// the same text), and a Mercurial config that would run a program names it as a plant while one that
// only sets names, paths or bundled extensions does not.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { programRuns, requireUnderCi } from '@conch/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseHgrc } from './hgrc-grammar.js';
import { hgConfigPlants } from './plants.js';

const hg = requireUnderCi(programRuns('hg'), 'Mercurial (hg)', 'apt-get install mercurial');

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-hgrc-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** What hg itself reads from `text`: `section.name` -> value, multi-line values with `\n` between lines. */
function hgReads(text: string): Map<string, string> {
  const file = join(dir, `t${Math.random().toString(36).slice(2)}.rc`);
  writeFileSync(file, text);
  const out = execFileSync('hg', ['config'], {
    cwd: dir,
    encoding: 'utf8',
    // HGRCPATH: that file alone (no system or user config); no HGPLAIN, which hides [alias].
    env: { PATH: process.env.PATH, HGRCPATH: file, HOME: dir },
  });
  const read = new Map<string, string>();
  for (const line of out.split('\n').filter(Boolean)) {
    const at = line.indexOf('=');
    read.set(line.slice(0, at), line.slice(at + 1).replace(/\\n/g, '\n'));
  }
  return read;
}

/** The same from parseHgrc: the last value of each key, as hg keeps it. */
function ourRead(text: string): Map<string, string> {
  const read = new Map<string, string>();
  for (const item of parseHgrc(text).items) {
    const key = `${item.section}.${item.name}`;
    read.delete(key);
    read.set(key, item.value);
  }
  return read;
}

const TEXTS: [string, string][] = [
  ['sections, items, spaces around =', '[ui]\nusername = me\neditor=vim\n[hooks]\npre-status  =  touch x\n'],
  [
    'a continued value, with a comment line inside it',
    '[hooks]\npre-status = echo a\n  then b\n# not part of it\n  and c\n[ui]\nx = 1\n',
  ],
  ['; and # comments, a ; inside a value', '; top\n# also\n[ui]\nusername = me ; still the value\n'],
  ['%unset drops an earlier item', '[ui]\neditor = vim\nmerge = meld\n%unset editor\n'],
  [
    'a byte-order mark, CRLF line ends, section names as written',
    '\uFEFF[Hooks]\r\npre-commit = a\r\n[alias]\r\nst = status\r\n',
  ],
  ['a repeated key: the last wins', '[hooks]\npre-status = one\npre-status = two\n'],
  ['empty values and a value that is only spaces', '[hooks]\npre-status =\n[ui]\nusername =   \n'],
];

describe.skipIf(!hg)('hgrc read as hg reads it', () => {
  for (const [what, text] of TEXTS)
    it(what, () => {
      expect(ourRead(text)).toEqual(hgReads(text));
    });
});

describe('hgrc includes', () => {
  it('%include lines are listed as written, in order', () => {
    expect(parseHgrc('[ui]\nx = 1\n%include ../team.rc\n%include ~/.hg-shared\n').includes).toEqual([
      '../team.rc',
      '~/.hg-shared',
    ]);
  });
});

describe('Mercurial plants', () => {
  const plants = (text: string) => hgConfigPlants('/r/.hg/hgrc', text).map((p) => p.detail);
  it('hooks, extensions by path, aliases, the programs hg starts, and includes are plants', () => {
    const cases = [
      '[hooks]\npre-status = touch /tmp/x\n',
      '[hooks]\nchangegroup.notify = python:evil.hook\n',
      '[extensions]\nevil = ../evil.py\n',
      '[extensions]\nx = ~/plugins/x\n',
      '[alias]\nstatus = !touch /tmp/x\n',
      '[alias]\nci = commit --amend\n',
      '[ui]\neditor = ./edit.sh\n',
      '[ui]\nssh = ./ssh.sh\n',
      '[ui]\nmerge = mytool\n[merge-tools]\nmytool.executable = ./m.sh\n',
      '[pager]\npager = ./p.sh\n',
      '[extdiff]\ncmd.vd = ./d.sh\n',
      '[fsmonitor]\nwatchman_exe = ./w.sh\n',
      '[email]\nmethod = ./send.sh\n',
      '%include ../team.rc\n',
      '[Hooks]\npre-commit = a\n  b\n',
    ];
    for (const text of cases) expect(plants(text), text).not.toEqual([]);
  });
  it('names, paths, bundled or disabled extensions, the default pagers and empty hooks are not', () => {
    const cases = [
      '[ui]\nusername = Me <me@example.com>\n',
      '[paths]\ndefault = https://example.com/repo\n',
      '[extensions]\nrebase =\nhistedit = \nlargefiles =\n',
      '[extensions]\nevil = !\nold = !/r/evil.py\n',
      '[pager]\npager = less -FRX\n',
      '[hooks]\npre-status =\n',
      '# [hooks]\n# pre-status = touch /tmp/x\n',
      '[phases]\npublish = false\n',
    ];
    for (const text of cases) expect(plants(text), text).toEqual([]);
  });
});
