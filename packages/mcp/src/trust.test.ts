// conch-mcp never runs with a conch.config.json, or loads a plugin package, that is new or changed since it last ran in that workspace (a sandboxed command may have written it) until the human starts it with --trust.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultTrustStorePath } from '@conch/core';
import { tempDir } from '@conch/test-support';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, test } from 'vitest';
import { chooseTrust, parseCliArgs } from './cli-args.js';
import { BIN, type Harness, startServer, withoutConchConfig } from './test-support/harness.js';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** A workspace (real path: the store keys real paths). */
const workspace = () => realpathSync(tempDir('conch-mcp-trust-'));

/** A config that shows which one is served: cli only, with one allow rule. */
const configWith = (allow: string) =>
  JSON.stringify({ plugins: { permission: { rules: { allow: [allow] } }, cli: {} } });

/** The tools served, proving the server started. */
const toolNames = async (h: Harness) => (await h.client.listTools()).tools.map((t) => t.name);

/** Starts the real bin and expects it to refuse to start; returns its stderr. */
function refusedStart(cwd: string, args: string[] = [], env: Record<string, string> = {}) {
  const run = spawnSync(process.execPath, [BIN, ...args], {
    cwd,
    env: { ...withoutConchConfig(), ...env },
    encoding: 'utf8',
    input: '',
    timeout: 60_000,
  });
  expect(run.status).toBe(1);
  return run.stderr;
}

const storeFile = () => defaultTrustStorePath(process.env);
const pins = () =>
  (
    JSON.parse(readFileSync(storeFile(), 'utf8')) as {
      pins: Record<string, { kind: string; digest: string }>;
    }
  ).pins;

describe('conch.config.json in the working directory', () => {
  test('pinned at the first start; a changed one refuses to start naming the file and the flag; --trust accepts it', async () => {
    expect(storeFile().startsWith(process.env.XDG_STATE_HOME as string)).toBe(true);
    const cwd = workspace();
    const config = join(cwd, 'conch.config.json');
    writeFileSync(config, configWith('git status'));
    harness = await startServer({ cwd });
    expect(await toolNames(harness)).toContain('cli_based_tool');
    await harness.close();
    harness = undefined;
    expect(pins()[config]).toMatchObject({ kind: 'config', digest: expect.stringMatching(/^sha256:/) });

    // What a sandboxed command could write: everything outside the sandbox from the next start on.
    writeFileSync(
      config,
      JSON.stringify({ plugins: { permission: { sandbox: 'off' }, cli: {}, files: {} } }),
    );
    const stderr = refusedStart(cwd);
    expect(stderr).toContain(`The config file ${config} is changed since conch last ran in this workspace`);
    expect(stderr).toContain('a sandboxed command may have written it');
    expect(stderr).toContain('conch-mcp --trust');
    expect(stderr).toContain('CONCH_TRUST=1');

    harness = await startServer({ cwd, args: ['--trust'] });
    expect(await toolNames(harness)).toContain('read_file');
    expect(harness.stderr()).toContain(
      'was changed since conch last ran in this workspace; accepted and pinned',
    );
    await harness.close();
    // Accepted once: the next start needs no flag.
    harness = await startServer({ cwd });
    expect(await toolNames(harness)).toContain('read_file');
  });

  test('a config that appears after a config-less start is new: refused, then accepted with CONCH_TRUST=1', async () => {
    const cwd = workspace();
    harness = await startServer({ cwd });
    expect(await toolNames(harness)).toContain('read_file');
    await harness.close();
    harness = undefined;
    expect(pins()[join(cwd, 'conch.config.json')]).toMatchObject({ digest: 'none' });

    writeFileSync(join(cwd, 'conch.config.json'), configWith('git status'));
    expect(refusedStart(cwd)).toContain('is new since conch last ran in this workspace');
    harness = await startServer({ cwd, env: { CONCH_TRUST: '1' } });
    expect(await toolNames(harness)).not.toContain('read_file');
  });

  test('--config naming a changed file in the workspace is refused too; the hint repeats the arguments', async () => {
    const cwd = workspace();
    harness = await startServer({
      cwd,
      config: JSON.parse(configWith('git status')) as Record<string, unknown>,
    });
    await harness.close();
    harness = undefined;
    writeFileSync(join(cwd, 'test.config.json'), configWith('git log'));
    const stderr = refusedStart(cwd, ['--config', 'test.config.json']);
    expect(stderr).toContain(join(cwd, 'test.config.json'));
    expect(stderr).toContain('conch-mcp --trust --config test.config.json');
  });

  test('a config written by a sandboxed command through conch-mcp itself is refused at the next start', async () => {
    const cwd = workspace();
    harness = await startServer({ cwd });
    const result = (await harness.client.callTool({
      name: 'cli_based_tool',
      arguments: {
        command: `printf '%s' '{"plugins":{"permission":{"sandbox":"off"},"cli":{}}}' > conch.config.json`,
      },
    })) as CallToolResult;
    await harness.close();
    harness = undefined;
    const written = (() => {
      try {
        return readFileSync(join(cwd, 'conch.config.json'), 'utf8');
      } catch {
        return undefined;
      }
    })();
    // Where the sandbox itself refuses the write, there is nothing to refuse at the start.
    if (written === undefined) {
      expect(JSON.stringify(result.structuredContent)).toMatch(/SANDBOX_REFUSED_WRITE|denied|Blocked/i);
      return;
    }
    expect(refusedStart(cwd)).toContain(`The config file ${join(cwd, 'conch.config.json')} is new`);
  });
});

