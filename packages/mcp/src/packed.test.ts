// The tarball `pnpm pack` makes of @conch/mcp installs from the npm registry into an empty directory and serves MCP there: no @conch/* dependency, the bundled built-in plugins (files included), its own supervisor, the WASM parser and node-pty.
import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { isAlive, tempDir, waitFor } from '@conch/test-support';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PACKAGE_DIR } from './test-support/harness.js';

const run = promisify(execFile);
const version = (JSON.parse(readFileSync(join(PACKAGE_DIR, 'package.json'), 'utf8')) as { version: string })
  .version;

// The bin's code cache (os.tmpdir() by default) goes in a directory of this test's.
const compileCache = mkdtempSync(join(tmpdir(), 'conch-mcp-packed-cache-'));
// npm and pnpm as a new user runs them: none of the npm_* variables of the `pnpm test` around us.
const cleanEnv = {
  ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith('npm_'))),
  CONCH_COMPILE_CACHE: compileCache,
} as Record<string, string>;
// stdin is closed at once: a step that would wait for input (an npm prompt) fails instead of hanging.
const sh = (file: string, args: string[], cwd: string, timeout = 300_000) => {
  const running = run(file, args, { cwd, env: cleanEnv, timeout, maxBuffer: 16 * 1024 * 1024 });
  running.child.stdin?.end();
  return running;
};

let packDir = '';
let appDir = '';
let tarball = '';

beforeAll(async () => {
  packDir = tempDir('conch-mcp-pack-');
  await sh('npx', ['-y', 'pnpm@10', 'pack', '--pack-destination', packDir], PACKAGE_DIR);
  const made = readdirSync(packDir).filter((f) => /^conch-mcp-.*\.tgz$/.test(f));
  expect(made).toEqual([`conch-mcp-${version}.tgz`]);
  tarball = join(packDir, made[0]!);
  appDir = tempDir('conch-mcp-app-');
  writeFileSync(join(appDir, 'package.json'), JSON.stringify({ name: 'empty-app', private: true }));
  await sh('npm', ['install', '--no-audit', '--no-fund', tarball], appDir);
}, 600_000);

