// Invariant: the provider comes from the environment (OpenAI-compatible, then Anthropic, else the labelled scripted model) and keys never reach the label.
import { describe, expect, it } from 'vitest';
import { chooseModel } from './providers.js';
import { ScriptedDemoModel } from './scripted-model.js';

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
});

describe('OpenAI-compatible provider end to end (local fake server)', () => {
  it('sends the tools as functions, runs the streamed tool call for real and sends its result back', async () => {
    const { createServer } = await import('node:http');
    const { PluginRegistry } = await import('@conch/core');
    const { Agent } = await import('./agent.js');
    const { shellPlugin } = await import('./test-support/shell-plugin.js');
    const bodies: any[] = [];
    const server = createServer((req, res) => {
      let raw = '';
      req.on('data', (d: Buffer) => (raw += d.toString()));
      req.on('end', () => {
        const body = JSON.parse(raw);
        bodies.push({ ...body, authorization: req.headers.authorization, url: req.url });
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
        const base = { id: 'x', object: 'chat.completion.chunk', created: 1, model: body.model };
        const toolMessage = body.messages.find((m: { role: string }) => m.role === 'tool');
        if (!toolMessage) {
          send({
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
          });
          send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] });
        } else {
          send({
            ...base,
            choices: [{ index: 0, delta: { role: 'assistant', content: 'the tool said it' } }],
          });
          send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
        }
        res.end('data: [DONE]\n\n');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    const registry = new PluginRegistry({ plugins: [shellPlugin] });
    registry.exposeSync('test-shell');
    try {
      const choice = await chooseModel({
        OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`,
        OPENAI_API_KEY: 'test-key',
        CONCH_MODEL: 'local-model',
      });
      const agent = new Agent({ model: choice.model, registry });
      let text = '';
      const outcome = await agent.run('say something', new AbortController().signal, {
        onText: (d) => (text += d),
      });
      expect(outcome).toBe('done');
      expect(text).toBe('the tool said it');
      expect(bodies).toHaveLength(2);
      expect(bodies[0].url).toBe('/v1/chat/completions');
      expect(bodies[0].authorization).toBe('Bearer test-key');
      expect(bodies[0].model).toBe('local-model');
      expect(bodies[0].tools).toEqual([
        expect.objectContaining({
          type: 'function',
          function: expect.objectContaining({
            name: 'sh',
            parameters: expect.objectContaining({ type: 'object', required: ['command'] }),
          }),
        }),
      ]);
      const toolMessage = bodies[1].messages.find((m: { role: string }) => m.role === 'tool');
      expect(toolMessage.tool_call_id).toBe('call_1');
      expect(toolMessage.content).toContain('via-openai');
    } finally {
      await registry.dispose();
      await new Promise((r) => server.close(r));
    }
  });
});
