import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  TOKENS,
  type BackgroundRun,
  type BackgroundRunOutcome,
  type BackgroundService,
  type ToolCallContext,
} from '@conch/core';
import {
  BubblewrapExecutor,
  cleanForModel,
  decodeUtf8,
  ensureProcessManager,
  type Executor,
  type ManagedProcess,
} from '@conch/process';
import { loadShellParser, type ParsedCommand, type ShellParser } from '@conch/shell-syntax';
import {
  cliConfigSchema,
  DEFAULT_CLI_CONFIG,
  type CliConfig,
  type CliConfigInput,
  type SlowPattern,
} from './config.js';
import { commandEnv } from './env.js';
import {
  formatResult,
  type CliBackgroundResult,
  type CliMode,
  type CliResult,
  type FormatOptions,
} from './format-result.js';
import { DEFAULT_SLOW_PATTERNS, estimateSeconds } from './slow-patterns.js';

export interface RunCommandRequest {
  /** A command line. Parsed: one simple literal command runs directly (argv), anything else in the shell. */
  command: string;
  /** Arguments passed separately to the executable named by `command` (never shell-interpreted). */
  args?: readonly string[];
  /** Working directory, relative to the configured cwd (default: the registry's cwd). */
  cwd?: string;
  /** Variables added to this command's environment (over the config's `env`). */
  env?: Readonly<Record<string, string>>;
  /** Hard limit in seconds, foreground or background. */
  timeoutSec?: number;
  /**
   * true: start as a background task now; false: never background (the limit is `timeoutSec`, else
   * `defaultTimeout`, else the threshold); undefined: automatic (estimate, then promotion).
   */
  background?: boolean;
  /** Force a mode: 'shell' runs `command` as a script even if it is a simple command. Default 'auto'. */
  mode?: 'auto' | 'shell';
  /** How task lists and events show the command (default: `command`). */
  label?: string;
}

export type RunCommandResult = CliResult | CliBackgroundResult;

let parserPromise: Promise<ShellParser> | undefined;

/** The shared bash parser (loaded once per process). */
export function getShellParser(): Promise<ShellParser> {
  parserPromise ??= loadShellParser().catch((error: unknown) => {
    parserPromise = undefined;
    throw error;
  });
  return parserPromise;
}

const parsedConfigs = new WeakMap<object, CliConfig>();
const patternTables = new WeakMap<CliConfig, readonly SlowPattern[]>();

const sandboxes = new WeakMap<CliConfig, Map<string, Executor>>();

/** The bubblewrap executor of a sandboxed config (one per workspace), or undefined. */
export function sandboxExecutor(cfg: CliConfig, workspace: string): Executor | undefined {
  if (cfg.sandbox === false) return undefined;
  let byWorkspace = sandboxes.get(cfg);
  if (!byWorkspace) sandboxes.set(cfg, (byWorkspace = new Map()));
  let executor = byWorkspace.get(workspace);
  if (!executor) {
    const extra = cfg.sandbox === true ? {} : cfg.sandbox;
    executor = new BubblewrapExecutor({
      writable: [workspace, ...(extra.writable ?? []).map((dir) => resolve(workspace, dir))],
      ...(extra.network === undefined ? {} : { network: extra.network }),
    });
    byWorkspace.set(workspace, executor);
  }
  return executor;
}

function slowPatternsOf(cfg: CliConfig): readonly SlowPattern[] {
  let table = patternTables.get(cfg);
  if (!table) {
    table = cfg.slowPatterns.length ? [...DEFAULT_SLOW_PATTERNS, ...cfg.slowPatterns] : DEFAULT_SLOW_PATTERNS;
    patternTables.set(cfg, table);
  }
  return table;
}

function resolveConfig(
  ctx: ToolCallContext<unknown>,
  override: Partial<CliConfigInput> | undefined,
): CliConfig {
  if (override) {
    let parsed = parsedConfigs.get(override);
    if (!parsed) {
      parsed = cliConfigSchema.parse(override);
      parsedConfigs.set(override, parsed);
    }
    return parsed;
  }
  if (ctx.pluginName === 'cli') return ctx.config as CliConfig;
  return DEFAULT_CLI_CONFIG;
}

