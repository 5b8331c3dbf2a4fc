// Invariant: a registry's tools run through the AI SDK for real: results reach the model, thrown errors become error results, aborts kill the tool's process, per-call approve is used.
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
import { stepCountIs, streamText, type ModelMessage } from 'ai';
import { convertArrayToReadableStream, MockLanguageModelV2 } from 'ai/test';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isConchToolError, toAiSdkTools } from './index.js';

/** One chunk of a LanguageModelV2 stream (the mock model passes them through untouched). */
type StreamPart = Record<string, unknown>;

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };

function toolCallStep(calls: { id: string; name: string; input: unknown }[]): StreamPart[] {
  return [
    { type: 'stream-start', warnings: [] },
    ...calls.map((c) => ({
      type: 'tool-call',
      toolCallId: c.id,
      toolName: c.name,
      input: JSON.stringify(c.input),
    })),
    { type: 'finish', finishReason: 'tool-calls', usage },
  ];
}

function textStep(text: string): StreamPart[] {
  return [
    { type: 'stream-start', warnings: [] },
    { type: 'text-start', id: 't' },
    { type: 'text-delta', id: 't', delta: text },
    { type: 'text-end', id: 't' },
    { type: 'finish', finishReason: 'stop', usage },
  ];
}

/** A mock model that plays the given steps in order and records what it was sent. */
function scriptedModel(steps: StreamPart[][]) {
  const prompts: ModelMessage[][] = [];
  let index = 0;
  const model = new MockLanguageModelV2({
    doStream: async (options) => {
      prompts.push(options.prompt as ModelMessage[]);
      const step = steps[Math.min(index++, steps.length - 1)] ?? textStep('done');
      return { stream: convertArrayToReadableStream(step as any[]) };
    },
  });
  return { model, prompts };
}

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

