// Invariant: after conch removes a tree holding a socket or FIFO (or stats one), the host's next import of a package reached through a symlink still resolves to the package's real path (nodejs/node#51142 on Node 20 and 22).
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { resolvedAfter } from '@conch/test-support';
import { describe, expect, it } from 'vitest';

const dist = pathToFileURL(resolve(fileURLToPath(import.meta.url), '../../dist/index.js')).href;
const core = `import * as core from ${JSON.stringify(dist)};`;
const REAL = /\/store\/second\/index\.js$/;
const major = Number(process.versions.node.split('.')[0]);

describe("node's shared stat buffer (nodejs/node#51142)", () => {
  it('removeSync of a tree with a socket and a FIFO leaves symlinked packages resolving to their real path', () => {
    expect(resolvedAfter('core.removeSync(dir, { recursive: true, force: true });', core)).toMatch(REAL);
  });

  it('so does clearStaleStat after a stat of a socket, and of a FIFO', () => {
    for (const what of ['sock', 'fifo'])
      expect(resolvedAfter(`fs.lstatSync(join(dir, '${what}')); core.clearStaleStat();`, core), what).toMatch(
        REAL,
      );
  });

  it.runIf(major < 24)(`without them, node ${major} misresolves (the control: these tests can fail)`, () => {
    expect(resolvedAfter('fs.rmSync(dir, { recursive: true, force: true });')).toMatch(
      /\/app\/node_modules\/second\/index\.js$/,
    );
    expect(resolvedAfter("fs.statSync(join(dir, 'fifo'));")).toMatch(
      /\/app\/node_modules\/second\/index\.js$/,
    );
  });
});
