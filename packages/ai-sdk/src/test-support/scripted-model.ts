// A scripted model made with the SDK's own mock model, for whichever `ai` major the test project
// resolves (vitest.config.ts aliases `ai` to ai 5, 6 or 7): LanguageModelV2 (ai 5), V3 (ai 6) or
// V4 (ai 7). The only stand-in in these tests.
import * as aiTest from 'ai/test';

export type Spec = 'v2' | 'v3' | 'v4';

/** A tool call the model makes: `input` is sent as the JSON text a provider would send. */
export interface ScriptedCall {
  id: string;
  name: string;
  input: unknown;
}

/** One model response: tool calls (finish reason `tool-calls`) or a text (finish reason `stop`). */
export type Step = { calls: ScriptedCall[] } | { text: string };

type Mocks = Record<string, (new (options: Record<string, unknown>) => any) | undefined>;

const mocks = aiTest as unknown as Mocks;

/** The newest language model spec the resolved `ai/test` has a mock for. */
export const spec: Spec = mocks.MockLanguageModelV4 ? 'v4' : mocks.MockLanguageModelV3 ? 'v3' : 'v2';

const MockModel = (mocks.MockLanguageModelV4 ?? mocks.MockLanguageModelV3 ?? mocks.MockLanguageModelV2)!;

function usage() {
  return spec === 'v2'
    ? { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
    : {
        inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: 1, text: 1, reasoning: undefined },
      };
}

function finishReason(reason: 'stop' | 'tool-calls') {
  return spec === 'v2' ? reason : { unified: reason, raw: reason };
}

function content(step: Step) {
  return 'calls' in step
    ? step.calls.map((c) => ({
        type: 'tool-call',
        toolCallId: c.id,
        toolName: c.name,
        input: JSON.stringify(c.input),
      }))
    : [{ type: 'text', text: step.text }];
}

function streamParts(step: Step): Record<string, unknown>[] {
  const body =
    'calls' in step
      ? content(step)
      : [
          { type: 'text-start', id: 't' },
          { type: 'text-delta', id: 't', delta: step.text },
          { type: 'text-end', id: 't' },
        ];
  return [
    { type: 'stream-start', warnings: [] },
    ...body,
    { type: 'finish', finishReason: finishReason('calls' in step ? 'tool-calls' : 'stop'), usage: usage() },
  ];
}

/** One prompt message as the provider receives it (LanguageModelV2/V3/V4 prompt). */
export interface PromptMessage {
  role: string;
  content: unknown;
}

/**
 * A mock model that answers with the given steps in order (then with the last one), for
 * `generateText` and `streamText`, and records every prompt it was sent and the tools it was given.
 */
export function scriptedModel(steps: Step[]) {
  const prompts: PromptMessage[][] = [];
  const tools: unknown[][] = [];
  let index = 0;
  const next = (options: { prompt: unknown; tools?: unknown[] }): Step => {
    prompts.push(options.prompt as PromptMessage[]);
    tools.push(options.tools ?? []);
    return steps[Math.min(index++, steps.length - 1)] ?? { text: 'done' };
  };
  const model = new MockModel({
    doGenerate: async (options: { prompt: unknown; tools?: unknown[] }) => {
      const step = next(options);
      return {
        content: content(step),
        finishReason: finishReason('calls' in step ? 'tool-calls' : 'stop'),
        usage: usage(),
        warnings: [],
      };
    },
    doStream: async (options: { prompt: unknown; tools?: unknown[] }) => ({
      stream: aiTest.convertArrayToReadableStream(streamParts(next(options))),
    }),
  });
  return { model, prompts, tools };
}

/** The tool-result parts of the tool message in the prompt of model call `call` (0-based). */
export function toolResults(prompts: PromptMessage[][], call: number): any[] {
  const message = prompts[call]?.find((m) => m.role === 'tool');
  return (message?.content ?? []) as any[];
}
