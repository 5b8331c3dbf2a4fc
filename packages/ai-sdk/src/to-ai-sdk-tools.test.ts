// Invariant: on every supported `ai` major (7, 6, 5: one vitest project each), a registry's tools run through the AI SDK for real: a result reaches the next model call as the SDK's `json` output, a failed call is a thrown ConchToolCallError the SDK sends as `error-text` with every conch field, aborts kill the tool's process, per-call approve is used.
import 'reflect-metadata';
import { spawn } from 'node:child_process';
import {
  definePlugin,
  defineTool,
  PluginRegistry,
  TOKENS,
  type PermissionGate,
  type ApprovalRequest,
} from '@conch/core';
import { isAlive, waitFor } from '@conch/test-support';
import { generateText, stepCountIs, streamText } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConchToolCallError, isConchToolError, toAiSdkTools } from './index.js';
import { scriptedModel, spec, toolResults } from './test-support/scripted-model.js';

const started: number[] = [];

const testPlugin = definePlugin({
  name: 'test-tools',
  version: '0.0.0',
  configSchema: z.object({}),
  register(ctx) {
    // A real gate: everything asks the caller's approver (or denies without one).
    const gate: PermissionGate = {
      async check(request, options) {
        if (!options.approve) return { outcome: 'deny', reason: 'no approver' };
        const answer = await options.approve(
          {
            tool: request.tool,
            display: 'kind' in request ? JSON.stringify(request) : '',
            request,
            reason: 'test',
          },
          { signal: options.signal },
        );
        return answer === 'deny'
          ? { outcome: 'deny', reason: 'the user said no', askedHuman: true }
          : { outcome: 'allow', reason: 'approved', askedHuman: true };
      },
    };
    ctx.container.register(TOKENS.PermissionGate, { useValue: gate });
  },
  tools: [
    defineTool({
      name: 'echo',
      description: 'Runs echo for real and returns its stdout',
      inputSchema: z.strictObject({ text: z.string() }),
      execute: ({ text }) =>
        new Promise((resolve, reject) => {
          const child = spawn('echo', [text]);
          let out = '';
          child.stdout.on('data', (d: Buffer) => (out += d.toString()));
          child.on('error', reject);
          child.on('close', (code) => resolve({ stdout: out, returncode: code }));
        }),
    }),
    defineTool({
      name: 'sleep',
      description: 'Sleeps in a real process; killed on abort',
      inputSchema: z.strictObject({ seconds: z.number() }),
      execute: ({ seconds }, ctx) =>
        new Promise((resolve) => {
          const child = spawn('sleep', [String(seconds)]);
          if (child.pid) started.push(child.pid);
          const kill = () => child.kill('SIGKILL');
          ctx.signal.addEventListener('abort', kill, { once: true });
          child.on('close', (code, signal) => {
            ctx.signal.removeEventListener('abort', kill);
            resolve({ returncode: code, signal });
          });
        }),
    }),
    defineTool({
      name: 'guarded',
      description: 'Needs permission',
      inputSchema: z.strictObject({ command: z.string() }),
      permission: (args, ctx) => ({
        kind: 'command',
        tool: 'guarded',
        command: args.command,
        cwd: ctx.env.cwd,
      }),
      execute: ({ command }) => ({ ran: command }),
    }),
    defineTool({
      name: 'progress',
      description: 'Reports progress twice',
      inputSchema: z.strictObject({}),
      execute: (_args, ctx) => {
        ctx.reportProgress({ progress: 1, total: 2, message: 'half' });
        ctx.reportProgress({ progress: 2, total: 2 });
        return { ok: true };
      },
    }),
    defineTool({
      name: 'buggy',
      description: 'Throws a plain error',
      inputSchema: z.strictObject({}),
      execute: () => {
        throw new Error('plugin bug');
      },
    }),
    defineTool({
      name: 'spill',
      description: 'Fails the way a command whose output could not all be saved does',
      inputSchema: z.strictObject({}),
      execute: () => ({
        stdout: 'first bytes',
        returncode: 0,
        output_file: '/tmp/conch-output-1.txt',
        error: 'the disk filled up while the output was saved',
        error_code: 'OUTPUT_TRUNCATED_DISK_FULL',
      }),
    }),
  ],
});

let registry: PluginRegistry;

afterEach(async () => {
  await registry?.dispose();
});

async function makeRegistry(): Promise<PluginRegistry> {
  registry = new PluginRegistry({ plugins: [testPlugin] });
  registry.exposeSync('test-tools');
  return registry;
}

/** The error text the model read, parsed back: the failed call's whole result. */
function errorBody(part: { output: { type: string; value: unknown } }): Record<string, unknown> {
  expect(part.output.type).toBe('error-text');
  return JSON.parse(part.output.value as string) as Record<string, unknown>;
}

