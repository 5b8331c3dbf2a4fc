import {
  ARGUMENT_BYTES,
  BACKGROUND_SERVICE,
  compactText,
  compileWaitFor,
  definePlugin,
  defineTool,
  oneLine,
  type BackgroundTaskInfo,
  type PluginContext,
  waitForPatternSchema,
} from '@conch/core';
import { z } from 'zod';
import { BackgroundTasks, isFinal } from './background-tasks.js';
import { evictedTaskMessage, unknownTaskMessage } from './unknown-task-error.js';

/** The byte limits of the task tools' strings (checked before any work): a task id 256, a wait_for pattern 4096. */
export const TASK_ARGUMENT_LIMITS = {
  fields: { task_id: ARGUMENT_BYTES.id, wait_for: ARGUMENT_BYTES.pattern },
} as const;

export const backgroundConfigSchema = z.strictObject({
  maxWorkers: z.number().int().min(1).max(64).default(4).describe('tasks running at once; the rest queue'),
  historyLimit: z
    .number()
    .int()
    .min(1)
    .default(100)
    .describe('finished tasks kept after their result was returned (the longest ago returned go first)'),
  unreadLimit: z
    .number()
    .int()
    .min(1)
    .default(1000)
    .describe('finished tasks kept whose result was never read (oldest evicted first past it)'),
  maxWaitSeconds: z.number().min(0).default(300).describe('longest wait_seconds a model may ask for'),
  readLimit: z
    .number()
    .int()
    .min(256)
    .default(20_000)
    .describe('default bytes per read_background_output page'),
});

export type BackgroundConfig = z.output<typeof backgroundConfigSchema>;

/** How long check_background_task waits with wait_for when wait_seconds is not given. */
const DEFAULT_WAIT_FOR_SECONDS = 30;

const waitForSchema = waitForPatternSchema().optional();

/** `display` of a task: `<id> running 12.3s`, `✓ <id> completed: ✓ exit=0`, `✗ <id> failed: …`. */
function taskDisplay(info: BackgroundTaskInfo): string {
  const seconds = elapsedSeconds(info);
  if (!isFinal(info.status)) return `${info.id} ${info.status}${seconds === undefined ? '' : ` ${seconds}s`}`;
  const mark = info.status === 'completed' ? '✓' : info.status === 'failed' ? '✗' : '';
  const inner = info.result?.display;
  const what = typeof inner === 'string' ? `: ${inner}` : '';
  return `${mark ? `${mark} ` : ''}${info.id} ${info.status}${what}`;
}

const round1 = (ms: number) => Math.round(ms / 100) / 10;

function elapsedSeconds(info: { elapsedMs?: number }): number | undefined {
  return info.elapsedMs === undefined ? undefined : round1(info.elapsedMs);
}