/** Quotes a word for /bin/sh so it reaches the command as one literal argument. */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_./:=@%+,-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

interface Plan {
  mode: CliMode;
  file: string;
  args: string[];
  shell: string | undefined;
  parsed: ParsedCommand;
  /** What error messages name. */
  name: string;
}

function plan(parser: ShellParser, request: RunCommandRequest, shell: string): Plan {
  const parsed = parser.parse(request.command);
  const extra = request.args ?? [];
  const direct = request.mode !== 'shell' && !parsed.flags.shellBuiltin ? parsed.direct : undefined;
  if (direct && direct.argv.length > 0) {
    const argv = [...direct.argv, ...extra];
    return { mode: 'direct', file: argv[0]!, args: argv.slice(1), shell: undefined, parsed, name: argv[0]! };
  }
  const script = extra.length > 0 ? `${request.command} ${extra.map(shellQuote).join(' ')}` : request.command;
  const name = parsed.commands[0]?.name ?? request.command.split(/\s+/)[0] ?? request.command;
  return { mode: 'shell', file: script, args: [], shell, parsed, name };
}

function lastLine(proc: ManagedProcess): string | undefined {
  for (const capture of [proc.stdout, proc.stderr]) {
    if (capture.totalBytes === 0) continue;
    const buf =
      capture.truncated || capture.tailBuffer().length > 0 ? capture.tailBuffer() : capture.headBuffer();
    const text = cleanForModel(decodeUtf8(buf.subarray(Math.max(0, buf.length - 1024))));
    const lines = text.split('\n').filter((l) => l.trim().length > 0);
    const last = lines[lines.length - 1];
    if (last) return last.length > 200 ? `${last.slice(0, 200)}…` : last;
  }
  return undefined;
}

function toRun(proc: ManagedProcess, format: FormatOptions): BackgroundRun {
  const combined = proc.combined!;
  const done: Promise<BackgroundRunOutcome> = proc.result.then((result) => {
    const formatted = formatResult(result, format);
    const status: BackgroundRunOutcome['status'] = result.killed
      ? 'cancelled'
      : result.exitCode === 0 && !result.spawnError
        ? 'completed'
        : 'failed';
    return { status, result: formatted };
  });
  return {
    pid: proc.pid,
    done,
    cancel: async () => {
      await proc.kill();
    },
    readOutput: (offset, limit) => combined.read(offset, limit),
    outputBytes: () => combined.totalBytes,
    outputFile: () => combined.path,
    lastLine: () => lastLine(proc),
  };
}

function errorResult(mode: CliMode, error: string): CliResult {
  return { stdout: '', stderr: '', returncode: -1, mode, error };
}

/**
 * Runs one command with the full cli_based_tool behaviour: direct or shell mode from the parse,
 * non-interactive environment with extraPaths, bounded output with head/tail and output_file,
 * actionable errors, abort via `ctx.signal`, and background handoff (estimated-slow commands start
 * as tasks; commands still running at `autoBackgroundThreshold` are promoted without restart;
 * without a background service the threshold is a hard timeout).
 *
 * It does not consult the permission gate: the calling tool's `permission` hook must have asked.
 * `config` overrides the cli defaults (callers outside the cli plugin); inside the cli plugin the
 * plugin's config is used.
 */
