// The gate's file-system answers are remembered within one decision only: a symlink, directory or
// .git a command creates between two decisions is seen by the second (no stale resolution lets a
// write or a delete escape), and within a snapshot each path is asked once.
import 'reflect-metadata';
import { loadShellParser, type ShellParser } from '@conch/shell-syntax';
import { linkSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { resolvedAfter } from '@conch/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { permissionConfigSchema } from './config.js';
import { linkAt, realpathOf, snapshot, statOf } from './fs-snapshot.js';
import { PermissionEngine } from './gate.js';
import { realish, resolveLikeKernel } from './paths.js';

let parser: ShellParser;
let dir: string;
let ws: string;
let home: string;
beforeAll(async () => {
  parser = await loadShellParser();
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-fs-snapshot-')));
  ws = join(dir, 'ws');
  home = join(dir, 'home');
  mkdirSync(ws);
  mkdirSync(join(home, '.ssh'), { recursive: true });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function engine(sandbox?: 'workspace-write') {
  return new PermissionEngine({
    parser,
    config: permissionConfigSchema.parse({}),
    cwd: ws,
    home,
    ...(sandbox ? { sandbox } : {}),
  });
}

describe('fs snapshot', () => {
  it('remembers answers inside a snapshot only', () => {
    const path = join(ws, 'later');
    snapshot(() => {
      expect(linkAt(path)).toBeUndefined();
      expect(statOf(path)).toBeUndefined();
      expect(realpathOf(path)).toBeUndefined();
      symlinkSync(home, path);
      // The same decision keeps its one view of the file system.
      expect(linkAt(path)).toBeUndefined();
      expect(statOf(path)).toBeUndefined();
      expect(realpathOf(path)).toBeUndefined();
    });
    expect(linkAt(path)).toBe(home);
    expect(statOf(path)?.isDirectory()).toBe(true);
    expect(realpathOf(path)).toBe(home);
    rmSync(path);
  });

  it('resolves as before: missing paths, symlinks before .., real paths', () => {
    mkdirSync(join(ws, 'a', 'b'), { recursive: true });
    symlinkSync(join(ws, 'a', 'b'), join(ws, 'ab'));
    for (const run of [(f: () => void) => f(), snapshot]) {
      run(() => {
        expect(resolveLikeKernel('ab/../x', ws)).toBe(join(ws, 'a', 'x'));
        expect(resolveLikeKernel('ab', ws, false)).toBe(join(ws, 'ab'));
        expect(resolveLikeKernel('missing/../y', ws)).toBe(join(ws, 'y'));
        expect(realish(join(ws, 'ab'))).toBe(join(ws, 'a', 'b'));
        expect(realish(join(ws, 'ab', 'new', 'file'))).toBe(join(ws, 'a', 'b', 'new', 'file'));
        expect(realish(join(ws, 'nothing'))).toBe(join(ws, 'nothing'));
      });
    }
    rmSync(join(ws, 'ab'));
    rmSync(join(ws, 'a'), { recursive: true });
  });

  it('a symlink created after a decision is seen by the next one', () => {
    for (const gate of [engine(), engine('workspace-write')]) {
      expect(gate.evaluate('echo x > out').verdict).not.toBe('deny');
      expect(gate.evaluate('rm -rf build').verdict).not.toBe('deny');
      symlinkSync(join(home, '.ssh'), join(ws, 'out'));
      symlinkSync(home, join(ws, 'build'));
      expect(gate.evaluate('echo x > out/authorized_keys').verdict).toBe('deny');
      expect(gate.evaluate('rm -rf build/').verdict).toBe('deny');
      rmSync(join(ws, 'out'));
      rmSync(join(ws, 'build'));
      expect(gate.evaluate('echo x > out/authorized_keys').verdict).not.toBe('deny');
      expect(gate.evaluate('rm -rf build/').verdict).not.toBe('deny');
    }
  });

  it('a hard link made after a decision is seen by the next one', () => {
    writeFileSync(join(home, '.bashrc'), '');
    writeFileSync(join(ws, 'notes'), '');
    const gate = engine();
    expect(gate.evaluate('echo x >> notes').verdict).not.toBe('deny');
    rmSync(join(ws, 'notes'));
    // A hard link of the protected file under an innocent name.
    linkSync(join(home, '.bashrc'), join(ws, 'notes'));
    expect(gate.evaluate('echo x >> notes').verdict).toBe('deny');
    rmSync(join(ws, 'notes'));
  });
});

describe('a decision that stats a socket (nodejs/node#51142)', () => {
  const dist = pathToFileURL(resolve(fileURLToPath(import.meta.url), '../../dist/fs-snapshot.js')).href;
  const major = Number(process.versions.node.split('.')[0]);

  it("leaves node's shared stat buffer off it: the host's next import of a symlinked package resolves to its real path", () => {
    const imports = `import { snapshot, linkAt, statOf } from ${JSON.stringify(dist)};`;
    for (const what of ['sock', 'fifo']) {
      const code = `snapshot(() => { linkAt(join(dir, '${what}')); statOf(join(dir, '${what}')); });`;
      expect(resolvedAfter(code, imports), what).toMatch(/\/store\/second\/index\.js$/);
    }
  });

  it('so do the same stats outside a snapshot (each stat of a socket or FIFO resets it)', () => {
    const imports = `import { linkAt, statOf } from ${JSON.stringify(dist)};`;
    for (const what of ['sock', 'fifo']) {
      const code = `linkAt(join(dir, '${what}')); statOf(join(dir, '${what}'));`;
      expect(resolvedAfter(code, imports), what).toMatch(/\/store\/second\/index\.js$/);
    }
  });

  it.runIf(major < 24)(`node's own lstat of the socket misresolves on node ${major} (the control)`, () => {
    expect(resolvedAfter("fs.lstatSync(join(dir, 'sock'));")).toMatch(
      /\/app\/node_modules\/second\/index\.js$/,
    );
  });
});
