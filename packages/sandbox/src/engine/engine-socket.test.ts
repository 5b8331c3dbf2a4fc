// Invariant: looking for a container engine (a stat of its socket, outside any tool call) leaves
// node's shared stat buffer where the host's next import of a symlinked package still resolves to
// its real path (nodejs/node#51142 on Node 20 and 22; see @conch/core's stale-stat.ts).
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { resolvedAfter } from '@conch/test-support';
import { describe, expect, it } from 'vitest';

const dist = pathToFileURL(resolve(fileURLToPath(import.meta.url), '../../../dist/index.js')).href;
const imports = `import * as sandbox from ${JSON.stringify(dist)};\nimport { createServer as httpServer } from 'node:http';`;
const REAL = /\/store\/second\/index\.js$/;

describe('engineAvailable', () => {
  it('finds an engine on a real socket and leaves symlinked packages resolving to their real path', () => {
    const code = `
      const socket = join(dir, 'engine.sock');
      const engine = httpServer((req, res) => {
        res.writeHead(req.url === '/_ping' ? 200 : 404, { Server: 'stub', 'Api-Version': '1.41' });
        res.end('OK');
      });
      await new Promise((r) => engine.listen(socket, r));
      const found = await sandbox.engineAvailable({ engineSocket: socket });
      engine.close();
      if (!found.available || found.socket !== socket) throw new Error(JSON.stringify(found));`;
    expect(resolvedAfter(code, imports)).toMatch(REAL);
  });
});
