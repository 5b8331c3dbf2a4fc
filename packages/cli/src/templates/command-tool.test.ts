// Template tools run through the registry like cli_based_tool: args stay data, the gate sees the steps, env secrets stay out of logs and events, slow steps background, aborts kill.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { backgroundPlugin } from '@conch/background';
import { type PermissionRequest, PluginRegistry, TOKENS, type ToolResult } from '@conch/core';
import { findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { waitFor } from '@conch/test-support';
import { pino } from 'pino';
import { z } from 'zod';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { cliPlugin } from '../plugin.js';
import {
  defineCommandTool,
  definePluginFromTemplates,
  InvalidTemplateError,
  pluginFromUtcpManual,
  templatesFromUtcpManual,
} from './index.js';

type Result = ToolResult & Record<string, any>;

let dir: string;
let marker: string;
const registries: PluginRegistry[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-tpl-'));
  marker = join(dir, 'pwned');
});
afterEach(async () => {
  for (const registry of registries.splice(0)) {
    const prefix = registry.resolve<ProcessManager>(TOKENS.ProcessManager).cookiePrefix;
    await registry.dispose();
    expect(findCookiePids({ prefix }).filter((pid) => pidAlive(pid))).toEqual([]);
  }
  rmSync(dir, { recursive: true, force: true });
});

/** The per-call directories templates keep step outputs in, still present. */
function templateDirs(registry: PluginRegistry): string[] {
  return readdirSync(registry.tempDir()).filter((name) => name.startsWith('template-'));
}

/** A registry with cli + background, a gate that records what it is asked and allows, and a log sink. */
function setup(plugin: ReturnType<typeof definePluginFromTemplates>, config: Record<string, unknown> = {}) {
  let logs = '';
  const logger = pino(
    { level: 'trace' },
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        logs += chunk.toString();
        cb();
      },
    }),
  );
  const registry = new PluginRegistry({ cwd: dir, logger, plugins: [cliPlugin, backgroundPlugin, plugin] });
  const asked: PermissionRequest[] = [];
  registry.container.register(TOKENS.PermissionGate, {
    useValue: {
      check: (request: PermissionRequest) => {
        asked.push(request);
        return Promise.resolve({ outcome: 'allow' as const, reason: 'test' });
      },
    },
  });
  registry.exposeSync('cli', {});
  registry.exposeSync(plugin.name, config);
  registries.push(registry);
  const events: string[] = [];
  for (const name of [
    'tool.call',
    'tool.permission',
    'tool.result',
    'process.started',
    'process.output',
  ] as const) {
    registry.events.on(name, (payload) => events.push(JSON.stringify(payload)));
  }
  const run = async (tool: string, args: Record<string, unknown>, opts: { signal?: AbortSignal } = {}) =>
    (await registry.execute(tool, args, opts)) as Result;
  return { registry, run, asked, logs: () => logs, events };
}

const ATTACKS = () => [
  `x; touch ${marker}`,
  `$(touch ${marker})`,
  `\`touch ${marker}\``,
  `line one\ntouch ${marker}`,
  `'; touch ${marker}; echo '`,
  `"; touch ${marker}; echo "`,
];

