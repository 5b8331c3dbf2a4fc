// A conch plugin to copy: one read-only tool and one that asks the permission gate first.
// Plain JavaScript, no build step; `definePlugin` is only an identity helper for TypeScript.
import { appendFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';

/** A failure the model can act on: the message, a stable code, one line for a UI. */
const failure = (code, message) => ({ error: message, error_code: code, display: `✗ ${code}: ${message}` });

/** @type {import('@conch/core').PluginDefinition<{ file: string }>} */
export default {
  name: 'notes',
  version: '0.1.0',
  description: 'Keeps short notes in a file of the workspace',
  // Validated when the host exposes the plugin; snake_case keys are accepted too.
  configSchema: z.strictObject({
    file: z
      .string()
      .regex(/^[\w.-]+$/, 'a file name inside the workspace')
      .default('NOTES.md'),
  }),
  // Runs once per `registry.expose('notes', config)`: state lives in this closure, never in the module.
  setup(ctx) {
    const file = join(ctx.env.cwd, ctx.config.file);
    return {
      instructions: `add_note appends a line to ${ctx.config.file} (the user approves each note); list_notes reads them.`,
      tools: [
        {
          name: 'list_notes',
          description: `List the notes in ${ctx.config.file}.`,
          inputSchema: z.strictObject({}),
          annotations: { readOnlyHint: true },
          // Read-only actions are allowed without asking.
          permission: () => ({
            kind: 'action',
            tool: 'list_notes',
            summary: 'read the notes',
            readOnly: true,
          }),
          async execute() {
            try {
              const notes = (await readFile(file, 'utf8')).split('\n').filter(Boolean);
              return { notes, display: `${notes.length} notes` };
            } catch (error) {
              if (error.code === 'ENOENT') return { notes: [], display: '0 notes' };
              return failure('FILE_ERROR', `cannot read ${ctx.config.file}: ${error.message}`);
            }
          },
        },
        {
          name: 'add_note',
          description: `Append one line to ${ctx.config.file}.`,
          inputSchema: z.strictObject({
            text: z.string().min(1).max(500).describe('the note, one line'),
          }),
          annotations: { destructiveHint: false },
          // Anything that changes something asks: the gate shows `summary` to the user (or denies
          // when nobody can be asked) and execute runs only after an allow.
          permission: ({ text }) => ({
            kind: 'action',
            tool: 'add_note',
            summary: `append to ${ctx.config.file}: ${text}`,
          }),
          async execute({ text }, call) {
            if (text.includes('\n')) return failure('INVALID_ARGUMENTS', 'text: expected one line');
            call.logger.info({ file }, 'adding a note');
            await appendFile(file, `- ${text}\n`);
            return { added: text, display: `✓ noted in ${ctx.config.file}` };
          },
        },
      ],
    };
  },
};
