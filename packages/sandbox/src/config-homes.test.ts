// Invariant: a home's configuration entries are every top-level `.*` name and `bin` (never `.`, `..` or a look-alike), judged the same in TypeScript as in the guard; merged rules never let a path through that either set protected.
import { describe, expect, it } from 'vitest';
import {
  encodeGuardRules,
  guardRulesFor,
  isConfigEntryPath,
  mergeGuardRules,
  type GuardRules,
} from './guard.js';

const base: GuardRules = {
  readOnly: [],
  masked: [],
  nameRoots: [],
  fileNames: [],
  dirNames: [],
  envSecrets: false,
  hooks: false,
  watchNames: [],
  watchGit: false,
};

describe('isConfigEntryPath', () => {
  it('is every top-level dot entry and bin, with what is below them, and nothing else', () => {
    const home = '/h/me';
    for (const path of [
      '/h/me/.bashrc',
      '/h/me/.config/systemd/user/x.service',
      '/h/me/bin',
      '/h/me/bin/ls',
      '/h/me/.x',
    ])
      expect(isConfigEntryPath(path, home), path).toBe(true);
    for (const path of [
      '/h/me',
      '/h/me/proj/.vscode',
      '/h/me/binaries',
      '/h/me/proj/bin/x',
      '/h/mee/.bashrc',
      '/h/me/notes.txt',
      '/other/.bashrc',
    ])
      expect(isConfigEntryPath(path, home), path).toBe(false);
  });
});

describe('config homes in the guard rules', () => {
  it('exempt the writable roots inside a configuration entry only', () => {
    const rules = guardRulesFor({
      kind: 'workspace-write',
      writableRoots: ['/h/me', '/h/me/.cache/conch/sandbox/1', '/h/me/proj/out', '/elsewhere'],
      readOnlyPaths: [],
      configHomes: ['/h/me'],
    })!;
    expect(rules.configHomes).toEqual(['/h/me']);
    expect(rules.configExempt).toEqual(['/h/me/.cache/conch/sandbox/1']);
    const without = guardRulesFor({ kind: 'workspace-write', writableRoots: ['/w'], readOnlyPaths: [] })!;
    expect(without.configHomes).toBeUndefined();
    expect(encodeGuardRules(rules).includes(Buffer.from('/h/me/.cache/conch/sandbox/1'))).toBe(true);
  });

  it('merged: every home stays protected, and a path stays writable only where both sets allowed it', () => {
    const older = { ...base, configHomes: ['/h/me'], configExempt: ['/h/me/.npm-global', '/h/me/.cache/x'] };
    const newer = { ...base, configHomes: ['/h/me'], configExempt: ['/h/me/.cache/x'] };
    expect(mergeGuardRules(older, newer)).toMatchObject({
      configHomes: ['/h/me'],
      configExempt: ['/h/me/.cache/x'],
    });
    // A set without that home does not protect it, so it cannot narrow the other's exemptions...
    const plain = { ...base };
    expect(mergeGuardRules(plain, newer)).toMatchObject({
      configHomes: ['/h/me'],
      configExempt: ['/h/me/.cache/x'],
    });
    // ...and a home protected once stays protected after rules without it.
    expect(mergeGuardRules(newer, plain)).toMatchObject({
      configHomes: ['/h/me'],
      configExempt: ['/h/me/.cache/x'],
    });
    expect(mergeGuardRules(plain, plain).configHomes).toBeUndefined();
  });
});
