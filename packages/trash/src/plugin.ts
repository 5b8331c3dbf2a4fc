import { isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import {
  ARGUMENT_BYTES,
  definePlugin,
  defineTool,
  oneLine,
  TRASH_SERVICE,
  type TrashEntryInfo,
  type TrashService,
} from '@conch/core';
import { TrashError } from './errors/trash-error.js';
import { defaultTrashDir } from './trash-dir.js';
import { TrashStore } from './trash-store.js';

export const trashConfigSchema = z.strictObject({
  dir: z
    .string()
    .min(1)
    .optional()
    .describe(
      "the project's trash directory (relative to the registry's cwd); default $XDG_DATA_HOME/conch/trash/<project>-<hash> (~/.local/share/...)",
    ),
  listLimit: z
    .number()
    .int()
    .min(1)
    .max(10_000)
    .default(50)
    .describe('entries a list returns at most (newest first) unless the call asks for more'),
});

export type TrashConfig = z.output<typeof trashConfigSchema>;
export type TrashConfigInput = z.input<typeof trashConfigSchema>;

export const trashInputSchema = z
  .strictObject({
    action: z
      .enum(['list', 'restore', 'empty'])
      .describe('list: what is in the trash; restore: put one entry back; empty: delete entries for good'),
    id: z.string().min(1).optional().describe("restore: the entry's id (from list)"),
    to: z
      .string()
      .min(1)
      .optional()
      .describe('restore: put it here instead of its original path (relative to the workspace)'),
    path: z.string().min(1).optional().describe('list: only entries whose original path contains this text'),
    limit: z
      .number()
      .int()
      .min(1)
      .max(10_000)
      .optional()
      .describe('list: entries to return at most (newest first)'),
    older_than_days: z
      .number()
      .min(0)
      .optional()
      .describe('empty: only entries deleted more than this many days ago (default: every entry)'),
  })
  .superRefine((args, ctx) => {
    const extra = (field: 'id' | 'to' | 'path' | 'limit' | 'older_than_days', allowed: string) => {
      if (args[field] !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: [field],
          message: `${field} applies to action '${allowed}' only; given with action '${args.action}'`,
        });
      }
    };
    if (args.action === 'restore' && args.id === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['id'],
        message:
          "action 'restore' needs id: the entry to restore (ids come from { action: 'list' }); given none",
      });
    }
    if (args.action !== 'restore') {
      extra('id', 'restore');
      extra('to', 'restore');
    }
    if (args.action !== 'list') {
      extra('path', 'list');
      extra('limit', 'list');
    }
    if (args.action !== 'empty') extra('older_than_days', 'empty');
  });

export type TrashArgs = z.output<typeof trashInputSchema>;

/** An entry as the model reads it. */
function shown(e: TrashEntryInfo) {
  return {
    id: e.id,
    original_path: e.originalPath,
    deleted_at: new Date(e.deletedAt).toISOString(),
    kind: e.kind,
    ...(e.sizeBytes === undefined ? {} : { size_bytes: e.sizeBytes }),
  };
}

function failure(error: unknown) {
  if (!TrashError.is(error)) throw error;
  return {
    error: error.message,
    error_code: error.code,
    display: `✗ ${error.code}: ${oneLine(error.message)}`,
  };
}