describe('toAiSdkTools', () => {
  it('gives the model every exposed tool with its JSON schema and description', async () => {
    const reg = await makeRegistry();
    const tools = toAiSdkTools(reg);
    expect(Object.keys(tools).sort()).toEqual(['buggy', 'echo', 'guarded', 'progress', 'sleep']);
    const { model } = scriptedModel([textStep('hi')]);
    const result = streamText({ model, tools, prompt: 'hi' });
    await result.consumeStream();
    const sent = model.doStreamCalls[0]?.tools ?? [];
    const echo = sent.find((t) => t.name === 'echo');
    expect(echo).toMatchObject({
      type: 'function',
      description: 'Runs echo for real and returns its stdout',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
    });
  });

  it('include/exclude pick tools, and an unknown name is a clear error', async () => {
    const reg = await makeRegistry();
    expect(Object.keys(toAiSdkTools(reg, { include: ['echo'] }))).toEqual(['echo']);
    expect(Object.keys(toAiSdkTools(reg, { exclude: ['echo', 'buggy'] })).sort()).toEqual([
      'guarded',
      'progress',
      'sleep',
    ]);
    expect(() => toAiSdkTools(reg, { include: ['nope'] })).toThrow(/tool 'nope'.*exposed tools: buggy, echo/);
  });

  it('runs a real tool call and sends its result back to the model in the next step', async () => {
    const reg = await makeRegistry();
    const callIds: string[] = [];
    reg.events.on('tool.result', (e) => callIds.push(e.callId));
    const { model, prompts } = scriptedModel([
      toolCallStep([{ id: 'call-1', name: 'echo', input: { text: 'hello conch' } }]),
      textStep('it said hello'),
    ]);
    const result = streamText({
      model,
      tools: toAiSdkTools(reg),
      prompt: 'say hi',
      stopWhen: stepCountIs(5),
    });
    expect(await result.text).toBe('it said hello');
    const toolMessage = prompts[1]?.find((m) => m.role === 'tool');
    expect(toolMessage).toMatchObject({
      content: [
        {
          type: 'tool-result',
          toolCallId: 'call-1',
          toolName: 'echo',
          output: { type: 'json', value: { stdout: 'hello conch\n', returncode: 0, display: '✓' } },
        },
      ],
    });
    expect(callIds).toEqual(['call-1']);
  });

  it('turns bad arguments and plugin bugs into error results the model sees, and the loop goes on', async () => {
    const reg = await makeRegistry();
    const { model, prompts } = scriptedModel([
      toolCallStep([
        { id: 'bad', name: 'echo', input: { text: 42 } },
        { id: 'bug', name: 'buggy', input: {} },
      ]),
      textStep('recovered'),
    ]);
    const result = streamText({ model, tools: toAiSdkTools(reg), prompt: 'x', stopWhen: stepCountIs(5) });
    const outputs: unknown[] = [];
    for await (const part of result.fullStream) if (part.type === 'tool-result') outputs.push(part.output);
    expect(await result.text).toBe('recovered');
    expect(outputs.every(isConchToolError)).toBe(true);
    const parts = (prompts[1]?.find((m) => m.role === 'tool')?.content ?? []) as any[];
    const bad = parts.find((p) => p.toolCallId === 'bad');
    expect(bad.output.type).toBe('error-json');
    expect(bad.output.value.error_code).toBe('INVALID_ARGUMENTS');
    expect(bad.output.value.display).toMatch(/^✗ INVALID_ARGUMENTS: /);
    expect(bad.output.value.error).toMatch(/text/);
    const bug = parts.find((p) => p.toolCallId === 'bug');
    expect(bug.output).toEqual({
      type: 'error-json',
      value: {
        error: "Tool 'buggy' failed: plugin bug",
        error_code: 'TOOL_FAILED',
        display: "✗ TOOL_FAILED: Tool 'buggy' failed: plugin bug",
      },
    });
  });

  it('an unknown tool name from the model never reaches execute and the stream reports it', async () => {
    const reg = await makeRegistry();
    const { model } = scriptedModel([
      toolCallStep([{ id: 'x', name: 'rm_everything', input: {} }]),
      textStep('ok'),
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
    const { model } = scriptedModel([toolCallStep([{ id: 's', name: 'sleep', input: { seconds: 60 } }])]);
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

  it('uses the per-call approver with the AI SDK tool call id; a no is a denied result', async () => {
    const reg = await makeRegistry();
    const asked: { request: ApprovalRequest; toolCallId: string }[] = [];
    const { model, prompts } = scriptedModel([
      toolCallStep([
        { id: 'yes-call', name: 'guarded', input: { command: 'make' } },
        { id: 'no-call', name: 'guarded', input: { command: 'make clean' } },
      ]),
      textStep('done'),
    ]);
    const tools = toAiSdkTools(reg, {
      approve: async (request, _options, toolCallId) => {
        asked.push({ request, toolCallId });
        return toolCallId === 'yes-call' ? 'once' : 'deny';
      },
    });
    const result = streamText({ model, tools, prompt: 'x', stopWhen: stepCountIs(3) });
    await result.consumeStream();
    expect(asked.map((a) => a.toolCallId).sort()).toEqual(['no-call', 'yes-call']);
    const parts = (prompts[1]?.find((m) => m.role === 'tool')?.content ?? []) as any[];
    expect(parts.find((p) => p.toolCallId === 'yes-call').output.value).toEqual({
      ran: 'make',
      display: '✓',
    });
    expect(parts.find((p) => p.toolCallId === 'no-call').output.value).toMatchObject({
      permission_denied: true,
    });
  });

  it('relays progress reports with the AI SDK tool call id', async () => {
    const reg = await makeRegistry();
    const seen: unknown[] = [];
    const { model } = scriptedModel([
      toolCallStep([{ id: 'p-1', name: 'progress', input: {} }]),
      textStep('ok'),
    ]);
    const tools = toAiSdkTools(reg, { onProgress: (id, progress) => seen.push([id, progress]) });
    await streamText({ model, tools, prompt: 'x', stopWhen: stepCountIs(3) }).consumeStream();
    expect(seen).toEqual([
      ['p-1', { progress: 1, total: 2, message: 'half' }],
      ['p-1', { progress: 2, total: 2 }],
    ]);
  });
});