describe('arguments are data', () => {
  test('injection attempts reach the command literally and the marker file is never created', async () => {
    const plugin = definePluginFromTemplates({
      name: 'echoes',
      version: '0.0.0',
      tools: [
        {
          name: 'echo_arg',
          description: 'prints its argument',
          inputSchema: z.strictObject({ text: z.string() }),
          commands: [{ command: "printf '<%s>\\n' UTCP_ARG_text_UTCP_END" }],
        },
        {
          name: 'echo_two_steps',
          description: 'prints its argument in step 2, quoted, after a cd',
          inputSchema: z.strictObject({ text: z.string() }),
          commands: [{ command: 'cd .' }, { command: 'echo "[UTCP_ARG_text_UTCP_END]"' }],
        },
      ],
    });
    const { run, asked } = setup(plugin);
    for (const text of ATTACKS()) {
      const one = await run('echo_arg', { text });
      expect(one).toMatchObject({ returncode: 0, stdout: `<${text}>\n` });
      const two = await run('echo_two_steps', { text });
      expect(two).toMatchObject({ returncode: 0, stdout: `[${text}]\n` });
      expect(existsSync(marker)).toBe(false);
    }
    // the gate saw the steps with the argument as a quoted literal, never the placeholder or the env reference
    const first = asked[0] as Extract<PermissionRequest, { kind: 'command' }>;
    expect(first).toMatchObject({ kind: 'command', tool: 'echo_arg', cwd: dir });
    expect(first.command).toBe(`printf '<%s>\\n' 'x; touch ${marker}'`);
    // and running what the gate saw does the same thing: parser and shell agree
    expect(execFileSync('/bin/sh', ['-c', first.command], { encoding: 'utf8' })).toBe(
      `<x; touch ${marker}>\n`,
    );
    expect(existsSync(marker)).toBe(false);
  });
});

describe('steps, outputs, env and working dir', () => {
  test('cd carries over, $CMD_<i>_OUTPUT, append_to_final_output, working_dir', async () => {
    mkdirSync(join(dir, 'work', 'inner'), { recursive: true });
    writeFileSync(join(dir, 'work', 'inner', 'file.txt'), 'hello\n');
    const plugin = definePluginFromTemplates({
      name: 'steps',
      version: '0.0.0',
      tools: [
        {
          name: 'steps',
          description: 'cd, read, report',
          inputSchema: z.strictObject({ sub: z.string() }),
          working_dir: 'work',
          commands: [
            { command: 'cd UTCP_ARG_sub_UTCP_END' },
            { command: 'cat file.txt', append_to_final_output: true },
            { command: 'echo "dir=$(basename "$PWD") got=$CMD_1_OUTPUT"' },
          ],
        },
      ],
    });
    const { run, registry } = setup(plugin);
    expect(await run('steps', { sub: 'inner' })).toMatchObject({
      returncode: 0,
      stdout: 'hello\ndir=inner got=hello\n',
    });
    const failed = await run('steps', { sub: 'missing dir' });
    expect(failed.returncode).not.toBe(0);
    expect(failed.stderr).toMatch(/missing dir/);
    expect(failed.stdout).toBe('');
    expect(templateDirs(registry)).toEqual([]);
  });

  test('env_vars take host variables from plugin config; secrets never reach logs or events', async () => {
    const secret = 'sk-SECRET-9f8e7d';
    const plugin = definePluginFromTemplates({
      name: 'envy',
      version: '0.0.0',
      tools: [
        {
          name: 'show_env',
          description: 'proves the key is set without printing it',
          inputSchema: z.strictObject({ who: z.string() }),
          env_vars: { API_KEY: '${API_KEY}', GREETING: 'hi UTCP_ARG_who_UTCP_END', PLAIN: 'static' },
          commands: [{ command: 'echo "len=${#API_KEY} greeting=$GREETING plain=$PLAIN"' }],
        },
      ],
    });
    const { run, logs, events } = setup(plugin, { variables: { API_KEY: secret } });
    expect(await run('show_env', { who: 'you; rm -rf /' })).toMatchObject({
      returncode: 0,
      stdout: `len=${secret.length} greeting=hi you; rm -rf / plain=static\n`,
    });
    expect(logs()).not.toContain(secret);
    expect(events.join('\n')).not.toContain(secret);
  });

  test('a host variable the host did not supply is an error naming it', async () => {
    const plugin = definePluginFromTemplates({
      name: 'needs-key',
      version: '0.0.0',
      tools: [
        {
          name: 'needs_key',
          description: 'needs a key',
          inputSchema: z.strictObject({}),
          env_vars: { TOKEN: 'Bearer ${MISSING_TOKEN}' },
          commands: [{ command: 'echo never' }],
        },
      ],
    });
    const { run } = setup(plugin);
    const result = await run('needs_key', {});
    expect(result.error).toBe(
      'env_vars.TOKEN uses ${MISSING_TOKEN}, which the host did not supply: add MISSING_TOKEN to plugins.needs-key.variables (or name it in variablesFromEnv)',
    );
  });

  test('variablesFromEnv takes only the named host environment variables', async () => {
    process.env.CONCH_TEMPLATE_TEST_TOKEN = 'from-the-host-env';
    process.env.CONCH_TEMPLATE_TEST_OTHER = 'not-named';
    try {
      const plugin = definePluginFromTemplates({
        name: 'from-env',
        version: '0.0.0',
        tools: [
          {
            name: 'from_env',
            description: 'uses a host env var',
            inputSchema: z.strictObject({}),
            env_vars: { T: '${CONCH_TEMPLATE_TEST_TOKEN}', O: '${CONCH_TEMPLATE_TEST_OTHER}' },
            commands: [{ command: 'echo "$T"' }],
          },
        ],
      });
      const { run } = setup(plugin, { variablesFromEnv: ['CONCH_TEMPLATE_TEST_TOKEN'] });
      expect((await run('from_env', {})).error).toMatch(/env_vars\.O uses \$\{CONCH_TEMPLATE_TEST_OTHER\}/);
      const { run: run2 } = setup(
        { ...plugin, name: 'from-env-2' },
        { variablesFromEnv: ['CONCH_TEMPLATE_TEST_TOKEN', 'CONCH_TEMPLATE_TEST_OTHER'] },
      );
      expect(await run2('from_env', {})).toMatchObject({ stdout: 'from-the-host-env\n', returncode: 0 });
    } finally {
      delete process.env.CONCH_TEMPLATE_TEST_TOKEN;
      delete process.env.CONCH_TEMPLATE_TEST_OTHER;
    }
  });
});

