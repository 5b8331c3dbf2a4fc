import { ConchError, definePlugin, defineTool, TOKENS, type PluginContext } from '@conch/core';
import { resolve } from 'node:path';
import { ensureProcessManager, findBwrap } from '@conch/process';
import { z } from 'zod';
import { cliConfigSchema, type CliConfig } from './config.js';
import { cliInstructions } from './instructions.js';
import { getShellParser, runCommand } from './run-command.js';

export const cliToolInputSchema = z.strictObject({
  command: z
    .string()
    .min(1)
    .describe('The shell command to execute, e.g. "ls -la" or "find . -name \'*.py\' | head -20"'),
  args: z
    .array(z.string())
    .optional()
    .describe('Optional argument list passed to the executable in `command` without shell interpretation'),
  cwd: z
    .string()
    .min(1)
    .optional()
    .describe('Working directory (relative to the workspace); default the workspace'),
  timeout: z.number().positive().optional().describe('Seconds after which the command is killed'),
  background: z
    .boolean()
    .optional()
    .describe('true: run as a background task and return a task id at once; false: wait in the foreground'),
});

export type CliToolInput = z.output<typeof cliToolInputSchema>;

/**
 * Plugin 'cli': the tool cli_based_tool. Exposing it also exposes the 'background' plugin (with
 * maxWorkers = backgroundMaxWorkers) unless `background: false` or it is not installed.
 */
export const cliPlugin = definePlugin<CliConfig>({
  name: 'cli',
  version: '0.0.0',
  description: 'Run shell commands: direct or shell mode, bounded output, auto-backgrounding',
  configSchema: cliConfigSchema,
  partners: [
    {
      plugin: 'background',
      config: (c) => ({ maxWorkers: c.backgroundMaxWorkers }),
      when: (c) => c.background !== false,
    },
  ],
  register(ctx) {
    if (ctx.config.sandbox !== false && !findBwrap()) {
      throw new ConchError({
        code: 'SANDBOX_UNAVAILABLE',
        message:
          "cli config 'sandbox': expected bubblewrap (bwrap) on PATH to sandbox commands; it was not found. Install it (apt-get install bubblewrap) or set sandbox: false.",
      });
    }
    // The registry's process manager exists from now on (its dispose kills what cli started).
    ensureProcessManager(ctx);
    // Warm the WASM parser so the first call does not pay for loading it.
    void getShellParser().catch(() => undefined);
  },
  tools: (ctx: PluginContext<CliConfig>) => [
    defineTool({
      name: 'cli_based_tool',
      description:
        'Execute a shell command on the local machine and return { stdout, stderr, returncode }. ' +
        'Supports pipes, redirections and chaining (run via /bin/sh); simple commands run directly. ' +
        'stdin is closed. Large output is truncated to its start and end with the full output in output_file. ' +
        'Long-running commands return a background_task_id to query with check_background_task.',
      inputSchema: cliToolInputSchema,
      annotations: { destructiveHint: true, openWorldHint: true },
      permission: (args) => ({
        kind: 'command',
        tool: 'cli_based_tool',
        command: args.command,
        ...(args.args ? { args: args.args } : {}),
        cwd: resolve(ctx.config.cwd ? resolve(ctx.env.cwd, ctx.config.cwd) : ctx.env.cwd, args.cwd ?? '.'),
      }),
      execute: (args, call) =>
        runCommand(call, {
          command: args.command,
          ...(args.args ? { args: args.args } : {}),
          ...(args.cwd ? { cwd: args.cwd } : {}),
          ...(args.timeout !== undefined ? { timeoutSec: args.timeout } : {}),
          ...(args.background !== undefined ? { background: args.background } : {}),
        }),
    }),
  ],
  systemInstructions: (ctx) =>
    cliInstructions(
      ctx.config,
      ctx.config.background !== false && ctx.resolveOptional(TOKENS.BackgroundService) !== undefined,
    ),
});

export default cliPlugin;
