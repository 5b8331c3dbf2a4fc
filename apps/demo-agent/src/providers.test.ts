// Invariant: the provider comes from the environment (OpenAI-compatible, then Anthropic, else the labelled scripted model), each speaks the spec ai 7 calls natively (no SDK warning), and keys never reach the label.
import { createServer, type IncomingMessage } from 'node:http';
import { PluginRegistry } from '@conch/core';
import { describe, expect, it } from 'vitest';
import { Agent } from './agent.js';
import { chooseModel, DEFAULT_ANTHROPIC_MODEL, logSdkWarnings } from './providers.js';
import { ScriptedDemoModel } from './scripted-model.js';
import { sdkWarningsDuring } from './test-support/sdk-warnings.js';
import { shellPlugin } from './test-support/shell-plugin.js';

interface Received {
  url: string | undefined;
  headers: IncomingMessage['headers'];
  body: any;
}

/**
 * A local fake provider API: `respond` gets each request's JSON body and returns the server-sent
 * events to stream back. Runs `test` with the server's base address, then closes it.
 */
async function withFakeApi(
  respond: (body: any) => string[],
  test: (base: string, received: Received[]) => Promise<void>,
): Promise<void> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw);
      received.push({ url: req.url, headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const event of respond(body)) res.write(event);
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  try {
    await test(`http://127.0.0.1:${port}`, received);
  } finally {
    await new Promise((r) => server.close(r));
  }
}

describe('chooseModel', () => {
  it('uses an OpenAI-compatible server when OPENAI_BASE_URL or OPENAI_API_KEY is set', async () => {
    const choice = await chooseModel({
      OPENAI_BASE_URL: 'http://localhost:11434/v1/',
      OPENAI_API_KEY: 'sk-secret-value',
      CONCH_MODEL: 'qwen2.5-coder:7b',
      ANTHROPIC_API_KEY: 'also-set',
    });
    expect(choice.scripted).toBe(false);
    expect(choice.model.modelId).toBe('qwen2.5-coder:7b');
    expect(choice.label).toBe('qwen2.5-coder:7b (OpenAI-compatible, http://localhost:11434/v1)');
    expect(choice.label).not.toContain('secret');
  });

  it('uses Anthropic when only ANTHROPIC_API_KEY is set', async () => {
    const choice = await chooseModel({ ANTHROPIC_API_KEY: 'sk-ant-secret' });
    expect(choice.scripted).toBe(false);
    expect(choice.model.provider).toMatch(/anthropic/);
    expect(choice.label).toMatch(/\(Anthropic\)$/);
    expect(choice.label).not.toContain('secret');
  });

  it('falls back to the scripted demo model, labelled as such; --scripted forces it', async () => {
    const none = await chooseModel({});
    expect(none.scripted).toBe(true);
    expect(none.model).toBeInstanceOf(ScriptedDemoModel);
    expect(none.label).toMatch(/^scripted demo model \(offline/);
    const forced = await chooseModel({ OPENAI_API_KEY: 'x' }, { scripted: true });
    expect(forced.scripted).toBe(true);
  });

  it('sends the AI SDK warnings to the log, not to stderr', async () => {
    const { pino } = await import('pino');
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
    const before = globalThis.AI_SDK_LOG_WARNINGS;
    try {
      logSdkWarnings(logger);
      const log = globalThis.AI_SDK_LOG_WARNINGS;
      expect(typeof log).toBe('function');
      if (typeof log === 'function')
        log({
          warnings: [{ type: 'unsupported', feature: 'topK' }],
          provider: 'anthropic.messages',
          model: 'm',
        });
    } finally {
      globalThis.AI_SDK_LOG_WARNINGS = before;
    }
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 40,
      msg: 'AI SDK warning',
      provider: 'anthropic.messages',
      warnings: [{ type: 'unsupported', feature: 'topK' }],
    });
  });

  it('gives models of the current spec (LanguageModelV4, what ai 7 calls without a compatibility mode)', async () => {
    const choices = await Promise.all([
      chooseModel({ OPENAI_API_KEY: 'x' }),
      chooseModel({ ANTHROPIC_API_KEY: 'x' }),
      chooseModel({}),
    ]);
    expect(choices.map((c) => c.model.specificationVersion)).toEqual(['v4', 'v4', 'v4']);
  });
});

