import type { ToolCallContext } from '@conch/core';
import type { CliConfigInput } from '../config.js';
import { runCommand } from '../run-command.js';
import type { TemplateRunner } from './define-command-tool.js';

/**
 * Runs a template's script with the full cli_based_tool behaviour (process layer, bounded
 * output, background handoff, abort). The cli settings come from the calling plugin's config key
 * `cli` when it has one (template plugins do), else the cli defaults.
 */
export const cliTemplateRunner: TemplateRunner = (ctx: ToolCallContext, request) => {
  const config = ctx.config as { cli?: Partial<CliConfigInput> } | undefined;
  return runCommand(
    ctx,
    {
      command: request.command,
      cwd: request.cwd,
      env: request.env,
      label: request.label,
      ...(request.timeoutSec === undefined ? {} : { timeoutSec: request.timeoutSec }),
    },
    config?.cli,
    // The gate judged the template's steps; what runs is the plumbing script around them.
    { judgedElsewhere: true },
  ) as unknown as ReturnType<TemplateRunner>;
};
