// Invariant: after conch removes a tree holding a socket or FIFO (or stats one in a decision), the host's next import of a package reached through a symlink still resolves to the package's real path (nodejs/node#51142 on Node 20 and 22).
import { execFileSync } from 'node:child_process';
import { mkdirSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { tempDir } from '@conch/test-support';
import { describe, expect, it } from 'vitest';

const dist = pathToFileURL(resolve(fileURLToPath(import.meta.url), '../../dist/index.js')).href;

/**
 * A real node process with two packages laid out as pnpm does (node_modules/<name> a symlink into
 * a store): it resolves the first (the loader caches the path's parts), makes a unix socket and a
 * FIFO in a dir and removes the dir the way `how` says, then prints where the second resolves.
 */
function secondResolvesTo(
  how: 'rmSync' | 'removeSync' | 'statSync of the socket, then clearStaleStat',
): string {
  const root = realpathSync(tempDir('conch-stale-stat-'));
  for (const name of ['first', 'second']) {
    const store = join(root, 'store', name);
    mkdirSync(store, { recursive: true });
    writeFileSync(
      join(store, 'package.json'),
      JSON.stringify({ name, type: 'module', exports: './index.js' }),
    );
    writeFileSync(join(store, 'index.js'), 'export default 1;\n');
    mkdirSync(join(root, 'app', 'node_modules'), { recursive: true });
    symlinkSync(join('..', '..', 'store', name), join(root, 'app', 'node_modules', name));
  }
  const remove = {
    rmSync: 'fs.rmSync(dir, { recursive: true, force: true });',
    removeSync: 'core.removeSync(dir, { recursive: true, force: true });',
    'statSync of the socket, then clearStaleStat': "fs.statSync(join(dir, 'sock')); core.clearStaleStat();",
  }[how];
  writeFileSync(
    join(root, 'app', 'main.mjs'),
    `import fs from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
const core = await import(${JSON.stringify(dist)});
import.meta.resolve('first');
const dir = ${JSON.stringify(join(root, 'made'))};
fs.mkdirSync(dir);
execFileSync('mkfifo', [join(dir, 'fifo')]);
const server = createServer();
await new Promise((r) => server.listen(join(dir, 'sock'), r));
${remove}
console.log(import.meta.resolve('second'));
server.close();
`,
  );
  return execFileSync(process.execPath, [join(root, 'app', 'main.mjs')], { encoding: 'utf8' }).trim();
}

describe('node shared stat buffer (nodejs/node#51142)', () => {
  const major = Number(process.versions.node.split('.')[0]);

  it('removeSync and clearStaleStat leave the loader resolving symlinked packages to their real path', () => {
    for (const how of ['removeSync', 'statSync of the socket, then clearStaleStat'] as const) {
      expect(secondResolvesTo(how), how).toMatch(/\/store\/second\/index\.js$/);
    }
  });

  it.runIf(major < 24)(`without it, node ${major} misresolves (the control: this test can fail)`, () => {
    expect(secondResolvesTo('rmSync')).toMatch(/\/app\/node_modules\/second\/index\.js$/);
  });
});
