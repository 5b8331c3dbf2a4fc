// Helpers for tests: an AI SDK mock model that plays a list of stream steps (polling is
// @conch/test-support's waitFor).
import type { LanguageModelV2CallOptions, LanguageModelV2StreamPart } from '@ai-sdk/provider';
import { convertArrayToReadableStream, MockLanguageModelV2 } from 'ai/test';

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };

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
    { type: 'finish', finishReason: 'tool-calls', usage },
  ] as LanguageModelV2StreamPart[];
}

export function textStep(text: string) {
  return [
    { type: 'stream-start', warnings: [] },
    { type: 'text-start', id: 't' },
    { type: 'text-delta', id: 't', delta: text },
    { type: 'text-end', id: 't' },
    { type: 'finish', finishReason: 'stop', usage },
  ] as LanguageModelV2StreamPart[];
}

/** A mock model answering each doStream with the next step (a function step may throw). */
export function mockModel(steps: (LanguageModelV2StreamPart[] | (() => never))[]) {
  const calls: LanguageModelV2CallOptions[] = [];
  let index = 0;
  const model = new MockLanguageModelV2({
    doStream: async (options) => {
      calls.push(options);
      const step = steps[Math.min(index++, steps.length - 1)];
      if (typeof step === 'function') step();
      return {
        stream: convertArrayToReadableStream((step as LanguageModelV2StreamPart[]) ?? textStep('done')),
      };
    },
  });
  return { model, calls };
}
