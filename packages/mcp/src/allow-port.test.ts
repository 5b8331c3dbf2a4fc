// Invariant: `conch-mcp --allow-port <port>` (and CONCH_ALLOW_PORTS) makes a service on the host's
// loopback answer a sandboxed command at 127.0.0.1:<port> / localhost:<port> with conch-mcp's
// default config, no prompt; a port not listed stays unreachable; a bad port is an argument error
// naming the flag and the part that is not a port.
import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tempDir } from '@conch/test-support';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, test } from 'vitest';
import { chooseAllowPorts, parseCliArgs } from './cli-args.js';
import { MCP_DEFAULT_CONFIG, withHostPorts } from './start.js';
import { type Harness, startServer } from './test-support/harness.js';

describe('--allow-port and CONCH_ALLOW_PORTS', () => {
  test('read as ports, repeated or comma-separated, each once', () => {
    expect(parseCliArgs(['--allow-port', '5432']).allowPorts).toEqual([5432]);
    expect(parseCliArgs(['--allow-port=5432,8080', '--allow-port', ' 3000 ']).allowPorts).toEqual([
      5432, 8080, 3000,
    ]);
    expect(chooseAllowPorts({ allowPorts: [5432] }, { CONCH_ALLOW_PORTS: '8080, 5432' })).toEqual([
      5432, 8080,
    ]);
    expect(chooseAllowPorts({ allowPorts: [] }, { CONCH_ALLOW_PORTS: '' })).toEqual([]);
  });

  test.each([
    [['--allow-port'], /--allow-port expects a port .* received nothing/],
    [['--allow-port', '--trust'], /--allow-port expects a port .* received "--trust"/],
    [['--allow-port', '0'], /"0" is not one/],
    [['--allow-port', '65536'], /"65536" is not one/],
    [['--allow-port=80,http'], /"http" is not one/],
    [['--allow-port', '5432:5433'], /"5432:5433" is not one/],
  ])('refuses %j', (argv, message) => {
    expect(() => parseCliArgs(argv)).toThrow(message);
  });

  test('CONCH_ALLOW_PORTS with a bad part names the variable', () => {
    expect(() => chooseAllowPorts({ allowPorts: [] }, { CONCH_ALLOW_PORTS: '8080,x' })).toThrow(
      /CONCH_ALLOW_PORTS expects ports from 1 to 65535; "x" is not one/,
    );
  });

  test("adds localhost:<port> to the permission plugin's allow-list, keeping what is there", () => {
    const opened = withHostPorts(MCP_DEFAULT_CONFIG, [5432, 8080]);
    const allow = (opened.plugins!.permission as { network: { allow: string[] } }).network.allow;
    expect(allow).toEqual(expect.arrayContaining(['registry.npmjs.org', 'localhost:5432', 'localhost:8080']));
    expect(withHostPorts(opened, [5432])).toEqual(opened);
    // Without a permission plugin there is nothing to open.
    const none = { plugins: { cli: {} } };
    expect(withHostPorts(none, [5432])).toBe(none);
  });
});

let harness: Harness | undefined;
const servers: Server[] = [];
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  for (const s of servers.splice(0)) await new Promise((resolve) => s.close(resolve));
});

async function hostService(name: string): Promise<number> {
  const server = createServer((_req, res) => res.end(`${name}\n`));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

// Under CI (.ci/run installs bubblewrap) a missing bwrap fails this test instead of skipping it.
const bwrap = spawnSync('bwrap', ['--version']).status === 0;

describe.runIf(bwrap || process.env.CI)('conch-mcp --allow-port, end to end', () => {
  test('the listed ports answer inside the sandbox; another host port does not', async () => {
    const db = await hostService('database');
    const api = await hostService('api');
    const other = await hostService('never-listed');
    harness = await startServer({
      cwd: tempDir('conch-mcp-ports-'),
      args: ['--allow-port', String(db)],
      env: { CONCH_ALLOW_PORTS: String(api) },
    });
    const call = async (command: string) =>
      (
        (await harness!.client.callTool({
          name: 'cli_based_tool',
          arguments: { command, timeout: 600 },
        })) as CallToolResult
      ).structuredContent as Record<string, unknown>;
    const one = await call(`curl -s --max-time 120 http://localhost:${db}/`);
    expect(one).toMatchObject({ returncode: 0, sandbox: 'workspace-write' });
    expect(one.stdout).toBe('database\n');
    const two = await call(`curl -s --max-time 120 http://127.0.0.1:${api}/`);
    expect(two.stdout).toBe('api\n');
    const refused = await call(`curl -s --max-time 120 http://127.0.0.1:${other}/`);
    expect(refused.returncode).not.toBe(0);
    expect(String(refused.stdout)).not.toContain('never-listed');
  }, 300_000);
});
