// conch-mcp over real stdio exposes registry tools as MCP tools: schemas, results, errors, progress, asks, cancel, exit.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { isAlive, readPid, waitFor } from '@conch/test-support';
import { CallToolResultSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, test } from 'vitest';
import { FIXTURE_PLUGINS, type Harness, startServer, WORD_COUNT } from './test-support/harness.js';

const config = {
  pluginDirs: [FIXTURE_PLUGINS, WORD_COUNT],
  plugins: { 'fixture-gate': {}, fixture: {}, 'word-count': {} },
};

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe('conch-mcp with fixture plugins', () => {
  test('lists each exposed tool with its JSON Schema and annotations', async () => {
    harness = await startServer({ config });
    const { tools } = await harness.client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    expect(Object.keys(byName).sort()).toEqual(['explode', 'guarded_echo', 'slow_steps', 'word_count']);
    expect(byName.word_count?.inputSchema).toMatchObject({
      type: 'object',
      properties: { text: { type: 'string' }, path: { type: 'string' } },
    });
    expect(byName.word_count?.annotations).toMatchObject({ readOnlyHint: true });
    expect(byName.guarded_echo?.annotations).toMatchObject({ destructiveHint: true });
    expect(harness.client.getInstructions()).toContain('word_count');
  });

  test('returns structured content plus text; failures are isError results', async () => {
    harness = await startServer({ config });
    const ok = (await harness.client.callTool({
      name: 'word_count',
      arguments: { text: 'a b c' },
    })) as CallToolResult;
    expect(ok.isError).toBeFalsy();
    expect(ok.structuredContent).toEqual({
      lines: 1,
      words: 3,
      chars: 5,
      bytes: 5,
      display: '✓ 1 line, 3 words',
    });
    expect(JSON.parse((ok.content[0] as { text: string }).text)).toEqual(ok.structuredContent);

    const bad = (await harness.client.callTool({ name: 'word_count', arguments: {} })) as CallToolResult;
    expect(bad.isError).toBe(true);
    expect(bad.structuredContent).toMatchObject({ error_code: 'INVALID_ARGUMENTS' });
    expect((bad.content[0] as { text: string }).text).toMatch(/exactly one of `text` or `path`/);

    const thrown = (await harness.client.callTool({ name: 'explode', arguments: {} })) as CallToolResult;
    expect(thrown).toMatchObject({
      isError: true,
      structuredContent: {
        error: "Tool 'explode' failed: boom",
        error_code: 'TOOL_FAILED',
        display: "✗ TOOL_FAILED: Tool 'explode' failed: boom",
      },
    });

    await expect(harness.client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.toThrow(
      /no_such_tool/,
    );
  });

  test('relays tool progress as MCP progress notifications', async () => {
    harness = await startServer({ config });
    const seen: { progress: number; total?: number; message?: string }[] = [];
    const result = await harness.client.callTool(
      { name: 'slow_steps', arguments: { steps: 4, interval: 0.3 } },
      CallToolResultSchema,
      { onprogress: (p) => seen.push(p) },
    );
    expect(result.structuredContent).toMatchObject({
      stdout: 'step 1\nstep 2\nstep 3\nstep 4\n',
      returncode: 0,
    });
    // The SDK client runs notification handlers in a microtask but responses at once, so a progress
    // notification read in the same chunk as the response is dropped: the last ones may be missing.
    expect(seen.length).toBeGreaterThanOrEqual(1);
    seen.forEach((p, i) => expect(p).toEqual({ progress: i + 1, total: 4, message: `step ${i + 1}` }));
  });

  test('an ask is answered through elicitation', async () => {
    const questions: string[] = [];
    harness = await startServer({
      config,
      elicit: (request) => {
        questions.push(request.params.message);
        return { action: 'accept', content: { decision: 'once' } };
      },
    });
    const allowed = (await harness.client.callTool({
      name: 'guarded_echo',
      arguments: { text: 'risky thing' },
    })) as CallToolResult;
    expect(allowed.structuredContent).toEqual({ stdout: 'risky thing\n', returncode: 0, display: '✓' });
    expect(questions).toHaveLength(1);
    expect(questions[0]).toContain('echo risky thing');
  });

  test('a declined elicitation denies the call', async () => {
    harness = await startServer({ config, elicit: () => ({ action: 'decline' }) });
    const denied = (await harness.client.callTool({
      name: 'guarded_echo',
      arguments: { text: 'risky thing' },
    })) as CallToolResult;
    expect(denied).toMatchObject({ isError: true, structuredContent: { permission_denied: true } });
  });

  test('without elicitation an ask is denied with the rule to add and where', async () => {
    harness = await startServer({ config });
    const denied = (await harness.client.callTool({
      name: 'guarded_echo',
      arguments: { text: 'risky thing' },
    })) as CallToolResult;
    expect(denied).toMatchObject({
      isError: true,
      structuredContent: { permission_denied: true, suggestion: 'add "echo risky thing" to rules.allow' },
    });
    const hint = (denied.content[1] as { text: string }).text;
    expect(hint).toContain(join(harness.cwd, 'test.config.json'));
    const forbidden = (await harness.client.callTool({
      name: 'guarded_echo',
      arguments: { text: 'forbidden' },
    })) as CallToolResult;
    expect(forbidden).toMatchObject({ isError: true, structuredContent: { rule: 'fixture:forbidden' } });
  });

  test('cancellation aborts the call and kills its process', async () => {
    harness = await startServer({ config });
    const pidFile = join(harness.cwd, 'pid');
    const controller = new AbortController();
    const call = harness.client.callTool(
      { name: 'slow_steps', arguments: { steps: 600, interval: 0.5, pid_file: pidFile } },
      CallToolResultSchema,
      { signal: controller.signal },
    );
    const pid = await waitFor(() => readPid(pidFile), {
      what: 'the tool process to start',
      timeoutMs: 30_000,
    });
    expect(isAlive(pid)).toBe(true);
    controller.abort('test cancels');
    await expect(call).rejects.toThrow();
    await waitFor(() => !isAlive(pid), { what: 'the cancelled process to die', timeoutMs: 30_000 });
    // the server is still serving
    const after = (await harness.client.callTool({
      name: 'word_count',
      arguments: { text: 'x' },
    })) as CallToolResult;
    expect(after.structuredContent).toMatchObject({ words: 1 });
  });

  test.each(['stdin', 'SIGTERM', 'SIGINT'] as const)('server exit on %s leaves no child', async (how) => {
    harness = await startServer({ config });
    const { serverPid } = harness;
    const pidFile = join(harness.cwd, 'pid');
    const call = harness.client
      .callTool({ name: 'slow_steps', arguments: { steps: 600, interval: 0.5, pid_file: pidFile } })
      .catch((error: unknown) => error);
    const pid = await waitFor(() => readPid(pidFile), {
      what: 'the tool process to start',
      timeoutMs: 30_000,
    });
    if (how === 'stdin') harness.transport['_process']?.stdin?.end();
    else process.kill(serverPid, how);
    await waitFor(() => !isAlive(serverPid), { what: 'the server to exit', timeoutMs: 30_000 });
    expect(isAlive(pid)).toBe(false);
    expect(existsSync(pidFile)).toBe(true);
    await harness.close();
    harness = undefined;
    await call;
  });

  test('--help and a bad argument', async () => {
    const { execFileSync, spawnSync } = await import('node:child_process');
    const { BIN } = await import('./test-support/harness.js');
    expect(execFileSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' })).toContain('--config');
    const bad = spawnSync(process.execPath, [BIN, '--nope'], { encoding: 'utf8' });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('unknown argument "--nope"');
    const { writeFileSync } = await import('node:fs');
    const { tempDir } = await import('@conch/test-support');
    const cwd = tempDir();
    writeFileSync(join(cwd, 'bad.json'), JSON.stringify({ plugins: { nope: {} }, extra: 1 }));
    const invalid = spawnSync(process.execPath, [BIN, '--config', 'bad.json'], { cwd, encoding: 'utf8' });
    expect(invalid.status).toBe(1);
    expect(invalid.stderr).toContain('extra');
    writeFileSync(join(cwd, 'bad.json'), JSON.stringify({ plugins: { nope: {} } }));
    const unknown = spawnSync(process.execPath, [BIN, '--config', 'bad.json'], { cwd, encoding: 'utf8' });
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toMatch(/nope/);
    const missing = spawnSync(process.execPath, [BIN, '--config', 'missing.json'], { cwd, encoding: 'utf8' });
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain(join(cwd, 'missing.json'));
  });
});