function tools(ctx: PluginContext<BackgroundConfig>, service: BackgroundTasks) {
  const unknown = (taskId: string) => {
    const evicted = service.evictedInfo(taskId);
    if (!evicted) {
      return {
        task_id: taskId,
        error: unknownTaskMessage(taskId, service.ids()),
        error_code: 'UNKNOWN_TASK',
      };
    }
    return {
      task_id: taskId,
      status: evicted.status,
      command: evicted.command,
      ...(evicted.returncode === undefined ? {} : { returncode: evicted.returncode }),
      ...(evicted.outputFile ? { output_file: evicted.outputFile } : {}),
      error: evictedTaskMessage(evicted),
      error_code: 'TASK_EVICTED',
    };
  };

  const check = defineTool({
    name: 'check_background_task',
    describeCall: (args) => {
      const wait = [
        ...(args.wait_for !== undefined
          ? [typeof args.wait_for === 'string' ? `until /${compactText(args.wait_for, 30)}/` : 'until match']
          : []),
        ...(args.wait_seconds ? [`wait ${args.wait_seconds}s`] : []),
      ];
      return `check_background_task(${[args.task_id, ...wait].join(', ')})`;
    },
    description:
      'Check a background task started by cli_based_tool (its background_task_id). Returns status ' +
      '(queued, running, completed, failed, cancelled) and, once finished, the result ' +
      '{ stdout, stderr, returncode, ... }. Pass wait_seconds to block until the task finishes or the ' +
      'wait ends, instead of polling. Pass wait_for (a regex) to return as soon as the task prints a matching ' +
      'line (a server ready to take requests) with wait_for_matched: true, or wait_for_matched: false when the wait ended first.',
    argumentLimits: TASK_ARGUMENT_LIMITS,
    inputSchema: z.strictObject({
      task_id: z.string().min(1).describe('the background_task_id returned by cli_based_tool'),
      wait_seconds: z
        .number()
        .min(0)
        .max(ctx.config.maxWaitSeconds)
        .optional()
        .describe(
          `seconds to wait for the task to finish (0..${ctx.config.maxWaitSeconds}); default 0, or ${Math.min(DEFAULT_WAIT_FOR_SECONDS, ctx.config.maxWaitSeconds)} with wait_for`,
        ),
      wait_for: waitForSchema.describe(
        'a regular expression (JavaScript syntax, case-insensitive): return as soon as the task prints a line matching it, e.g. "listening on|ready in" for a dev server, instead of waiting for the task to end',
      ),
    }),
    annotations: { readOnlyHint: true, idempotentHint: true },
    async execute(args, call) {
      if (!service.get(args.task_id)) return unknown(args.task_id);
      if (args.wait_for !== undefined) {
        const seconds = args.wait_seconds ?? Math.min(DEFAULT_WAIT_FOR_SECONDS, ctx.config.maxWaitSeconds);
        const waited = await service.waitForOutput(
          args.task_id,
          compileWaitFor(args.wait_for),
          seconds * 1000,
          call.signal,
        );
        const info = waited.info;
        const base = {
          task_id: info.id,
          status: info.status,
          command: info.command,
          ...(elapsedSeconds(info) === undefined ? {} : { elapsed_seconds: elapsedSeconds(info) }),
          wait_for_matched: waited.matched,
          ...(waited.line === undefined ? {} : { matched_line: waited.line }),
        };
        if (isFinal(info.status)) {
          return {
            ...base,
            result: info.result ?? {},
            ...(waited.matched
              ? {}
              : { message: `The task ended (${info.status}) without printing a line matching wait_for.` }),
            display: `${waited.matched ? '✓ matched' : '✗ no match'}: ${info.id} ${info.status}`,
          };
        }
        return {
          ...base,
          output_bytes: info.outputBytes ?? 0,
          ...(info.lastLine ? { last_line: info.lastLine } : {}),
          message: waited.matched
            ? 'Its output matched wait_for; the task keeps running. read_background_output shows its output; cancel_background_task stops it.'
            : info.status === 'queued'
              ? `Still queued after ${seconds}s (no free worker), so nothing matched yet. Check again with wait_for.`
              : `No output matched wait_for within ${seconds}s; the task is still running. Check again (with wait_for), read_background_output to see what it printed, or cancel_background_task.`,
          display: waited.matched
            ? `✓ matched: ${oneLine(waited.line ?? '')}`
            : `… no match in ${seconds}s: ${info.id} ${info.status}`,
        };
      }
      const info = await service.wait(args.task_id, (args.wait_seconds ?? 0) * 1000, call.signal);
      const base = {
        task_id: info.id,
        status: info.status,
        command: info.command,
        ...(elapsedSeconds(info) === undefined ? {} : { elapsed_seconds: elapsedSeconds(info) }),
      };
      const display = taskDisplay(info);
      if (isFinal(info.status)) return { ...base, result: info.result ?? {}, display };
      if (info.status === 'queued') {
        return {
          ...base,
          message: `Queued: waiting for a free worker (${service.runningCount} of ${service.maxWorkers} busy). Check again with wait_seconds.`,
          display,
        };
      }
      return {
        ...base,
        output_bytes: info.outputBytes ?? 0,
        ...(info.lastLine ? { last_line: info.lastLine } : {}),
        message:
          'Still running. Call check_background_task with wait_seconds to wait for it, read_background_output to read its output so far, or cancel_background_task to stop it.',
        display,
      };
    },
  });

  const list = defineTool({
    name: 'list_background_tasks',
    describeCall: () => 'list_background_tasks()',
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
        display: `${tasks.length} task${tasks.length === 1 ? '' : 's'}, ${service.runningCount} running`,
      };
    },
  });

  const read = defineTool({
    name: 'read_background_output',
    describeCall: (args) =>
      `read_background_output(${args.task_id}${args.offset ? `, from byte ${args.offset}` : ''})`,
    description:
      'Read the output (stdout and stderr interleaved) of a background task in pages, running or finished. ' +
      'Start at offset 0 and pass next_offset to continue; nothing is lost, even beyond the truncated result.',
    argumentLimits: TASK_ARGUMENT_LIMITS,
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
      if (logs.unavailable) {
        const result = info.result as Record<string, unknown> | undefined;
        const code =
          typeof result?.error_code === 'string' && result.error_code.startsWith('OUTPUT_')
            ? result.error_code
            : 'OUTPUT_NOT_SAVED';
        const diskFull =
          code === 'OUTPUT_TRUNCATED_DISK_FULL' || /the disk is full/.test(String(result?.error ?? ''));
        return {
          task_id: info.id,
          status: info.status,
          output: '',
          offset: logs.offset,
          next_offset: logs.offset,
          total_bytes: logs.totalBytes,
          has_more: false,
          // A file that kept nothing (OUTPUT_NOT_SAVED) is not named: there is nothing to read in it.
          ...(logs.outputFile && code !== 'OUTPUT_NOT_SAVED' ? { output_file: logs.outputFile } : {}),
          error_code: code,
          error:
            `Bytes ${logs.offset}–${logs.totalBytes} of this task's output were never saved` +
            `${diskFull ? ' (the disk filled up)' : ''}, so they cannot be read; ` +
            "what is left is the start and end in the task's result (check_background_task). " +
            'If the missing part matters, rerun with the output filtered or redirected into a file in the workspace.',
          display: `✗ ${info.id} ${info.status}: bytes ${logs.offset}–${logs.totalBytes} not saved (${code})`,
        };
      }
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
        display: `${info.id} ${info.status}: bytes ${logs.offset}–${logs.nextOffset} of ${logs.totalBytes}`,
      };
    },
  });

  const cancel = defineTool({
    name: 'cancel_background_task',
    describeCall: (args) => `cancel_background_task(${args.task_id})`,
    description:
      'Cancel a background task: a queued task never starts; a running one is killed with its whole process tree.',
    argumentLimits: TASK_ARGUMENT_LIMITS,
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
          display: `${before.id} already ${before.status}`,
        };
      }
      await service.kill(args.task_id);
      const after = service.get(args.task_id)!;
      return {
        task_id: after.id,
        status: after.status,
        message: `Task cancelled (was ${before.status}).`,
        result: after.result ?? {},
        display: `${after.id} ${after.status} (was ${before.status})`,
      };
    },
  });

  return [check, list, read, cancel];
}

