import { definePlugin, defineTool, TOKENS, type PluginContext } from '@conch/core';
import { z } from 'zod';
import { BackgroundTasks, isFinal } from './background-tasks.js';
import { unknownTaskMessage } from './unknown-task-error.js';

export const backgroundConfigSchema = z.strictObject({
  maxWorkers: z.number().int().min(1).max(64).default(4).describe('tasks running at once; the rest queue'),
  historyLimit: z.number().int().min(1).default(100).describe('finished tasks kept (oldest evicted first)'),
  maxWaitSeconds: z.number().min(0).default(300).describe('longest wait_seconds a model may ask for'),
  readLimit: z
    .number()
    .int()
    .min(256)
    .default(20_000)
    .describe('default bytes per read_background_output page'),
});

export type BackgroundConfig = z.output<typeof backgroundConfigSchema>;

const services = new WeakMap<object, BackgroundTasks>();

function serviceOf(ctx: PluginContext<BackgroundConfig>): BackgroundTasks {
  let service = services.get(ctx);
  if (!service) {
    service = new BackgroundTasks({
      maxWorkers: ctx.config.maxWorkers,
      historyLimit: ctx.config.historyLimit,
      events: ctx.events,
      logger: ctx.logger,
    });
    services.set(ctx, service);
  }
  return service;
}

const round1 = (ms: number) => Math.round(ms / 100) / 10;

function elapsedSeconds(info: { startedAt?: number; endedAt?: number }): number | undefined {
  if (info.startedAt === undefined) return undefined;
  return round1((info.endedAt ?? Date.now()) - info.startedAt);
}

