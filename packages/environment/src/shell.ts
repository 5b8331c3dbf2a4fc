import { randomUUID } from 'node:crypto';
import { normalizeConfigKeys, type PluginContext, type ToolCallContext } from '@conch/core';
import { runCommand, type CliConfigInput, type CliResult } from '@conch/cli';
import type { ProcessManager } from '@conch/process';
import { InvalidEnvironmentOptionError } from './errors/invalid-environment-option-error.js';

export interface ShellRunOptions {
  /** Arguments passed to the executable named by `command`, never shell-interpreted. */
  args?: readonly string[];
  /** Working directory, relative to the environment's working dir. */
  cwd?: string;
  /** Variables added to this command's environment. */
  env?: Readonly<Record<string, string>>;
  /** Seconds after which the command's whole tree is killed. Default 120. */
  timeoutSec?: number;
  signal?: AbortSignal;
}

/** What `shell.run` returns: the cli runner's result (`stdout`, `stderr`, `returncode`, `output_file` …). */
export type ShellResult = CliResult;

/**
 * The host's shell: one command per call through the cli runner (`runCommand` of @conch/cli),
 * never a model tool call. It gets what cli_based_tool gets — one plan per command (argv for a
 * simple command, bash for the rest), stdin closed, a non-interactive environment, bounded output
 * with every byte in `output_file`, the process manager's ownership (nothing outlives the
 * environment), the kernel wall's protected paths when a permission plugin is exposed — but it
 * does not ask the permission gate: the host is the one asking. It never becomes a background
 * task. (The terminal plugin's PTY sessions are for interactive and long-lived programs; a host
 * that runs `git status` wants an exit code and the output, not a session.)
 */
export interface EnvironmentShell {
  run(command: string, options?: ShellRunOptions): Promise<ShellResult>;
}

export const DEFAULT_SHELL_TIMEOUT_SEC = 120;

export function createShell(deps: {
  scope: PluginContext;
  manager: ProcessManager;
  /** The cli plugin's config from the environment's plugins map (extraPaths, env, shell …). */
  cliConfig: Record<string, unknown> | undefined;
  /** Fires when the environment closes: running commands are killed. */
  closing: AbortSignal;
}): EnvironmentShell {
  const normalized = normalizeConfigKeys(deps.cliConfig ?? {});
  if (!normalized.ok) {
    throw new InvalidEnvironmentOptionError(
      `plugins.cli.${normalized.key}`,
      `one spelling of the key (given both '${normalized.key}' and '${normalized.alias}')`,
      'both',
    );
  }
  // One object for every call: the cli runner caches its parsed runtime per config object.
  const cliConfig = normalized.value as Partial<CliConfigInput>;
  return {
    async run(command, options = {}) {
      if (typeof command !== 'string' || command.trim().length === 0) {
        throw new InvalidEnvironmentOptionError('shell.run command', 'a non-empty command line', command);
      }
      const timeoutSec = options.timeoutSec ?? DEFAULT_SHELL_TIMEOUT_SEC;
      if (!(typeof timeoutSec === 'number' && timeoutSec > 0)) {
        throw new InvalidEnvironmentOptionError(
          'shell.run timeoutSec',
          'a positive number of seconds',
          timeoutSec,
        );
      }
      const signal = options.signal ? AbortSignal.any([options.signal, deps.closing]) : deps.closing;
      const scope = deps.scope;
      const ctx: ToolCallContext = {
        pluginName: scope.pluginName,
        config: scope.config,
        logger: scope.logger,
        events: scope.events,
        env: scope.env,
        resolveOptional: scope.resolveOptional,
        isExposed: scope.isExposed,
        callId: randomUUID(),
        toolName: 'environment.shell',
        signal,
        reportProgress: () => undefined,
      };
      const result = await runCommand(
        ctx,
        {
          command,
          ...(options.args ? { args: options.args } : {}),
          ...(options.cwd ? { cwd: options.cwd } : {}),
          ...(options.env ? { env: options.env } : {}),
          timeoutSec,
          background: false,
        },
        cliConfig,
        { manager: deps.manager },
      );
      // background: false never hands the command to a task; the cast narrows the union.
      return result as ShellResult;
    },
  };
}
