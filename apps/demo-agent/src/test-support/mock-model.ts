// Helpers for tests: an AI SDK mock model (LanguageModelV4, the spec ai 7 calls natively) that
// plays a list of stream steps (polling is @conch/test-support's waitFor).
import type {
  LanguageModelV4CallOptions,
  LanguageModelV4FinishReason,
  LanguageModelV4StreamPart,
  LanguageModelV4Usage,
} from '@ai-sdk/provider';
import { convertArrayToReadableStream, MockLanguageModelV4 } from 'ai/test';

const usage: LanguageModelV4Usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

function finishReason(unified: 'stop' | 'tool-calls'): LanguageModelV4FinishReason {
  return { unified, raw: unified };
}

export function toolCallStep(calls: { id: string; name: string; input: unknown }[], text?: string) {
  return [
    { type: 'stream-start', warnings: [] },
    ...(text
      ? [
          { type: 'text-start', id: 't' },
          { type: 'text-delta', id: 't', delta: text },
          { type: 'text-end', id: 't' },
        ]
      : []),
    ...calls.map((c) => ({
      type: 'tool-call',
      toolCallId: c.id,
      toolName: c.name,
      input: JSON.stringify(c.input),
    })),
    { type: 'finish', finishReason: finishReason('tool-calls'), usage },
  ] as LanguageModelV4StreamPart[];
}

export function textStep(text: string) {
  return [
    { type: 'stream-start', warnings: [] },
    { type: 'text-start', id: 't' },
    { type: 'text-delta', id: 't', delta: text },
    { type: 'text-end', id: 't' },
    { type: 'finish', finishReason: finishReason('stop'), usage },
  ] as LanguageModelV4StreamPart[];
}

/** A mock model answering each doStream with the next step (a function step may throw). */
export function mockModel(steps: (LanguageModelV4StreamPart[] | (() => never))[]) {
  const calls: LanguageModelV4CallOptions[] = [];
  let index = 0;
  const model = new MockLanguageModelV4({
    doStream: async (options) => {
      calls.push(options);
      const step = steps[Math.min(index++, steps.length - 1)];
      if (typeof step === 'function') step();
      return {
        stream: convertArrayToReadableStream((step as LanguageModelV4StreamPart[]) ?? textStep('done')),
      };
    },
  });
  return { model, calls };
}