afterAll(() => {
  for (const dir of [packDir, appDir, compileCache]) if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the packed @conch/mcp', () => {
  test('depends only on registry packages and ships the bundle, its types and the supervisor', async () => {
    const { stdout } = await sh('tar', ['-tzf', tarball], packDir);
    const files = stdout.split('\n').filter(Boolean).sort();
    expect(files).toEqual(
      expect.arrayContaining([
        'package/package.json',
        'package/README.md',
        'package/dist/bin.cjs',
        'package/dist/main.cjs',
        'package/dist/index.js',
        'package/dist/index.d.ts',
        'package/dist/supervisor-main.js',
        // The supervisor's posix_spawn addon and the sandbox's guard, prebuilt: nothing is
        // compiled where the package lands.
        ...['x64', 'arm64'].flatMap((arch) => [
          `package/prebuilds/linux-${arch}-glibc/conch_spawn.node`,
          `package/prebuilds/linux-${arch}-musl/conch_spawn.node`,
          `package/prebuilds/linux-${arch}/conch-guard`,
        ]),
      ]),
    );
    expect(files.filter((f) => f.startsWith('package/native/') || f.startsWith('package/scripts/'))).toEqual(
      [],
    );
    expect(existsSync(join(appDir, 'node_modules/@conch/mcp/dist/conch_spawn.node'))).toBe(false);
    const manifest = JSON.parse(
      readFileSync(join(appDir, 'node_modules/@conch/mcp/package.json'), 'utf8'),
    ) as {
      dependencies: Record<string, string>;
      devDependencies?: unknown;
      publishConfig?: unknown;
      scripts?: unknown;
    };
    // No install script: an install runs nothing.
    expect(manifest.scripts).toBeUndefined();
    const deps = Object.entries(manifest.dependencies);
    expect(deps.filter(([name]) => name.startsWith('@conch/'))).toEqual([]);
    expect(deps.filter(([, spec]) => !/^[\^~]?\d/.test(spec))).toEqual([]);
    expect(manifest.devDependencies).toBeUndefined();
    expect(manifest.publishConfig).toBeUndefined();
    const code = readdirSync(join(appDir, 'node_modules/@conch/mcp/dist'))
      .filter((f) => f.endsWith('.js') || f.endsWith('.cjs') || f.endsWith('.d.ts'))
      .map((f) => readFileSync(join(appDir, 'node_modules/@conch/mcp/dist', f), 'utf8'))
      .join('\n');
    expect(code).not.toMatch(/from\s+["']@conch\//);
    expect(code).not.toMatch(/import\(\s*["']@conch\//);
    expect(code).not.toMatch(/require\(\s*["']@conch\//);
  });

  test('`npx conch-mcp --help` and `--version` run in the directory it was installed into', async () => {
    const help = await sh('npx', ['--no-install', 'conch-mcp', '--help'], appDir, 120_000);
    expect(help.stdout).toContain('Usage: conch-mcp [--config <conch.config.json>]');
    const printed = await sh('npx', ['--no-install', 'conch-mcp', '--version'], appDir, 120_000);
    expect(printed.stdout.trim()).toBe(version);
  });

  test('`npx ./conch-mcp-*.tgz --help` runs the tarball itself', async () => {
    const { stdout } = await sh('npx', ['-y', `./conch-mcp-${version}.tgz`, '--help'], packDir);
    expect(stdout).toContain('Usage: conch-mcp');
  });

  test('its types compile in a strict NodeNext consumer', async () => {
    writeFileSync(
      join(appDir, 'consumer.mts'),
      [
        "import { createConchMcpServer, startStdioServer, type RunningServer } from '@conch/mcp';",
        'export async function serve(): Promise<RunningServer> {',
        "  const running = await startStdioServer({ config: 'conch.config.json', progressIntervalMs: 0 });",
        "  createConchMcpServer(running.registry, { name: 'x' });",
        '  running.registry.tools().map((t) => t.name satisfies string);',
        '  return running;',
        '}',
        '',
      ].join('\n'),
    );
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    const typeRoots = join(PACKAGE_DIR, 'node_modules/@types');
    await sh(
      process.execPath,
      [
        tsc,
        ...['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext'],
        ...['--target', 'es2022', '--typeRoots', typeRoots, '--types', 'node', 'consumer.mts'],
      ],
      appDir,
    ).catch((error: { stdout?: string }) => {
      throw new Error(`tsc rejected the published types:\n${error.stdout ?? String(error)}`);
    });
    // tsc reads every published declaration: ~20 s of one core quiet here, past a minute beside
    // three CPU hogs on 2 cores (the sh() bound is 300 s).
  }, 300_000);

  test('starts from its code cache after the first start, and still imports discovered plugins', async () => {
    // A plugin package beside it in node_modules (found by discovery, imported at run time).
    const pluginDir = join(appDir, 'node_modules', 'conch-packed-echo');
    mkdirSync(pluginDir, { recursive: true });
    writeFileSync(
      join(pluginDir, 'package.json'),
      JSON.stringify({
        name: 'conch-packed-echo',
        version: '0.0.0',
        type: 'module',
        conch: { plugin: './plugin.js' },
      }),
    );
    writeFileSync(
      join(pluginDir, 'plugin.js'),
      [
        "import { z } from 'zod';",
        'export default {',
        "  name: 'packed-echo', version: '0.0.0', configSchema: z.strictObject({}),",
        "  tools: [{ name: 'packed_echo', description: 'Echoes text back.', inputSchema: z.strictObject({ text: z.string() }),",
        '    execute: (args) => ({ echoed: args.text }) }],',
        '};',
        '',
      ].join('\n'),
    );
    const work = tempDir('conch-mcp-cache-work-');
    writeFileSync(join(work, 'conch.config.json'), JSON.stringify({ plugins: { 'packed-echo': {} } }));
    const cache = tempDir('conch-mcp-compile-cache-');
    const cacheFiles = () =>
      readdirSync(cache).filter((f) => f.startsWith('main.cjs-') && f.endsWith('.v8cache'));
    const serve = async (text: string) => {
      const { transport, client, stderr } = packedClient(work, { CONCH_COMPILE_CACHE: cache });
      try {
        await client.connect(transport);
        const echoed = (await client.callTool({
          name: 'packed_echo',
          arguments: { text },
        })) as CallToolResult;
        expect(echoed.isError, stderr()).toBeFalsy();
        expect(echoed.structuredContent).toMatchObject({ echoed: text });
      } finally {
        const pid = transport.pid;
        await client.close();
        if (pid) await waitFor(() => !isAlive(pid), { what: `conch-mcp ${pid} to exit`, timeoutMs: 30_000 });
      }
      expect(stderr()).not.toMatch(/ExperimentalWarning|PluginLoadError|load-failed/);
    };
    try {
      // First start: compiled from source, the cache written as the server exits.
      await serve('from source');
      expect(cacheFiles()).toHaveLength(1);
      const made = statSync(join(cache, cacheFiles()[0]!));
      // Second start: from the cache (a refused cache would be rewritten: a new file), and the
      // plugin is still imported.
      await serve('from the cache');
      expect(cacheFiles()).toHaveLength(1);
      const after = statSync(join(cache, cacheFiles()[0]!));
      expect({ ino: after.ino, mtimeMs: after.mtimeMs }).toEqual({ ino: made.ino, mtimeMs: made.mtimeMs });
    } finally {
      rmSync(pluginDir, { recursive: true, force: true });
      rmSync(work, { recursive: true, force: true });
      rmSync(cache, { recursive: true, force: true });
    }
  });

  test('serves initialize, tools/list and real tool calls over stdio, then leaves nothing running', async () => {
    const work = tempDir('conch-mcp-work-');
    writeFileSync(
      join(work, 'conch.config.json'),
      JSON.stringify({ plugins: { permission: {}, cli: {}, background: {}, terminal: {}, files: {} } }),
    );
    writeFileSync(join(work, 'notes.md'), 'first\nsecond\n');
    const { transport, client, stderr, questions } = packedClient(work);
    try {
      await client.connect(transport);
      expect(client.getServerVersion()).toMatchObject({ name: 'conch', version });

      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toEqual(
        expect.arrayContaining([
          'cli_based_tool',
          'check_background_task',
          'list_background_tasks',
          'read_background_output',
          'cancel_background_task',
          'terminal',
          'read_file',
          'write_file',
          'edit_file',
        ]),
      );

      // The files plugin is built in: its tools read the work dir without any discovery.
      const read = (await client.callTool({
        name: 'read_file',
        arguments: { path: 'notes.md', offset: 2 },
      })) as CallToolResult;
      expect(read.isError).toBeFalsy();
      expect(read.structuredContent).toMatchObject({ content: 'second\n', total_lines: 2 });

      // A pipeline: parsed by tree-sitter-bash's WASM, judged read-only, run by bash via the supervisor.
      const counted = (await client.callTool({
        name: 'cli_based_tool',
        arguments: { command: "printf 'one two three' | wc -w" },
      })) as CallToolResult;
      expect(counted.isError).toBeFalsy();
      expect(counted.structuredContent).toMatchObject({ returncode: 0, mode: 'shell' });
      expect(String((counted.structuredContent as { stdout: string }).stdout).trim()).toBe('3');

      // The supervisor that ran it is the bundle's own, beside the bundled code.
      const supervisorScript = realpathSync(join(appDir, 'node_modules/@conch/mcp/dist/supervisor-main.js'));
      const supervisors = descendantsRunning(transport.pid!, supervisorScript);
      expect(supervisors.length).toBeGreaterThan(0);

      const sudo = (await client.callTool({
        name: 'cli_based_tool',
        arguments: { command: 'sudo id' },
      })) as CallToolResult;
      expect(sudo).toMatchObject({ isError: true, structuredContent: { permission_denied: true } });

      // A question through elicitation: the client's answer is checked against the question's
      // schema by the bundle's Ajv validator (loaded at this first check, see scripts/bundle.mjs).
      const escalated = (await client.callTool({
        name: 'cli_based_tool',
        arguments: {
          command: 'touch outside-the-sandbox.txt',
          sandbox: false,
          justification: 'the packed test answers a question',
        },
      })) as CallToolResult;
      expect(escalated.isError).toBeFalsy();
      expect(questions).toHaveLength(1);
      expect(questions[0]).toContain('touch outside-the-sandbox.txt');
      expect(existsSync(join(work, 'outside-the-sandbox.txt'))).toBe(true);

      // A PTY session: node-pty's prebuilt binary loads from the installed dependencies.
      const term = (await client.callTool({
        name: 'terminal',
        arguments: { command: "printf '%s-%s\\n' pty ok" },
      })) as CallToolResult;
      expect(term.isError).toBeFalsy();
      expect(term.structuredContent).toMatchObject({
        exit_code: 0,
        output: expect.stringContaining('pty-ok'),
      });

      // The prebuilt posix_spawn addon loaded (a supervisor on node's spawn says so once, at warn).
      expect(stderr()).not.toMatch(
        /supervisor unavailable|PluginLoadError|duplicate-plugin|posix_spawn addon/,
      );
      await client.close();
      // stdin closed: the server disposes its registry, and its supervisors go with it.
      for (const pid of supervisors)
        await waitFor(() => !isAlive(pid), { what: `supervisor ${pid} to exit`, timeoutMs: 30_000 });
    } finally {
      await client.close();
      rmSync(work, { recursive: true, force: true });
    }
  });
});

/**
 * An MCP client of the installed conch-mcp bin, started in `work` with its conch.config.json (log
 * level warn; `env` added), and everything it wrote on stderr so far.
 */
function packedClient(work: string, env: Record<string, string> = {}) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(appDir, 'node_modules/@conch/mcp/dist/bin.cjs'), '--config', 'conch.config.json'],
    cwd: work,
    env: { ...cleanEnv, CONCH_LOG_LEVEL: 'warn', ...env },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // It answers "once" to every question (elicitation), and keeps each question's text.
  const questions: string[] = [];
  const client = new Client({ name: 'packed-test', version: '0.0.0' }, { capabilities: { elicitation: {} } });
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    questions.push(request.params.message);
    return { action: 'accept', content: { decision: 'once' } };
  });
  return { transport, client, stderr: () => stderr, questions };
}

/** Pids of the processes under `ancestor` (bubblewrap may stand between) whose command line runs `script`. */
function descendantsRunning(ancestor: number, script: string): number[] {
  const parents = new Map<number, number>();
  const running: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').includes(script))
        running.push(Number(entry));
    } catch {
      // exited while we looked
    }
  }
  const under = (pid: number): boolean => {
    for (let p = parents.get(pid); p !== undefined && p > 1; p = parents.get(p))
      if (p === ancestor) return true;
    return false;
  };
  return running.filter(under);
}