/** The `trash` tool over a trash service. */
export function createTrashTool(trash: TrashService, config: TrashConfig, cwd: string) {
  return defineTool<TrashArgs>({
    name: 'trash',
    description: [
      "The project's trash: rm in the terminal (and in cli_based_tool when the host enabled safe rm) moves files and directories here instead of deleting them.",
      "{ action: 'list', path?, limit? } -> entries (id, original_path, deleted_at, kind), newest first.",
      "{ action: 'restore', id, to? } puts one entry back where it was (or at `to`); it never overwrites: an existing file there is an error.",
      "{ action: 'empty', older_than_days? } deletes entries for good.",
    ].join('\n'),
    inputSchema: trashInputSchema,
    // Checked before any work: an entry id 256 bytes, a path (to, path filter) 4096 (PATH_MAX).
    argumentLimits: { fields: { id: ARGUMENT_BYTES.id, to: ARGUMENT_BYTES.path, path: ARGUMENT_BYTES.path } },
    annotations: { destructiveHint: true, idempotentHint: false },
    // Listing reads; putting a file back writes into the workspace and emptying deletes for good:
    // the permission gate decides those (a human approves them unless the host allowed it).
    async permission(args) {
      if (args.action === 'list') return undefined;
      if (args.action === 'restore') {
        // The human sees where it will really be written: the entry's recorded path (which a
        // command could have written into the trash) or `to`.
        const entry = args.to === undefined ? (await trash.list()).find((e) => e.id === args.id) : undefined;
        const target =
          args.to !== undefined ? resolve(cwd, args.to) : (entry?.originalPath ?? 'its original path');
        return {
          kind: 'action',
          tool: 'trash',
          summary: `restore trash entry ${args.id} to ${target}`,
        };
      }
      return {
        kind: 'action',
        tool: 'trash',
        summary:
          args.older_than_days === undefined
            ? `permanently delete every entry of the trash (${trash.dir})`
            : `permanently delete trash entries deleted more than ${args.older_than_days} days ago`,
      };
    },
    async execute(args) {
      switch (args.action) {
        case 'list': {
          const all = await trash.list();
          const matching =
            args.path === undefined ? all : all.filter((e) => e.originalPath.includes(args.path!));
          const limit = args.limit ?? config.listLimit;
          const entries = matching.slice(0, limit).map(shown);
          return {
            entries,
            total: matching.length,
            trash_dir: trash.dir,
            ...(matching.length > entries.length
              ? {
                  message: `${matching.length - entries.length} older entries not shown; pass limit or path to see them.`,
                }
              : {}),
            display:
              matching.length === 0
                ? '✓ trash: empty'
                : `✓ trash: ${matching.length} entr${matching.length === 1 ? 'y' : 'ies'}${args.path ? ` matching ${args.path}` : ''}`,
          };
        }
        case 'restore': {
          try {
            const to =
              args.to === undefined ? {} : { to: isAbsolute(args.to) ? args.to : resolve(cwd, args.to) };
            const entry = await trash.restore(args.id!, to);
            return {
              restored: shown(entry),
              display: `✓ restored ${entry.originalPath}`,
            };
          } catch (error) {
            return failure(error);
          }
        }
        case 'empty': {
          const { removed } = await trash.empty(
            args.older_than_days === undefined ? {} : { olderThanDays: args.older_than_days },
          );
          return {
            removed,
            display: `✓ trash: ${removed} entr${removed === 1 ? 'y' : 'ies'} deleted for good`,
          };
        }
      }
    },
  });
}

/**
 * Plugin 'trash': the per-project trash the terminal's (and, with `safeRm`, the cli's) `rm` moves
 * files into, provided to them as `TRASH_SERVICE`, and the model tool `trash` (list / restore /
 * empty). The terminal and cli plugins name it as a partner, so it is exposed with them.
 */
export const trashPlugin = definePlugin<TrashConfig>({
  name: 'trash',
  version: '0.0.0',
  description: "The project's trash behind safe rm: list, restore and empty it",
  configSchema: trashConfigSchema,
  setup(ctx) {
    const dir = ctx.config.dir ? resolve(ctx.env.cwd, ctx.config.dir) : defaultTrashDir(ctx.env.cwd);
    const store = new TrashStore({ dir, logger: ctx.logger });
    ctx.provide(TRASH_SERVICE, store);
    ctx.reportStatus('trash', () => ({ dir }));
    return {
      tools: [createTrashTool(store, ctx.config, ctx.env.cwd)],
      instructions:
        "rm does not delete: it moves files and directories into the project's trash. To undo an rm, call trash({ action: 'list' }) and trash({ action: 'restore', id }). " +
        'Only `rm` typed as a command is covered: `command rm`, `/bin/rm`, `xargs rm`, `find -delete` and scripts delete for good.',
    };
  },
});

export default trashPlugin;
