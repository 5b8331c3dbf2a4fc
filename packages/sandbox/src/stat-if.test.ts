// Invariant: a path the policy cannot stat (missing, through a file, too long, in a directory this
// user may not enter) reads as absent, so one odd PATH or toolchain entry never fails a sandbox.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { toolchainPaths } from './home-view.js';
import { lstatIf, statIf } from './stat-if.js';

const dir = mkdtempSync(join(tmpdir(), 'conch-stat-if-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, 'file'), 'x');
const odd = [
  join(dir, 'missing'),
  join(dir, 'file', 'below-a-file'), // ENOTDIR
  `${dir}/${'x'.repeat(5000)}`, // ENAMETOOLONG: lstatSync throws it even with throwIfNoEntry: false
  `${dir}/${'d/'.repeat(3000)}bin`, // past PATH_MAX
];

describe('lstatIf and statIf', () => {
  it.each(odd)('%s reads as absent', (path) => {
    expect(lstatIf(path)).toBeUndefined();
    expect(statIf(path)).toBeUndefined();
  });

  it('a path that exists reads as itself', () => {
    expect(lstatIf(join(dir, 'file'))?.isFile()).toBe(true);
    expect(statIf(dir)?.isDirectory()).toBe(true);
  });

  it('toolchain entries under a closed home that cannot be read are left out, not thrown', () => {
    const home = join(dir, 'home');
    const env = {
      PATH: odd.map((p) => p.replace(dir, home)).join(':'),
      NVM_DIR: `${home}/${'n'.repeat(5000)}`,
    };
    expect(toolchainPaths([home], home, env, (p) => lstatIf(p) !== undefined)).toEqual([]);
  });
});