describe('OpenAI-compatible provider end to end (local fake server)', () => {
  it('sends the tools as functions, runs the streamed tool call for real and sends its result back', async () => {
    const sse = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;
    const respond = (body: any) => {
      const base = { id: 'x', object: 'chat.completion.chunk', created: 1, model: body.model };
      const toolMessage = body.messages.find((m: { role: string }) => m.role === 'tool');
      const chunks = toolMessage
        ? [
            { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: 'the tool said it' } }] },
            { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
          ]
        : [
            {
              ...base,
              choices: [
                {
                  index: 0,
                  delta: {
                    role: 'assistant',
                    tool_calls: [
                      {
                        index: 0,
                        id: 'call_1',
                        type: 'function',
                        function: { name: 'sh', arguments: JSON.stringify({ command: 'echo via-openai' }) },
                      },
                    ],
                  },
                },
              ],
            },
            { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
          ];
      return [...chunks.map(sse), 'data: [DONE]\n\n'];
    };
    await withFakeApi(respond, async (base, received) => {
      const registry = new PluginRegistry({ plugins: [shellPlugin] });
      registry.exposeSync('test-shell');
      try {
        const choice = await chooseModel({
          OPENAI_BASE_URL: `${base}/v1`,
          OPENAI_API_KEY: 'test-key',
          CONCH_MODEL: 'local-model',
        });
        const agent = new Agent({ model: choice.model, registry });
        let text = '';
        const warnings = await sdkWarningsDuring(async () => {
          const outcome = await agent.run('say something', new AbortController().signal, {
            onText: (d) => (text += d),
          });
          expect(outcome).toBe('done');
        });
        expect(warnings).toEqual([]);
        expect(text).toBe('the tool said it');
        expect(received).toHaveLength(2);
        expect(received[0]!.url).toBe('/v1/chat/completions');
        expect(received[0]!.headers.authorization).toBe('Bearer test-key');
        expect(received[0]!.body.model).toBe('local-model');
        expect(received[0]!.body.tools).toEqual([
          expect.objectContaining({
            type: 'function',
            function: expect.objectContaining({
              name: 'sh',
              parameters: expect.objectContaining({ type: 'object', required: ['command'] }),
            }),
          }),
        ]);
        const toolMessage = received[1]!.body.messages.find((m: { role: string }) => m.role === 'tool');
        expect(toolMessage.tool_call_id).toBe('call_1');
        expect(toolMessage.content).toContain('via-openai');
      } finally {
        await registry.dispose();
      }
    });
  });
});

