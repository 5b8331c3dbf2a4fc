// conch-mcp with the real cli, background and permission plugins, driven by the SDK client over stdio: commands, background tasks, asks, denials, cancellation and exit leave nothing running.
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomInt } from 'node:crypto';
import { isAlive, processesMentioning, tempDir, waitFor } from '@conch/test-support';
import {
  CallToolResultSchema,
  type CallToolResult,
  type ElicitRequest,
} from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, test } from 'vitest';
import { GIT_HELPERS, type Harness, startServer } from './test-support/harness.js';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

type Structured = Record<string, any>;
const call = async (h: Harness, name: string, args: Record<string, unknown>) => {
  const result = (await h.client.callTool({ name, arguments: args })) as CallToolResult;
  return { result, data: result.structuredContent as Structured };
};

/** An elicitation handler that answers `decision` and remembers each question. */
function answering(decision: 'once' | 'always' | 'deny', questions: string[]) {
  return (request: ElicitRequest) => {
    questions.push(request.params.message);
    return { action: 'accept' as const, content: { decision } };
  };
}

/**
 * A long command and how to find its process from the host: commands run in the sandbox's own pid
 * namespace, so a pid they print is not the host's; a unique duration (`sleep 300.<n>`) is.
 */
function longCommand(): { command: string; pid: () => number | undefined } {
  const marker = `sleep 300.${randomInt(1e9)}`;
  return { command: `${marker} & wait`, pid: () => processesMentioning(marker)[0] };
}

/** Leaving the sandbox is what asks: the model says why (`sandbox: false` with a justification). */
const escalated = (command: string) => ({
  command,
  sandbox: false,
  justification: 'the test checks the question a human gets',
});