describe(`toAiSdkTools on ai ${process.env.AI_SDK_MAJOR}`, () => {
  it('runs against the intended ai major (its mock model speaks that major’s provider spec)', () => {
    const expected: Record<string, string> = { '5': 'v2', '6': 'v3', '7': 'v4' };
    expect(spec).toBe(expected[process.env.AI_SDK_MAJOR ?? '']);
  });

  it('gives the model every exposed tool with its JSON schema and description', async () => {
    const reg = await makeRegistry();
    const tools = toAiSdkTools(reg);
    expect(Object.keys(tools).sort()).toEqual(['buggy', 'echo', 'guarded', 'progress', 'sleep', 'spill']);
    const { model, tools: sent } = scriptedModel([{ text: 'hi' }]);
    await generateText({ model, tools, prompt: 'hi' });
    const echo = (sent[0] as { name: string }[]).find((t) => t.name === 'echo');
    expect(echo).toMatchObject({
      type: 'function',
      description: 'Runs echo for real and returns its stdout',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
    });
  });

  it('include/exclude pick tools, and an unknown name is a clear error', async () => {
    const reg = await makeRegistry();
    expect(Object.keys(toAiSdkTools(reg, { include: ['echo'] }))).toEqual(['echo']);
    expect(Object.keys(toAiSdkTools(reg, { exclude: ['echo', 'buggy', 'spill'] })).sort()).toEqual([
      'guarded',
      'progress',
      'sleep',
    ]);
    expect(() => toAiSdkTools(reg, { include: ['nope'] })).toThrow(/tool 'nope'.*exposed tools: buggy, echo/);
  });

  it('generateText: a real tool call, and the next model call receives its result as json', async () => {
    const reg = await makeRegistry();
    const callIds: string[] = [];
    reg.events.on('tool.result', (e) => callIds.push(e.callId));
    const { model, prompts } = scriptedModel([
      { calls: [{ id: 'call-1', name: 'echo', input: { text: 'hello conch' } }] },
      { text: 'it said hello' },
    ]);
    const result = await generateText({
      model,
      tools: toAiSdkTools(reg),
      prompt: 'say hi',
      stopWhen: stepCountIs(5),
    });
    expect(result.text).toBe('it said hello');
    const output = { stdout: 'hello conch\n', returncode: 0, display: '✓' };
    expect(result.steps[0]?.toolResults).toMatchObject([{ toolCallId: 'call-1', toolName: 'echo', output }]);
    expect(toolResults(prompts, 1)).toMatchObject([
      {
        type: 'tool-result',
        toolCallId: 'call-1',
        toolName: 'echo',
        output: { type: 'json', value: output },
      },
    ]);
    expect(callIds).toEqual(['call-1']);
  });

  it('streamText: a real tool call, and the next model call receives its result as json', async () => {
    const reg = await makeRegistry();
    const { model, prompts } = scriptedModel([
      { calls: [{ id: 'call-1', name: 'echo', input: { text: 'streamed' } }] },
      { text: 'done' },
    ]);
    const result = streamText({ model, tools: toAiSdkTools(reg), prompt: 'x', stopWhen: stepCountIs(5) });
    expect(await result.text).toBe('done');
    expect(toolResults(prompts, 1)).toMatchObject([
      {
        type: 'tool-result',
        toolCallId: 'call-1',
        output: { type: 'json', value: { stdout: 'streamed\n', returncode: 0, display: '✓' } },
      },
    ]);
  });

  it('generateText: bad arguments and plugin bugs are thrown errors the model reads as error results, and the loop goes on', async () => {
    const reg = await makeRegistry();
    const { model, prompts } = scriptedModel([
      {
        calls: [
          { id: 'bad', name: 'echo', input: { text: 42 } },
          { id: 'bug', name: 'buggy', input: {} },
        ],
      },
      { text: 'recovered' },
    ]);
    const result = await generateText({
      model,
      tools: toAiSdkTools(reg),
      prompt: 'x',
      stopWhen: stepCountIs(5),
    });
    expect(result.text).toBe('recovered');
    const first = result.steps[0]!;
    expect(first.toolResults).toEqual([]);
    const errors = first.content.filter((p) => p.type === 'tool-error');
    expect(errors.map((e) => e.toolCallId).sort()).toEqual(['bad', 'bug']);
    for (const e of errors) {
      expect(isConchToolError(e.error)).toBe(true);
      expect(e.error).toBeInstanceOf(ConchToolCallError);
    }
    const badError = errors.find((e) => e.toolCallId === 'bad')!.error as ConchToolCallError;
    expect(badError).toMatchObject({ code: 'INVALID_ARGUMENTS', toolName: 'echo', toolCallId: 'bad' });

    const parts = toolResults(prompts, 1);
    const bad = errorBody(parts.find((p) => p.toolCallId === 'bad'));
    expect(bad.error_code).toBe('INVALID_ARGUMENTS');
    expect(bad.display).toMatch(/^✗ INVALID_ARGUMENTS: /);
    expect(bad.error).toMatch(/text/);
    expect(errorBody(parts.find((p) => p.toolCallId === 'bug'))).toEqual({
      error: "Tool 'buggy' failed: plugin bug",
      error_code: 'TOOL_FAILED',
      display: "✗ TOOL_FAILED: Tool 'buggy' failed: plugin bug",
    });
  });

  it('a failed result is a thrown error too, and every field of it reaches the model (output_file, …)', async () => {
    const reg = await makeRegistry();
    const { model, prompts } = scriptedModel([
      { calls: [{ id: 's', name: 'spill', input: {} }] },
      { text: 'ok' },
    ]);
    const result = streamText({ model, tools: toAiSdkTools(reg), prompt: 'x', stopWhen: stepCountIs(3) });
    const errors: unknown[] = [];
    for await (const part of result.fullStream) if (part.type === 'tool-error') errors.push(part.error);
    expect(errors).toHaveLength(1);
    const error = errors[0] as ConchToolCallError;
    expect(ConchToolCallError.isInstance(error)).toBe(true);
    expect(error.code).toBe('OUTPUT_TRUNCATED_DISK_FULL');
    const body = errorBody(toolResults(prompts, 1)[0]);
    expect(body).toEqual({
      stdout: 'first bytes',
      returncode: 0,
      output_file: '/tmp/conch-output-1.txt',
      error: 'the disk filled up while the output was saved',
      error_code: 'OUTPUT_TRUNCATED_DISK_FULL',
      display: '✗ OUTPUT_TRUNCATED_DISK_FULL: the disk filled up while the output was saved',
    });
    expect(error.result).toEqual(body);
  });

  it('an unknown tool name from the model never reaches execute and the stream reports it', async () => {
    const reg = await makeRegistry();
    const { model } = scriptedModel([
      { calls: [{ id: 'x', name: 'rm_everything', input: {} }] },
      { text: 'ok' },
    ]);
    const result = streamText({ model, tools: toAiSdkTools(reg), prompt: 'x', stopWhen: stepCountIs(3) });
    const types: string[] = [];
    for await (const part of result.fullStream) types.push(part.type);
    expect(types).toContain('tool-error');
  });

  it('aborting the stream aborts the running tool and kills its process', async () => {
    const reg = await makeRegistry();
    started.length = 0;
    const controller = new AbortController();
    const { model } = scriptedModel([{ calls: [{ id: 's', name: 'sleep', input: { seconds: 60 } }] }]);
    let aborted = false;
    const result = streamText({
      model,
      tools: toAiSdkTools(reg),
      prompt: 'x',
      abortSignal: controller.signal,
      onAbort: () => {
        aborted = true;
      },
    });
    const consuming = result.consumeStream({ onError: () => {} });
    await waitFor(() => started.length === 1, 'the sleep to start');
    controller.abort();
    await consuming;
    expect(aborted).toBe(true);
    const pid = started[0]!;
    await waitFor(() => !isAlive(pid), 'the aborted sleep to die');
  });

  it('uses the per-call approver with the AI SDK tool call id; a no is an error result with permission_denied', async () => {
    const reg = await makeRegistry();
    const asked: { request: ApprovalRequest; toolCallId: string }[] = [];
    const { model, prompts } = scriptedModel([
      {
        calls: [
          { id: 'yes-call', name: 'guarded', input: { command: 'make' } },
          { id: 'no-call', name: 'guarded', input: { command: 'make clean' } },
        ],
      },
      { text: 'done' },
    ]);
    const tools = toAiSdkTools(reg, {
      approve: async (request, _options, toolCallId) => {
        asked.push({ request, toolCallId });
        return toolCallId === 'yes-call' ? 'once' : 'deny';
      },
    });
    await generateText({ model, tools, prompt: 'x', stopWhen: stepCountIs(3) });
    expect(asked.map((a) => a.toolCallId).sort()).toEqual(['no-call', 'yes-call']);
    const parts = toolResults(prompts, 1);
    expect(parts.find((p) => p.toolCallId === 'yes-call').output).toEqual({
      type: 'json',
      value: { ran: 'make', display: '✓' },
    });
    expect(errorBody(parts.find((p) => p.toolCallId === 'no-call'))).toMatchObject({
      permission_denied: true,
      error_code: 'PERMISSION_DENIED',
    });
  });

  it('relays progress reports with the AI SDK tool call id', async () => {
    const reg = await makeRegistry();
    const seen: unknown[] = [];
    const { model } = scriptedModel([
      { calls: [{ id: 'p-1', name: 'progress', input: {} }] },
      { text: 'ok' },
    ]);
    const tools = toAiSdkTools(reg, { onProgress: (id, progress) => seen.push([id, progress]) });
    await streamText({ model, tools, prompt: 'x', stopWhen: stepCountIs(3) }).consumeStream();
    expect(seen).toEqual([
      ['p-1', { progress: 1, total: 2, message: 'half' }],
      ['p-1', { progress: 2, total: 2 }],
    ]);
  });
});
