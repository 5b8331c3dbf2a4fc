import { randomBytes } from 'node:crypto';
import type { ToolCallContext } from '@conch/core';
import { findEnvPids, sigkillAllSync } from '@conch/process';
import type { CliConfigInput } from '../config.js';
import { runCommand } from '../run-command.js';
import type { TemplateRunner } from './define-command-tool.js';

/**
 * Marks every process of one template call (inherited by the script, its steps and their
 * children), so an abort finds the whole tree at once, escapees (setsid, nohup) included.
 */
export const TEMPLATE_CALL_VARIABLE = 'CONCH_TEMPLATE_CALL';

/** How long an abort waits, at most, for the SIGKILLed processes to be gone. */
const CANCEL_CONFIRM_MS = 100;

/**
 * Runs a template's script with the full cli_based_tool behaviour (process layer, bounded
 * output, background handoff, abort). The cli settings come from the calling plugin's config key
 * `cli` when it has one (template plugins do), else the cli defaults.
 *
 * An abort of the call SIGKILLs the call's whole tree in the abort event itself, with no SIGTERM
 * grace (the call was cancelled), so no process of it is alive when the caller hears of the
 * abort; the process layer's own abort handling then only confirms and sweeps. A run handed off
 * to a background task is no longer the call's: the abort no longer reaches it.
 */
export const cliTemplateRunner: TemplateRunner = async (ctx: ToolCallContext, request) => {
  const config = ctx.config as { cli?: Partial<CliConfigInput> } | undefined;
  const mark = `${process.pid}-${randomBytes(8).toString('hex')}`;
  const cancel = () => {
    const left = killMarked(mark);
    if (left.length > 0)
      ctx.logger.warn({ pids: left }, 'template abort: processes still alive after SIGKILL');
  };
  ctx.signal.addEventListener('abort', cancel, { once: true });
  try {
    return (await runCommand(
      ctx,
      {
        command: request.command,
        cwd: request.cwd,
        env: { ...request.env, [TEMPLATE_CALL_VARIABLE]: mark },
        label: request.label,
        ...(request.timeoutSec === undefined ? {} : { timeoutSec: request.timeoutSec }),
      },
      config?.cli,
      // The gate judged the template's steps; what runs is the plumbing script around them.
      { judgedElsewhere: true },
    )) as unknown as Awaited<ReturnType<TemplateRunner>>;
  } finally {
    ctx.signal.removeEventListener('abort', cancel);
  }
};

/**
 * SIGKILLs every process carrying the mark (rescanning for what they forked meanwhile, and for a
 * process that was mid-exec) and waits, synchronously and at most CANCEL_CONFIRM_MS, until they are
 * gone. Returns the pids still alive.
 */
function killMarked(mark: string): number[] {
  return sigkillAllSync(
    (execing) => findEnvPids(TEMPLATE_CALL_VARIABLE, mark, { execing }),
    CANCEL_CONFIRM_MS,
  );
}
