// The config from CONCH_CONFIG (launchers such as the MCP Inspector take --config for themselves):
// --config wins, the start-up log line says which was used, and the Inspector's own CLI lists and
// calls conch-mcp's tools with `-e CONCH_CONFIG=...`.
import { execFile } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { tempDir } from '@conch/test-support';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, test } from 'vitest';
import { chooseConfig } from './cli-args.js';
import { BIN, type Harness, startServer, withoutConchConfig } from './test-support/harness.js';

const run = promisify(execFile);

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** A config without the files plugin and with one allow rule: its tools and its rule show it is the one served. */
function writeConfig(dir: string, name: string, allow: string): string {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify({ plugins: { permission: { rules: { allow: [allow] } }, cli: {} } }));
  return file;
}

describe('chooseConfig', () => {
  test('--config wins over CONCH_CONFIG; an empty CONCH_CONFIG is unset', () => {
    expect(chooseConfig({ config: 'a.json' }, { CONCH_CONFIG: 'b.json' })).toEqual({
      config: 'a.json',
      source: '--config',
    });
    expect(chooseConfig({}, { CONCH_CONFIG: 'b.json' })).toEqual({
      config: 'b.json',
      source: 'CONCH_CONFIG',
    });
    expect(chooseConfig({}, { CONCH_CONFIG: '' })).toBeUndefined();
    expect(chooseConfig({}, {})).toBeUndefined();
  });
});

describe('conch-mcp with CONCH_CONFIG', () => {
  test('serves the config CONCH_CONFIG names and says so at start-up', async () => {
    const dir = tempDir('conch-mcp-env-');
    const file = writeConfig(dir, 'from-env.json', 'touch from-env.txt');
    harness = await startServer({ cwd: tempDir('conch-mcp-cwd-'), env: { CONCH_CONFIG: file } });
    const names = (await harness.client.listTools()).tools.map((t) => t.name);
    expect(names).toContain('cli_based_tool');
    expect(names).not.toContain('read_file');
    const result = (await harness.client.callTool({
      name: 'cli_based_tool',
      arguments: { command: 'touch from-env.txt', sandbox: false, justification: 'allowed by the rule' },
    })) as CallToolResult;
    expect(result.structuredContent).toMatchObject({ returncode: 0 });
    // Relative paths in the config resolve against its directory: the tools run in `dir`.
    expect(existsSync(join(dir, 'from-env.txt'))).toBe(true);
    expect(harness.stderr()).toContain(`config ${file} (from the CONCH_CONFIG environment variable)`);
  });

  test('--config wins when both are given', async () => {
    const dir = tempDir('conch-mcp-env-');
    const fromEnv = writeConfig(dir, 'from-env.json', 'touch from-env.txt');
    const fromFlag = join(dir, 'from-flag.json');
    writeFileSync(fromFlag, JSON.stringify({ plugins: { permission: {}, cli: {}, files: {} } }));
    harness = await startServer({ cwd: dir, env: { CONCH_CONFIG: fromEnv }, args: ['--config', fromFlag] });
    expect((await harness.client.listTools()).tools.map((t) => t.name)).toContain('read_file');
    expect(harness.stderr()).toContain(`config ${fromFlag} (from --config)`);
  });
});

// The MCP Inspector's CLI, from the npm registry (npx): skipped, saying so, where it cannot be installed.
const INSPECTOR = '@modelcontextprotocol/inspector@2';
let inspectorMissing: string | undefined;
const inspector = async (args: string[], cwd: string) => {
  const { stdout } = await run('npx', ['-y', INSPECTOR, '--cli', ...args], {
    cwd,
    env: withoutConchConfig(),
    timeout: 240_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  return stdout;
};

describe('conch-mcp under the MCP Inspector CLI', () => {
  test('lists and calls the tools of the CONCH_CONFIG config', async (ctx) => {
    const cwd = tempDir('conch-mcp-inspector-');
    try {
      await inspector(['--help'], cwd);
    } catch (error) {
      inspectorMissing = String(error);
    }
    if (inspectorMissing) ctx.skip(`${INSPECTOR} cannot be installed here: ${inspectorMissing}`);
    const dir = tempDir('conch-mcp-env-');
    const file = writeConfig(dir, 'conch.json', 'touch by-inspector.txt');
    // The Inspector hands the server a minimal environment: the throwaway trust store is passed on.
    const state = `XDG_STATE_HOME=${process.env.XDG_STATE_HOME}`;
    const server = ['-e', `CONCH_CONFIG=${file}`, '-e', state, process.execPath, BIN];
    const listed = JSON.parse(await inspector([...server, '--method', 'tools/list'], cwd)) as {
      tools: { name: string }[];
    };
    const names = listed.tools.map((t) => t.name);
    expect(names).toContain('cli_based_tool');
    expect(names).not.toContain('read_file');
    const called = JSON.parse(
      await inspector(
        [
          ...server,
          '--method',
          'tools/call',
          '--tool-name',
          'cli_based_tool',
          '--tool-arg',
          'command=touch by-inspector.txt',
          '--tool-arg',
          'sandbox=false',
          '--tool-arg',
          'justification=allowed by the rule',
        ],
        cwd,
      ),
    ) as CallToolResult;
    expect(called.structuredContent).toMatchObject({ returncode: 0 });
    expect(existsSync(join(dir, 'by-inspector.txt'))).toBe(true);
  }, 600_000);
});