describe('same process layer as cli_based_tool', () => {
  test('a slow step becomes a background task whose result is complete', async () => {
    const plugin = definePluginFromTemplates({
      name: 'slow',
      version: '0.0.0',
      tools: [
        {
          name: 'slow_build',
          description: 'takes a while',
          inputSchema: z.strictObject({ label: z.string() }),
          commands: [
            { command: 'echo starting UTCP_ARG_label_UTCP_END', append_to_final_output: true },
            { command: 'sleep 3; echo "done after $CMD_0_OUTPUT"' },
          ],
        },
      ],
    });
    const { run, registry } = setup(plugin, { cli: { autoBackgroundThreshold: 1 } });
    const started = await run('slow_build', { label: 'x; touch pwned' });
    expect(started).toMatchObject({ status: 'running', background_task_id: expect.any(String) });
    expect(templateDirs(registry)).toHaveLength(1);
    const checked = await run('check_background_task', {
      task_id: started.background_task_id,
      wait_seconds: 30,
    });
    expect(checked).toMatchObject({ status: 'completed' });
    expect(checked.result.stdout).toBe('starting x; touch pwned\ndone after starting x; touch pwned\n');
    await waitFor(() => templateDirs(registry).length === 0, {
      what: 'the task to remove its directory',
      timeoutMs: 30_000,
    });
    expect(existsSync(join(dir, 'pwned'))).toBe(false);
  });

  test('aborting a call kills its script and the step it runs', async () => {
    const plugin = definePluginFromTemplates({
      name: 'sleepy',
      version: '0.0.0',
      tools: [
        {
          name: 'sleepy',
          description: 'sleeps',
          inputSchema: z.strictObject({ pidfile: z.string() }),
          commands: [
            { command: 'echo prep' },
            { command: 'sleep 60 & echo $! > UTCP_ARG_pidfile_UTCP_END; wait' },
          ],
        },
      ],
    });
    const { run } = setup(plugin, { cli: { autoBackgroundThreshold: 120 } });
    const pidfile = join(dir, 'sleep.pid');
    const controller = new AbortController();
    const call = run('sleepy', { pidfile }, { signal: controller.signal });
    await waitFor(() => existsSync(pidfile) && readFileSync(pidfile, 'utf8').trim() !== '', {
      what: 'the step to start',
      timeoutMs: 30_000,
    });
    const pid = Number(readFileSync(pidfile, 'utf8'));
    controller.abort();
    await expect(call).rejects.toThrow(/abort/i);
    await waitFor(() => !pidAlive(pid), { what: 'the sleep to die', timeoutMs: 30_000 });
  });

  test('an aborted call: its whole tree is gone when the call rejects, SIGTERM ignored or not', async () => {
    const plugin = definePluginFromTemplates({
      name: 'deaf',
      version: '0.0.0',
      tools: [
        {
          name: 'deaf',
          description: 'sleeps, deaf to SIGTERM',
          inputSchema: z.strictObject({ pidfile: z.string() }),
          commands: [
            { command: 'trap "" TERM; sh -c \'sleep 300 & echo $$ $!; wait\' > UTCP_ARG_pidfile_UTCP_END' },
          ],
        },
      ],
    });
    const { run } = setup(plugin, { cli: { autoBackgroundThreshold: 120 } });
    const pidfile = join(dir, 'tree.pid');
    const controller = new AbortController();
    const call = run('deaf', { pidfile }, { signal: controller.signal });
    await waitFor(() => existsSync(pidfile) && readFileSync(pidfile, 'utf8').includes('\n'), {
      what: 'the step to start',
      timeoutMs: 30_000,
    });
    const pids = readFileSync(pidfile, 'utf8').trim().split(/\s+/).map(Number);
    expect(pids.filter((pid) => pidAlive(pid))).toHaveLength(2);
    controller.abort();
    await expect(call).rejects.toThrow(/abort/i);
    expect(pids.filter((pid) => pidAlive(pid))).toEqual([]);
  });
  test('an aborted call: an escapee that execs in a loop (so is often caught mid-exec) is gone too', async () => {
    // Inside an exec, a process's environ (the call's mark) reads empty for a moment.
    const loop = join(dir, 'exec-loop.sh');
    writeFileSync(loop, '#!/bin/sh\nexec /bin/sh "$0"\n', { mode: 0o755 });
    const plugin = definePluginFromTemplates({
      name: 'looper',
      version: '0.0.0',
      tools: [
        {
          name: 'looper',
          description: 'starts an escapee that execs for ever',
          inputSchema: z.strictObject({ loop: z.string(), pidfile: z.string() }),
          commands: [
            {
              command: 'setsid UTCP_ARG_loop_UTCP_END & echo $! > UTCP_ARG_pidfile_UTCP_END; sleep 300',
            },
          ],
        },
      ],
    });
    const { run } = setup(plugin, { cli: { autoBackgroundThreshold: 120 } });
    for (let round = 0; round < 8; round++) {
      const pidfile = join(dir, `loop-${round}.pid`);
      const controller = new AbortController();
      const call = run('looper', { loop, pidfile }, { signal: controller.signal });
      await waitFor(() => existsSync(pidfile) && readFileSync(pidfile, 'utf8').includes('\n'), {
        what: 'the step to start',
        timeoutMs: 30_000,
      });
      const pid = Number(readFileSync(pidfile, 'utf8'));
      try {
        expect(pidAlive(pid)).toBe(true);
        controller.abort();
        await expect(call).rejects.toThrow(/abort/i);
        expect(pidAlive(pid), `round ${round}: pid ${pid}`).toBe(false);
      } finally {
        // A loop left behind would spin for ever and slow every later test (it keeps its pid).
        if (pidAlive(pid)) process.kill(pid, 'SIGKILL');
      }
    }
  });
});

