// Invariant: a host loopback service the network allow-list names with its port (`127.0.0.1:<port>`, `localhost:<port>`) answers from inside the default sandbox at the same address and port, with no prompt; every other port of the host's loopback stays unreachable.
import 'reflect-metadata';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, type ApprovalRequest, type ToolResult } from '@conch/core';
import { findBwrap } from '@conch/process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { permissionPlugin } from './plugin.js';

const STEP_TIMEOUT = 600;
const TEST_TIMEOUT = 10 * 60_000;
type Result = ToolResult & Record<string, any>;

let ws: string;
const servers: Server[] = [];
const registries: PluginRegistry[] = [];

/** An HTTP server on the host's 127.0.0.1 answering `name`. */
async function hostService(name: string): Promise<number> {
  const server = createServer((_req, res) => res.end(`${name}\n`));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

beforeEach(() => {
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-loopback-')));
});
afterEach(async () => {
  for (const r of registries.splice(0)) await r.dispose();
  for (const s of servers.splice(0)) await new Promise((resolve) => s.close(resolve));
  rmSync(ws, { recursive: true, force: true });
});

async function setup(allow: string[]) {
  const asked: ApprovalRequest[] = [];
  const registry = new PluginRegistry({ cwd: ws, plugins: [permissionPlugin, cliPlugin] });
  registries.push(registry);
  await registry.expose('permission', {
    network: { allow },
    approve: async (request: ApprovalRequest) => {
      asked.push(request);
      return 'deny' as const;
    },
  });
  await registry.expose('cli', {});
  const run = async (command: string) =>
    (await registry.execute('cli_based_tool', {
      command,
      background: false,
      timeout: STEP_TIMEOUT,
    })) as Result;
  return { run, asked };
}

describe.runIf(findBwrap() || process.env.CI)('host loopback services named in network.allow', () => {
  it(
    'answer inside at their own address; other host ports do not',
    async () => {
      const named = await hostService('named-by-address');
      const byName = await hostService('named-as-localhost');
      const other = await hostService('never-named');
      const { run, asked } = await setup([`127.0.0.1:${named}`, `localhost:${byName}`]);
      for (const [command, expected] of [
        [`curl -s --max-time 120 http://127.0.0.1:${named}/health`, 'named-by-address'],
        [`curl -s --max-time 120 http://localhost:${named}/`, 'named-by-address'],
        [`curl -s --max-time 120 http://localhost:${byName}/x`, 'named-as-localhost'],
        [
          `python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:${byName}/', timeout=120).read().decode())"`,
          'named-as-localhost',
        ],
        [
          `node -e "require('http').get('http://127.0.0.1:${named}/', (r) => r.pipe(process.stdout))"`,
          'named-by-address',
        ],
      ] as const) {
        const result = await run(command);
        expect(result.sandbox, JSON.stringify(result)).toBe('workspace-write');
        expect(result.returncode, JSON.stringify(result)).toBe(0);
        expect(result.stdout, JSON.stringify(result)).toContain(expected);
      }
      for (const command of [
        `curl -s --max-time 120 http://127.0.0.1:${other}/`,
        `curl -s --max-time 120 http://localhost:${other}/`,
        `python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:${other}/', timeout=120).read().decode())"`,
      ]) {
        const result = await run(command);
        expect(result.returncode, JSON.stringify(result)).not.toBe(0);
        expect(`${result.stdout}${result.stderr}`).not.toContain('never-named');
      }
      expect(asked).toEqual([]);
    },
    TEST_TIMEOUT,
  );

  it(
    'a server started inside on another port still answers inside, beside the host service',
    async () => {
      const named = await hostService('host-side');
      const { run } = await setup([`127.0.0.1:${named}`]);
      const result = await run(
        `python3 -u -m http.server 0 --bind 127.0.0.1 > server.log 2>&1 & pid=$!; for i in $(seq 1 600); do grep -q 'port' server.log && break; sleep 0.2; done; port=$(sed -n 's/.*port \\([0-9]*\\).*/\\1/p' server.log | head -1); curl -s --max-time 120 "http://127.0.0.1:$port/server.log" >/dev/null && echo inside-ok; curl -s --max-time 120 http://127.0.0.1:${named}/; kill $pid`,
      );
      expect(result.stdout, JSON.stringify(result)).toContain('inside-ok');
      expect(result.stdout, JSON.stringify(result)).toContain('host-side');
    },
    TEST_TIMEOUT,
  );
});