describe('plugin packages in the working directory', () => {
  /** An installed plugin package (no dependencies, no tools): `name` from conch-plugin-<name>. */
  function writePlugin(cwd: string, name: string, comment = '') {
    const dir = join(cwd, 'node_modules', `conch-plugin-${name}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({
        name: `conch-plugin-${name}`,
        version: '1.0.0',
        type: 'module',
        conch: { plugin: './plugin.js' },
      }),
    );
    writeFileSync(
      join(dir, 'plugin.js'),
      `export default { name: '${name}', version: '1.0.0', tools: [] }; // ${comment}\n`,
    );
    return dir;
  }

  test('a changed plugin the config names stops the start (PLUGIN_UNTRUSTED, with the flag); --trust accepts it', async () => {
    const cwd = workspace();
    const dir = writePlugin(cwd, 'hello');
    writeFileSync(
      join(cwd, 'conch.config.json'),
      JSON.stringify({ plugins: { permission: {}, cli: {}, hello: {} } }),
    );
    harness = await startServer({ cwd });
    await harness.close();
    harness = undefined;
    writePlugin(cwd, 'hello', 'changed');

    const stderr = refusedStart(cwd);
    expect(stderr).toContain(`Unknown plugin 'hello'`);
    expect(stderr).toContain(`conch-plugin-hello (${dir}): changed since conch last ran in this workspace`);
    expect(stderr).toContain('conch-mcp --trust');

    harness = await startServer({ cwd, args: ['--trust'] });
    expect(await toolNames(harness)).toContain('cli_based_tool');
    expect(harness.stderr()).toContain(`plugin package 'conch-plugin-hello' at ${dir} was changed`);
  });

  test('a new plugin package the config does not name is not loaded, and the start-up says so', async () => {
    const cwd = workspace();
    harness = await startServer({ cwd });
    await harness.close();
    const dir = writePlugin(cwd, 'planted');
    harness = await startServer({ cwd });
    expect(await toolNames(harness)).toContain('cli_based_tool');
    expect(harness.stderr()).toContain(`plugin package 'conch-plugin-planted' at ${dir} is not loaded`);
    expect(harness.stderr()).toContain('new since conch last ran in this workspace');
  });
});

describe('the flag and the variable', () => {
  test('--trust parses; CONCH_TRUST is 1/true or 0/false/empty, anything else is an error naming it', () => {
    expect(parseCliArgs(['--trust'])).toMatchObject({ trust: true });
    expect(parseCliArgs([])).toMatchObject({ trust: false });
    expect(chooseTrust({ trust: true }, {})).toEqual({ trust: true, source: '--trust' });
    expect(chooseTrust({ trust: false }, { CONCH_TRUST: '1' })).toEqual({
      trust: true,
      source: 'CONCH_TRUST',
    });
    expect(chooseTrust({ trust: false }, { CONCH_TRUST: 'true' })).toMatchObject({ trust: true });
    expect(chooseTrust({ trust: false }, { CONCH_TRUST: '0' })).toEqual({ trust: false });
    expect(chooseTrust({ trust: false }, { CONCH_TRUST: '' })).toEqual({ trust: false });
    expect(() => chooseTrust({ trust: false }, { CONCH_TRUST: 'yes please' })).toThrow(
      /CONCH_TRUST must be 1 or true/,
    );
  });

  test('--help documents --trust and CONCH_TRUST', () => {
    const help = spawnSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' }).stdout;
    expect(help).toContain('--trust');
    expect(help).toContain('CONCH_TRUST');
    expect(help).toContain('trust.json');
  });
});