describe('conch-mcp with the default config (cli + background + permission)', () => {
  test('lists cli_based_tool and the background tools with schemas and hints', async () => {
    harness = await startServer({});
    const { tools } = await harness.client.listTools();
    const names = tools.map((t) => t.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'cli_based_tool',
        'check_background_task',
        'list_background_tasks',
        'read_background_output',
        'cancel_background_task',
      ]),
    );
    const cli = tools.find((t) => t.name === 'cli_based_tool')!;
    expect(cli.inputSchema).toMatchObject({ type: 'object', required: ['command'] });
    expect(cli.annotations).toMatchObject({ destructiveHint: true });
    expect(harness.client.getInstructions()).toContain('cli_based_tool');
  });

  test('runs a command and returns structured content plus text', async () => {
    harness = await startServer({});
    const { result, data } = await call(harness, 'cli_based_tool', { command: 'echo hello from conch' });
    expect(result.isError).toBeFalsy();
    expect(data).toMatchObject({ stdout: 'hello from conch\n', returncode: 0 });
    expect(JSON.parse((result.content[0] as { text: string }).text)).toEqual(data);
  });

  test('backgrounds a slow command and checks it to completion', async () => {
    harness = await startServer({});
    const { data: started } = await call(harness, 'cli_based_tool', {
      command: 'sleep 1 && echo background done',
      background: true,
    });
    expect(started).toMatchObject({
      status: expect.stringMatching(/running|queued/),
      background_task_id: expect.any(String),
    });
    const { data: checked } = await call(harness, 'check_background_task', {
      task_id: started.background_task_id,
      wait_seconds: 30,
    });
    expect(checked).toMatchObject({
      status: 'completed',
      result: { stdout: 'background done\n', returncode: 0 },
    });
  });

  test('an ask is answered through elicitation; "always" is remembered', async () => {
    const questions: string[] = [];
    harness = await startServer({ elicit: answering('always', questions) });
    // Inside the workspace nothing is asked: the sandbox holds the write.
    const { data: inside } = await call(harness, 'cli_based_tool', { command: 'touch inside.txt' });
    expect(inside).toMatchObject({ returncode: 0, sandbox: 'workspace-write' });
    expect(questions).toHaveLength(0);
    const { data } = await call(harness, 'cli_based_tool', escalated('touch made-by-ask.txt'));
    expect(data).toMatchObject({ returncode: 0 });
    expect(existsSync(join(harness.cwd, 'made-by-ask.txt'))).toBe(true);
    expect(questions).toHaveLength(1);
    expect(questions[0]).toContain('touch made-by-ask.txt');
    expect(questions[0]).toContain('the test checks the question a human gets');
    // What the command will reach outside the sandbox, from the gate: files, network, secrets, processes.
    expect(questions[0]).toMatch(
      /Outside the sandbox it will reach:\n {2}- writes anywhere[^\n]*\n {2}- the network[^\n]*\n {2}- your environment variables and secret files[^\n]*\n {2}- your other processes/,
    );
    await call(harness, 'cli_based_tool', escalated('touch made-by-ask.txt'));
    expect(questions).toHaveLength(1);
  });

  test('a human deny, a safety deny, and an ask without elicitation that names the rule to add', async () => {
    const questions: string[] = [];
    harness = await startServer({ elicit: answering('deny', questions) });
    const { result: humanDenied } = await call(harness, 'cli_based_tool', escalated('touch nope.txt'));
    expect(humanDenied).toMatchObject({ isError: true, structuredContent: { permission_denied: true } });
    expect(existsSync(join(harness.cwd, 'nope.txt'))).toBe(false);
    const { result: sudo } = await call(harness, 'cli_based_tool', { command: 'sudo ls' });
    expect(sudo).toMatchObject({ isError: true, structuredContent: { permission_denied: true } });
    // No allow rule lifts a safety denial: the advice says so and names the key that turns it off.
    const sudoAdvice = (sudo.content[1] as { text: string }).text;
    expect(sudoAdvice).toContain('no rules.allow entry overrides it');
    expect(sudoAdvice).toContain(join(harness.cwd, 'conch.config.json'));
    expect(sudoAdvice).toContain('"safety":{"privilegeEscalation":false}');
    expect(sudoAdvice).not.toContain('add that rule');
    expect(questions).toHaveLength(1);
    await harness.close();

    harness = await startServer({});
    const { result: asked } = await call(harness, 'cli_based_tool', escalated('touch nope.txt'));
    expect(asked).toMatchObject({
      isError: true,
      structuredContent: { permission_denied: true, suggestion: expect.stringContaining('rules.allow') },
    });
    expect((asked.content[1] as { text: string }).text).toContain(join(harness.cwd, 'conch.config.json'));
    expect(existsSync(join(harness.cwd, 'nope.txt'))).toBe(false);
  });

  test('rules from conch.config.json apply without asking', async () => {
    const cwd = tempDir();
    writeFileSync(
      join(cwd, 'conch.config.json'),
      JSON.stringify({
        plugins: { permission: { rules: { allow: ['touch allowed.txt'] } }, cli: {}, background: {} },
      }),
    );
    harness = await startServer({ cwd });
    const { data } = await call(harness, 'cli_based_tool', { command: 'touch allowed.txt' });
    expect(data).toMatchObject({ returncode: 0 });
    expect(existsSync(join(cwd, 'allowed.txt'))).toBe(true);
  });

  test('cancellation kills the command’s process tree', async () => {
    harness = await startServer({ elicit: answering('once', []) });
    const controller = new AbortController();
    const long = longCommand();
    const pending = harness.client.callTool(
      { name: 'cli_based_tool', arguments: { command: long.command, background: false } },
      CallToolResultSchema,
      { signal: controller.signal },
    );
    const pid = await waitFor(long.pid, {
      what: 'the command to start',
      timeoutMs: 30_000,
    });
    expect(isAlive(pid)).toBe(true);
    controller.abort('user pressed stop');
    await expect(pending).rejects.toThrow();
    await waitFor(() => !isAlive(pid), { what: 'the cancelled sleep to die', timeoutMs: 30_000 });
  });

  test.each(['stdin', 'SIGTERM'] as const)(
    'server exit on %s leaves no child (foreground and background)',
    async (how) => {
      harness = await startServer({ elicit: answering('once', []) });
      const { serverPid } = harness;
      const long = longCommand();
      const background = longCommand();
      const { data: bg } = await call(harness, 'cli_based_tool', {
        command: background.command,
        background: true,
      });
      expect(bg.background_task_id).toEqual(expect.any(String));
      const fg = harness.client
        .callTool({ name: 'cli_based_tool', arguments: { command: long.command, background: false } })
        .catch((error: unknown) => error);
      const fgPid = await waitFor(long.pid, {
        what: 'the foreground command',
        timeoutMs: 30_000,
      });
      const bgPid = await waitFor(background.pid, {
        what: 'the background command',
        timeoutMs: 30_000,
      });
      if (how === 'stdin') harness.transport['_process']?.stdin?.end();
      else process.kill(serverPid, how);
      await waitFor(() => !isAlive(serverPid), { what: 'the server to exit', timeoutMs: 30_000 });
      await waitFor(() => !isAlive(fgPid) && !isAlive(bgPid), {
        what: 'every child to be gone',
        timeoutMs: 10_000,
      });
      await harness.close();
      harness = undefined;
      await fg;
    },
  );

  test('a template-only plugin package (git-helpers) is served like any plugin', async () => {
    const cwd = tempDir();
    execFileSync('git', ['init', '-q', '-b', 'main'], { cwd });
    writeFileSync(join(cwd, 'new.txt'), 'x');
    harness = await startServer({
      cwd,
      config: {
        pluginDirs: [GIT_HELPERS],
        plugins: { permission: { parseTimeoutMs: 5000 }, cli: {}, background: {}, 'git-helpers': {} },
      },
    });
    const { tools } = await harness.client.listTools();
    expect(tools.find((t) => t.name === 'git_status_summary')?.annotations).toMatchObject({
      readOnlyHint: true,
    });
    const { result, data } = await call(harness, 'git_status_summary', {});
    expect(result.isError).toBeFalsy();
    expect(data).toMatchObject({
      returncode: 0,
      stdout:
        'staged: 0, modified: 0, untracked: 2\n## No commits yet on main\n?? new.txt\n?? test.config.json\n',
    });
  });
});
