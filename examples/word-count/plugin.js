// A third-party conch plugin with no build step and no import of @conch/core: a plugin is a
// plain object (definePlugin is only an identity helper for TypeScript inference).
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { z } from 'zod';

function count(text) {
  const words = text.split(/\s+/u).filter(Boolean).length;
  const lines = text.length === 0 ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  return { lines, words, chars: [...text].length, bytes: Buffer.byteLength(text) };
}

/** A result with the one-line `display` hosts show. */
function summarise(counts) {
  const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
  return { ...counts, display: `✓ ${plural(counts.lines, 'line')}, ${plural(counts.words, 'word')}` };
}

/** A failure the model can act on: the message, a stable code, one line for a UI. */
function failure(code, message) {
  return { error: message, error_code: code, display: `✗ ${code}: ${message}` };
}

/** @type {import('@conch/core').PluginDefinition<{ maxBytes: number }>} */
const plugin = {
  name: 'word-count',
  version: '0.0.0',
  description: 'Counts lines, words and characters of a text or a file',
  configSchema: z.strictObject({
    maxBytes: z
      .number()
      .int()
      .positive()
      .default(10 * 1024 * 1024)
      .describe('largest file it will read'),
  }),
  // One exposure = one setup call; anything it keeps lives in this closure, never in the module.
  setup: (ctx) => ({
    instructions:
      'word_count counts lines, words, characters and bytes of `text` or of the file at `path`; prefer it to `wc` for a quick count.',
    tools: [
      {
        name: 'word_count',
        description:
          'Count lines, words, characters and bytes of a text or of a file (path relative to the workspace).',
        inputSchema: z
          .strictObject({
            text: z.string().optional().describe('the text to count'),
            path: z.string().optional().describe('a file to count instead of text'),
          })
          .refine((a) => (a.text === undefined) !== (a.path === undefined), {
            message: 'give exactly one of `text` or `path`',
          }),
        annotations: { readOnlyHint: true },
        async execute(args) {
          if (args.text !== undefined) return summarise(count(args.text));
          const file = resolve(ctx.env.cwd, args.path);
          try {
            const buffer = await readFile(file);
            if (buffer.length > ctx.config.maxBytes) {
              return failure(
                'FILE_TOO_LARGE',
                `${args.path} is ${buffer.length} bytes, over the ${ctx.config.maxBytes}-byte limit`,
              );
            }
            return summarise({ path: args.path, ...count(buffer.toString('utf8')) });
          } catch (error) {
            return failure(
              error.code === 'ENOENT' ? 'NO_SUCH_FILE' : 'FILE_ERROR',
              `cannot read ${args.path}: ${error.code ?? error.message}`,
            );
          }
        },
      },
    ],
  }),
};

export default plugin;