function tools(ctx: PluginContext<BackgroundConfig>) {
  const service = serviceOf(ctx);
  const unknown = (taskId: string) => ({ task_id: taskId, error: unknownTaskMessage(taskId, service.ids()) });

  const check = defineTool({
    name: 'check_background_task',
    description:
      'Check a background task started by cli_based_tool (its background_task_id). Returns status ' +
      '(queued, running, completed, failed, cancelled) and, once finished, the result ' +
      '{ stdout, stderr, returncode, ... }. Pass wait_seconds to block until the task finishes or the ' +
      'wait ends, instead of polling.',
    inputSchema: z.strictObject({
      task_id: z.string().min(1).describe('the background_task_id returned by cli_based_tool'),
      wait_seconds: z
        .number()
        .min(0)
        .max(ctx.config.maxWaitSeconds)
        .optional()
        .describe(`seconds to wait for the task to finish (0..${ctx.config.maxWaitSeconds}); default 0`),
    }),
    annotations: { readOnlyHint: true, idempotentHint: true },
    async execute(args, call) {
      if (!service.get(args.task_id)) return unknown(args.task_id);
      const info = await service.wait(args.task_id, (args.wait_seconds ?? 0) * 1000, call.signal);
      const base = {
        task_id: info.id,
        status: info.status,
        command: info.command,
        ...(elapsedSeconds(info) === undefined ? {} : { elapsed_seconds: elapsedSeconds(info) }),
      };
      if (isFinal(info.status)) return { ...base, result: info.result ?? {} };
      if (info.status === 'queued') {
        return {
          ...base,
          message: `Queued: waiting for a free worker (${service.runningCount} of ${service.maxWorkers} busy). Check again with wait_seconds.`,
        };
      }
      return {
        ...base,
        output_bytes: info.outputBytes ?? 0,
        ...(info.lastLine ? { last_line: info.lastLine } : {}),
        message:
          'Still running. Call check_background_task with wait_seconds to wait for it, read_background_output to read its output so far, or cancel_background_task to stop it.',
      };
    },
  });

  const list = defineTool({
    name: 'list_background_tasks',
    description: 'List background tasks (running, queued and recently finished) with their ids and status.',
    inputSchema: z.strictObject({}),
    annotations: { readOnlyHint: true, idempotentHint: true },
    execute() {
      const tasks = service.list().map((t) => ({
        task_id: t.id,
        status: t.status,
        command: t.command,
        ...(elapsedSeconds(t) === undefined ? {} : { elapsed_seconds: elapsedSeconds(t) }),
        ...(t.result && 'returncode' in t.result ? { returncode: t.result.returncode } : {}),
      }));
      return {
        tasks,
        running: service.runningCount,
        max_workers: service.maxWorkers,
        ...(tasks.length === 0 ? { message: 'No background tasks.' } : {}),
      };
    },
  });

  const read = defineTool({
    name: 'read_background_output',
    description:
      'Read the output (stdout and stderr interleaved) of a background task in pages, running or finished. ' +
      'Start at offset 0 and pass next_offset to continue; nothing is lost, even beyond the truncated result.',
    inputSchema: z.strictObject({
      task_id: z.string().min(1).describe('the background task id'),
      offset: z.number().int().min(0).optional().describe('byte offset to start at (default 0)'),
      limit: z
        .number()
        .int()
        .min(1)
        .max(1_000_000)
        .optional()
        .describe(`bytes to read (default ${ctx.config.readLimit})`),
    }),
    annotations: { readOnlyHint: true, idempotentHint: true },
    async execute(args) {
      const info = service.get(args.task_id);
      if (!info) return unknown(args.task_id);
      const logs = await service.logs(args.task_id, {
        offset: args.offset ?? 0,
        limit: args.limit ?? ctx.config.readLimit,
      });
      const hasMore = logs.nextOffset < logs.totalBytes;
      return {
        task_id: info.id,
        status: info.status,
        output: logs.text,
        offset: logs.offset,
        next_offset: logs.nextOffset,
        total_bytes: logs.totalBytes,
        has_more: hasMore,
        ...(logs.outputFile ? { output_file: logs.outputFile } : {}),
        ...(hasMore
          ? { message: `More output: call again with offset ${logs.nextOffset}.` }
          : isFinal(info.status)
            ? {}
            : { message: 'End of output so far; the task is still running.' }),
      };
    },
  });

  const cancel = defineTool({
    name: 'cancel_background_task',
    description:
      'Cancel a background task: a queued task never starts; a running one is killed with its whole process tree.',
    inputSchema: z.strictObject({ task_id: z.string().min(1).describe('the background task id') }),
    annotations: { destructiveHint: true, idempotentHint: true },
    async execute(args) {
      const before = service.get(args.task_id);
      if (!before) return unknown(args.task_id);
      if (isFinal(before.status)) {
        return {
          task_id: before.id,
          status: before.status,
          message: `Task already ${before.status}; nothing to cancel.`,
          result: before.result ?? {},
        };
      }
      await service.kill(args.task_id);
      const after = service.get(args.task_id)!;
      return {
        task_id: after.id,
        status: after.status,
        message: `Task cancelled (was ${before.status}).`,
        result: after.result ?? {},
      };
    },
  });

  return [check, list, read, cancel];
}

/**
 * Plugin 'background': tasks started by other tools (cli_based_tool) run here, at most
 * `maxWorkers` at once, and the model queries them by handle. Exposed automatically with the cli
 * plugin. Host API: `registry.resolve(TOKENS.BackgroundService)` (list, get, kill, killAll, logs).
 */
export const backgroundPlugin = definePlugin<BackgroundConfig>({
  name: 'background',
  version: '0.0.0',
  description: 'Background task queue with handles: check, list, read output, cancel',
  configSchema: backgroundConfigSchema,
  register(ctx) {
    const service = serviceOf(ctx);
    ctx.container.register(TOKENS.BackgroundService, { useValue: service });
    ctx.onDispose(() => service.dispose());
  },
  tools: (ctx) => tools(ctx),
  systemInstructions: (ctx) =>
    [
      'Background tasks: when cli_based_tool returns { background_task_id, status: "running" }, the command keeps running in the background.',
      '- check_background_task({ task_id, wait_seconds }) waits up to wait_seconds for it to finish and returns its result; prefer one call with wait_seconds (e.g. 30) over repeated polling.',
      '- read_background_output({ task_id, offset }) pages through its full output (use next_offset); list_background_tasks shows every task; cancel_background_task stops one and everything it started.',
      `- At most ${ctx.config.maxWorkers} tasks run at once; more are queued.`,
    ].join('\n'),
});

export default backgroundPlugin;
