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

  it('safeStatSync and safeLstatSync of a socket or a FIFO answer as node does and leave it resolving', () => {
    for (const what of ['sock', 'fifo']) {
      const code = `
        const path = join(dir, '${what}');
        const kind = (s) => [s.isSocket(), s.isFIFO()].join();
        if (kind(core.safeStatSync(path)) !== kind(fs.statSync(path))) throw new Error('stat');
        if (kind(core.safeLstatSync(path)) !== kind(fs.lstatSync(path))) throw new Error('lstat');
        if (core.safeStatSync(join(dir, 'none'), { throwIfNoEntry: false }) !== undefined) throw new Error('none');
        if (typeof core.safeStatSync(path, { bigint: true }).ino !== 'bigint') throw new Error('bigint');`;
      for (const call of ['safeStatSync', 'safeLstatSync'])
        expect(resolvedAfter(`${code}\ncore.${call}(path);`, core), `${call} ${what}`).toMatch(REAL);
    }
  });

  it("realpathSync of a socket needs no reset: it lstat's into the bigint buffer the loader does not read", () => {
    expect(resolvedAfter("fs.realpathSync(join(dir, 'sock')); fs.realpathSync(join(dir, 'fifo'));")).toMatch(
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

describe('a tool call', () => {
  it("leaves node's shared stat buffer off a socket its tool stat'ed, whatever the plugin", () => {
    const zod = pathToFileURL(
      resolve(fileURLToPath(import.meta.url), '../../node_modules/zod/index.js'),
    ).href;
    const imports = `${core}\nimport { z } from ${JSON.stringify(zod)};`;
    const code = `
      const plugin = core.definePlugin({
        name: 'peek',
        version: '1.0.0',
        setup: () => ({
          tools: [
            core.defineTool({
              name: 'peek',
              description: 'stats a path',
              inputSchema: z.object({ path: z.string() }),
              execute: ({ path }) => ({ socket: fs.lstatSync(path).isSocket() }),
            }),
          ],
        }),
      });
      const registry = new core.PluginRegistry({ cwd: dir, plugins: [plugin] });
      await registry.expose('peek');
      const r = await registry.execute('peek', { path: join(dir, 'sock') });
      if (r.socket !== true) throw new Error(JSON.stringify(r));
      await registry.dispose();`;
    expect(resolvedAfter(code, imports)).toMatch(REAL);
  });
});