/**
 * Plugin 'background': tasks started by other tools (cli_based_tool) run here, at most
 * `maxWorkers` at once, and the model queries them by handle. Exposed automatically with the cli
 * plugin. Host API: `registry.resolve(BACKGROUND_SERVICE)` (list, get, kill, killAll, logs,
 * whenFinished).
 */
export const backgroundPlugin = definePlugin<BackgroundConfig>({
  name: 'background',
  version: '0.0.0',
  description: 'Background task queue with handles: check, list, read output, cancel',
  configSchema: backgroundConfigSchema,
  setup(ctx) {
    const service = new BackgroundTasks({
      maxWorkers: ctx.config.maxWorkers,
      historyLimit: ctx.config.historyLimit,
      unreadLimit: ctx.config.unreadLimit,
      events: ctx.events,
      logger: ctx.logger,
    });
    ctx.provide(BACKGROUND_SERVICE, service);
    return {
      tools: tools(ctx, service),
      instructions: [
        'Background tasks: when cli_based_tool returns { background_task_id, status: "running" }, the command keeps running in the background.',
        '- check_background_task({ task_id, wait_seconds }) waits up to wait_seconds for it to finish and returns its result; prefer one call with wait_seconds (e.g. 30) over repeated polling.',
        '- For a server or watcher, check_background_task({ task_id, wait_seconds: 60, wait_for: "listening on|ready in" }) returns as soon as it prints a matching line (wait_for_matched: true) instead of waiting for it to end.',
        '- read_background_output({ task_id, offset }) pages through its full output (use next_offset); list_background_tasks shows every task; cancel_background_task stops one and everything it started.',
        `- At most ${ctx.config.maxWorkers} tasks run at once; more are queued.`,
      ].join('\n'),
      dispose: () => service.dispose(),
    };
  },
});

export default backgroundPlugin;