describe('UTCP manuals load unchanged', () => {
  // The call templates are the UTCP cli_call_template documentation examples, verbatim.
  const manual = {
    manual_version: '1.0.0',
    utcp_version: '1.0.1',
    info: { title: 'UTCP docs examples', version: '1.0.0' },
    tools: [
      {
        name: 'cross_platform_dir_tool',
        description: 'List a directory',
        inputs: { type: 'object', properties: { target_dir: { type: 'string' } }, required: ['target_dir'] },
        tool_call_template: {
          name: 'cross_platform_dir_tool',
          call_template_type: 'cli',
          commands: [
            { command: 'cd UTCP_ARG_target_dir_UTCP_END', append_to_final_output: false },
            { command: 'ls -la', append_to_final_output: true },
          ],
        },
      },
      {
        name: 'reference_previous_output_tool',
        description: 'Report git changes',
        inputs: { type: 'object', properties: {} },
        tool_call_template: {
          name: 'reference_previous_output_tool',
          call_template_type: 'cli',
          commands: [
            { command: 'git status --porcelain', append_to_final_output: false },
            { command: 'echo "Found changes: $CMD_0_OUTPUT"', append_to_final_output: true },
          ],
        },
      },
      {
        name: 'weather',
        description: 'an http tool conch does not run',
        inputs: { type: 'object', properties: {} },
        tool_call_template: {
          call_template_type: 'http',
          url: 'https://example.invalid',
          http_method: 'GET',
        },
      },
    ],
  };

  test('cli tools become tools with their input schemas; non-cli tools are refused or skipped', async () => {
    expect(() => templatesFromUtcpManual(manual)).toThrow(
      /tools\.2\.tool_call_template\.call_template_type: 'cli'.*received "http"/,
    );
    const plugin = pluginFromUtcpManual(manual, { skipUnsupported: true });
    expect(plugin).toMatchObject({ name: 'utcp-docs-examples', version: '1.0.0' });
    mkdirSync(join(dir, 'some dir'));
    writeFileSync(join(dir, 'some dir', 'inside.txt'), '');
    execFileSync('git', ['init', '-q'], { cwd: dir });
    const { registry, run } = setup(plugin);
    expect(registry.tools().find((t) => t.name === 'cross_platform_dir_tool')?.inputSchema).toMatchObject({
      type: 'object',
      properties: { target_dir: { type: 'string' } },
      required: ['target_dir'],
    });
    const listing = await run('cross_platform_dir_tool', { target_dir: 'some dir' });
    expect(listing).toMatchObject({ returncode: 0 });
    expect(listing.stdout).toContain('inside.txt');
    await expect(run('cross_platform_dir_tool', {})).rejects.toThrow(/target_dir/);
    const changes = await run('reference_previous_output_tool', {});
    expect(changes).toMatchObject({ returncode: 0, stdout: 'Found changes: ?? "some dir/"\n' });
  });

  test('bad manuals and templates name the field', () => {
    expect(() =>
      templatesFromUtcpManual({ tools: [{ name: 'x', tool_call_template: { call_template_type: 'cli' } }] }),
    ).toThrow(InvalidTemplateError);
    expect(() =>
      templatesFromUtcpManual({ tools: [{ name: 'x', tool_call_template: { call_template_type: 'cli' } }] }),
    ).toThrow(/tools\.0\.tool_call_template\.commands/);
    expect(() => templatesFromUtcpManual({ nope: true })).toThrow(/tools/);
    expect(() =>
      defineCommandTool({
        name: 'bad name!',
        description: '',
        inputSchema: z.object({}),
        commands: [{ command: 'true' }],
      }),
    ).toThrow(/name: a tool name matching/);
    expect(() =>
      defineCommandTool({ name: 'x', description: '', inputSchema: z.object({}), commands: [] }),
    ).toThrow(/commands: at least one command step/);
    expect(() =>
      defineCommandTool({
        name: 'x',
        description: '',
        inputSchema: { type: 'object', properties: { a: { type: 'string' } } },
        commands: [{ command: 'echo UTCP_ARG_b_UTCP_END' }],
      }),
    ).toThrow(
      /commands\.0\.command: placeholders naming an input property \(a\); received UTCP_ARG_b_UTCP_END/,
    );
    expect(() =>
      defineCommandTool({
        name: 'x',
        description: '',
        inputSchema: { type: 'string' },
        commands: [{ command: 'true' }],
      }),
    ).toThrow(/inputSchema/);
  });
});