describe('Anthropic provider end to end (local fake server)', () => {
  it('runs streamed tool_use blocks for real, sends the results back (a failed one with is_error) and keeps them in the next turn', async () => {
    const event = (data: { type: string }) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`;
    const message = (id: string) => ({
      type: 'message_start',
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model: 'claude-test',
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 1, output_tokens: 1 },
      },
    });
    const toolUse = (index: number, id: string, input: unknown) => [
      { type: 'content_block_start', index, content_block: { type: 'tool_use', id, name: 'sh', input: {} } },
      {
        type: 'content_block_delta',
        index,
        delta: { type: 'input_json_delta', partial_json: JSON.stringify(input) },
      },
      { type: 'content_block_stop', index },
    ];
    const text = (value: string) => [
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: value } },
      { type: 'content_block_stop', index: 0 },
    ];
    const end = (stopReason: string) => [
      {
        type: 'message_delta',
        delta: { stop_reason: stopReason, stop_sequence: null },
        usage: { output_tokens: 1 },
      },
      { type: 'message_stop' },
    ];
    let requests = 0;
    const respond = () => {
      requests += 1;
      const parts =
        requests === 1
          ? [
              message('msg_1'),
              ...toolUse(0, 'toolu_ok', { command: 'echo via-anthropic' }),
              ...toolUse(1, 'toolu_bad', { command: 7 }),
              ...end('tool_use'),
            ]
          : [
              message(`msg_${requests}`),
              ...text(requests === 2 ? 'the tools said it' : 'second turn'),
              ...end('end_turn'),
            ];
      return parts.map(event);
    };
    await withFakeApi(respond, async (base, received) => {
      const registry = new PluginRegistry({ plugins: [shellPlugin] });
      registry.exposeSync('test-shell');
      try {
        const choice = await chooseModel({
          ANTHROPIC_API_KEY: 'test-key',
          ANTHROPIC_BASE_URL: `${base}/v1`,
        });
        // The default model: one the provider knows (an unknown id gets a maxOutputTokens warning).
        expect(choice.model.modelId).toBe(DEFAULT_ANTHROPIC_MODEL);
        const agent = new Agent({ model: choice.model, registry });
        let said = '';
        const results: { id: string; isError: boolean }[] = [];
        const warnings = await sdkWarningsDuring(async () => {
          const handlers = {
            onText: (d: string) => (said += d),
            onToolResult: (r: { id: string; isError: boolean }) =>
              results.push({ id: r.id, isError: r.isError }),
          };
          expect(await agent.run('say something', new AbortController().signal, handlers)).toBe('done');
          expect(await agent.run('and again', new AbortController().signal, handlers)).toBe('done');
        });
        expect(warnings).toEqual([]);
        expect(said).toBe('the tools said itsecond turn');
        // Sorted: the two calls run concurrently and may finish in either order.
        expect(results.sort((a, b) => a.id.localeCompare(b.id))).toEqual([
          { id: 'toolu_bad', isError: true },
          { id: 'toolu_ok', isError: false },
        ]);
        expect(received).toHaveLength(3);
        expect(received[0]!.url).toBe('/v1/messages');
        expect(received[0]!.headers['x-api-key']).toBe('test-key');
        expect(received[0]!.body).toMatchObject({ model: DEFAULT_ANTHROPIC_MODEL, stream: true });
        expect(received[0]!.body.tools).toEqual([
          expect.objectContaining({
            name: 'sh',
            input_schema: expect.objectContaining({ type: 'object', required: ['command'] }),
          }),
        ]);
        // The results go back as tool_result blocks; the failed call's is its result as JSON, is_error.
        const toolResults = (body: any) =>
          body.messages.flatMap((m: { role: string; content: unknown }) =>
            m.role === 'user' && Array.isArray(m.content)
              ? m.content.filter((c: { type: string }) => c.type === 'tool_result')
              : [],
          );
        const sent: { tool_use_id: string }[] = toolResults(received[1]!.body);
        expect(sent).toHaveLength(2);
        const ok: any = sent.find((r) => r.tool_use_id === 'toolu_ok');
        const bad: any = sent.find((r) => r.tool_use_id === 'toolu_bad');
        expect(ok).toMatchObject({ tool_use_id: 'toolu_ok' });
        expect(ok.is_error).toBeFalsy();
        expect(JSON.stringify(ok.content)).toContain('via-anthropic');
        expect(bad).toMatchObject({ tool_use_id: 'toolu_bad', is_error: true });
        expect(JSON.stringify(bad.content)).toContain('INVALID_ARGUMENTS');
        // The next turn sends the whole history again, in Anthropic's shape.
        expect(received[2]!.body.messages.map((m: { role: string }) => m.role)).toEqual([
          'user',
          'assistant',
          'user',
          'assistant',
          'user',
        ]);
        expect(toolResults(received[2]!.body)).toEqual(toolResults(received[1]!.body));
      } finally {
        await registry.dispose();
      }
    });
  });
});