export async function runCommand(
  ctx: ToolCallContext<unknown>,
  request: RunCommandRequest,
  config?: Partial<CliConfigInput>,
): Promise<RunCommandResult> {
  const cfg = resolveConfig(ctx, config);
  const parser = await getShellParser();
  const p = plan(parser, request, cfg.shell);
  const baseCwd = cfg.cwd ? resolve(ctx.env.cwd, cfg.cwd) : ctx.env.cwd;
  const cwd = resolve(baseCwd, request.cwd ?? '.');
  try {
    if (!statSync(cwd).isDirectory())
      return errorResult(p.mode, `Not a directory: ${cwd}. Pass an existing directory as cwd.`);
  } catch {
    return errorResult(
      p.mode,
      `No such directory: ${cwd}. Verify the path exists first (ls), or omit cwd to run in ${baseCwd}.`,
    );
  }
  const env = commandEnv({
    extraPaths: cfg.extraPaths,
    configEnv: cfg.env,
    callEnv: request.env,
    cwd: baseCwd,
  });
  const background =
    cfg.background !== false ? ctx.resolveOptional<BackgroundService>(TOKENS.BackgroundService) : undefined;
  const canBackground = background !== undefined && request.background !== false;
  const threshold = cfg.autoBackgroundThreshold;
  const hardSeconds = request.timeoutSec ?? cfg.defaultTimeout;
  const limitSeconds = canBackground
    ? hardSeconds
    : (request.timeoutSec ?? Math.min(cfg.defaultTimeout ?? Infinity, threshold));
  const thresholdAsTimeout =
    !canBackground && request.timeoutSec === undefined && limitSeconds === threshold
      ? background && request.background === false
        ? ('foreground' as const)
        : true
      : false;
  const budgetBytes = Math.max(64 * 1024, cfg.maxOutputChars * 2);
  const label = request.label ?? request.command;
  const format: FormatOptions = {
    maxOutputChars: cfg.maxOutputChars,
    mode: p.mode,
    command: p.name,
    cwd,
    ...(limitSeconds !== undefined && Number.isFinite(limitSeconds) ? { limitSeconds } : {}),
    thresholdAsTimeout,
  };
  const manager = ensureProcessManager(ctx);
  let executor: Executor | undefined;
  try {
    executor = sandboxExecutor(cfg, baseCwd);
  } catch (error) {
    return errorResult(p.mode, (error as Error).message);
  }
  const spawn = (signal: AbortSignal | undefined) =>
    manager.spawn(p.file, p.args, {
      ...(executor ? { executor } : {}),
      cwd,
      env,
      ...(p.shell ? { shell: p.shell } : {}),
      ...(limitSeconds !== undefined && Number.isFinite(limitSeconds)
        ? { timeoutMs: limitSeconds * 1000 }
        : {}),
      ...(signal ? { signal } : {}),
      capture: { headBytes: budgetBytes, tailBytes: budgetBytes, spill: 'combined' },
      label,
    });

  if (canBackground) {
    const estimate = estimateSeconds(p.parsed, slowPatternsOf(cfg));
    if (request.background === true || estimate > threshold) {
      const info = background.submit({
        command: label,
        tool: ctx.toolName,
        idPrefix: 'cli',
        start: () => toRun(spawn(undefined), format),
      });
      const why =
        request.background === true
          ? 'Command started as a background task, as requested'
          : `Command backgrounded due to estimated duration (~${estimate}s, over the ${threshold}s threshold)`;
      return {
        background_task_id: info.id,
        status: info.status === 'queued' ? 'queued' : 'running',
        message: `${why}${info.status === 'queued' ? '; it is queued until a background worker is free' : ''}. Use check_background_task({ task_id: "${info.id}", wait_seconds: 30 }) for its result and read_background_output for its output so far.`,
        mode: p.mode,
      };
    }
  }

  let proc: ManagedProcess;
  try {
    proc = spawn(ctx.signal);
  } catch (error) {
    // Synchronous spawn failures: a NUL byte in an argument, an invalid option.
    return errorResult(p.mode, `Could not start the command: ${(error as Error).message}`);
  }
  if (canBackground) {
    let timer: NodeJS.Timeout | undefined;
    const promoted = await Promise.race([
      proc.result.then(() => false),
      new Promise<boolean>((resolveTimer) => {
        timer = setTimeout(() => resolveTimer(true), threshold * 1000);
      }),
    ]);
    clearTimeout(timer);
    if (promoted && proc.isRunning) {
      proc.detachSignal();
      const info = background.adopt({
        command: label,
        tool: ctx.toolName,
        idPrefix: 'cli',
        run: toRun(proc, format),
      });
      return {
        background_task_id: info.id,
        status: 'running',
        message: `Command still running after ${threshold}s, so it continues as a background task (nothing restarted, no output lost). Use check_background_task({ task_id: "${info.id}", wait_seconds: 30 }) for its result and read_background_output for its output so far.`,
        mode: p.mode,
      };
    }
  }
  return formatResult(await proc.result, format);
}
