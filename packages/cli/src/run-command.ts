import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  BACKGROUND_SERVICE,
  ConchError,
  type BackgroundRun,
  type BackgroundRunOutcome,
  type ToolCallContext,
} from '@conch/core';
import {
  BubblewrapExecutor,
  PROCESS_MANAGER,
  type Executor,
  type LeftoverHandle,
  type ManagedProcess,
  type ProcessManager,
  type ProcessResult,
  type SandboxProfile,
} from '@conch/process';
import { loadShellParser, type ShellParser } from '@conch/shell-syntax';
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
import { sandboxFor, sandboxRefusal } from './kernel-wall.js';
import { planCommand, resolveShell, type CliPlan } from './plan.js';
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

/**
 * What a cli runner resolves once per exposure (or per config given by a caller outside the cli
 * plugin): the parsed config, its slow-pattern table and sandbox executor. Kept in the setup
 * closure of the cli plugin; callers without one get it built per call.
 */
export interface CliRuntime {
  config: CliConfig;
  slowPatterns: readonly SlowPattern[];
  /** The explicit bubblewrap executor of `sandbox: true` configs (per workspace). */
  executor(workspace: string): Executor | undefined;
}

export function cliRuntime(config: CliConfig): CliRuntime {
  const executors = new Map<string, Executor>();
  return {
    config,
    slowPatterns: config.slowPatterns.length
      ? [...DEFAULT_SLOW_PATTERNS, ...config.slowPatterns]
      : DEFAULT_SLOW_PATTERNS,
    executor(workspace) {
      if (config.sandbox === false) return undefined;
      let executor = executors.get(workspace);
      if (!executor) {
        const extra = config.sandbox === true ? {} : config.sandbox;
        executor = new BubblewrapExecutor({
          writable: [workspace, ...(extra.writable ?? []).map((dir) => resolve(workspace, dir))],
          ...(extra.network === undefined ? {} : { network: extra.network }),
        });
        executors.set(workspace, executor);
      }
      return executor;
    },
  };
}

/** A runtime for a config given by a caller outside the cli plugin (templates); cached per object. */
const runtimes = new WeakMap<object, CliRuntime>();
function runtimeFor(
  ctx: ToolCallContext<unknown>,
  override: Partial<CliConfigInput> | undefined,
  given?: CliRuntime,
): CliRuntime {
  if (given) return given;
  const key = override ?? DEFAULT_CLI_CONFIG;
  let runtime = runtimes.get(key);
  if (!runtime) {
    runtime = cliRuntime(override ? cliConfigSchema.parse(override) : DEFAULT_CLI_CONFIG);
    runtimes.set(key, runtime);
  }
  void ctx;
  return runtime;
}

/** The base cwd of a config (the registry's cwd, or the config's cwd relative to it). */
export function baseCwdOf(config: CliConfig, registryCwd: string): string {
  return config.cwd ? resolve(registryCwd, config.cwd) : registryCwd;
}

/** Plans a call from its request: the one plan the gate and the runner share. */
export async function planRequest(
  ctx: ToolCallContext<unknown>,
  request: RunCommandRequest,
  config: CliConfig,
): Promise<CliPlan> {
  const parser = await getShellParser();
  const { shell } = resolveShell(config.shell);
  const cwd = resolve(baseCwdOf(config, ctx.env.cwd), request.cwd ?? '.');
  return planCommand(parser, {
    command: request.command,
    ...(request.args ? { args: request.args } : {}),
    cwd,
    shell,
    ...(request.mode ? { mode: request.mode } : {}),
  });
}

function errorResult(mode: CliMode, error: string, errorCode: string): CliResult {
  return { stdout: '', stderr: '', returncode: -1, mode, error, error_code: errorCode };
}

/** A running process as a background task sees it. */
function toRun(
  proc: ManagedProcess,
  finish: (result: ProcessResult) => Promise<BackgroundRunOutcome>,
): BackgroundRun {
  return {
    get pid() {
      return proc.pid;
    },
    done: proc.result.then(finish),
    cancel: async () => {
      await proc.kill();
    },
    readOutput: (offset, limit) => proc.combined!.read(offset, limit),
    outputBytes: () => proc.combined!.totalBytes,
    outputFile: () => proc.combined!.path,
    lastLine: () => proc.lastLine(),
  };
}

/** Leftovers adopted as a background task: its output is what they write after the command ended. */
function leftoverRun(handle: LeftoverHandle): BackgroundRun {
  return {
    get pid() {
      return handle.pids()[0];
    },
    done: handle.done.then(() => ({
      status: 'completed' as const,
      result: {
        stdout: '',
        stderr: '',
        returncode: 0,
        message: 'Every process the command left running has ended.',
      },
    })),
    cancel: () => handle.kill(),
    readOutput: (offset, limit) => handle.readOutput(offset, limit),
    outputBytes: () => handle.outputBytes(),
    outputFile: () => handle.outputFile(),
    lastLine: () => handle.lastLine(),
  };
}

/**
 * Runs one command with the full cli_based_tool behaviour: the call's plan (direct argv or a bash
 * script), non-interactive environment with extraPaths, the kernel wall the gate's decision calls
 * for, bounded output with head/tail and `output_file` whenever anything is cut, actionable errors
 * with `error_code`, abort via `ctx.signal`, background handoff (estimated-slow commands start as
 * tasks; commands still running at `autoBackgroundThreshold` are promoted without restart), and
 * processes a command leaves running reported and owned (adopted as a background task, or killed).
 *
 * It does not consult the permission gate: the calling tool's `permission` hook must have asked,
 * with the same `plan` when one is given.
 */
export async function runCommand(
  ctx: ToolCallContext<unknown>,
  request: RunCommandRequest,
  config?: Partial<CliConfigInput>,
  options: {
    plan?: CliPlan;
    runtime?: CliRuntime;
    manager?: ProcessManager;
    /**
     * The gate judged another text than the one that runs (templates judge their steps, run a
     * plumbing script): a read-only verdict then does not carry over to the read-only sandbox.
     */
    judgedElsewhere?: boolean;
  } = {},
): Promise<RunCommandResult> {
  const runtime = runtimeFor(ctx, config, options.runtime);
  const cfg = runtime.config;
  const plan = options.plan ?? (await planRequest(ctx, request, cfg));
  const baseCwd = baseCwdOf(cfg, ctx.env.cwd);
  const { cwd } = plan;
  try {
    if (!statSync(cwd).isDirectory())
      return errorResult(
        plan.mode,
        `Not a directory: ${cwd}. Pass an existing directory as cwd.`,
        'INVALID_CWD',
      );
  } catch {
    return errorResult(
      plan.mode,
      `No such directory: ${cwd}. Verify the path exists first (ls), or omit cwd to run in ${baseCwd}.`,
      'INVALID_CWD',
    );
  }
  const env = commandEnv({
    extraPaths: cfg.extraPaths,
    configEnv: cfg.env,
    callEnv: request.env,
    cwd: baseCwd,
  });
  const background = cfg.background !== false ? ctx.resolveOptional(BACKGROUND_SERVICE) : undefined;
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
  const label = request.label ?? plan.line;
  const format: FormatOptions = {
    maxOutputChars: cfg.maxOutputChars,
    mode: plan.mode,
    command: plan.name,
    cwd,
    ...(limitSeconds !== undefined && Number.isFinite(limitSeconds) ? { limitSeconds } : {}),
    thresholdAsTimeout,
  };
  const manager = options.manager ?? ctx.resolveOptional(PROCESS_MANAGER);
  if (!manager)
    throw new ConchError({
      code: 'NO_PROCESS_MANAGER',
      message: `runCommand from tool '${ctx.toolName}': no process manager is provided; call ensureProcessManager(ctx) in the plugin's setup`,
    });
  let executor: Executor | undefined;
  try {
    executor = runtime.executor(baseCwd);
  } catch (error) {
    return errorResult(plan.mode, (error as Error).message, 'SANDBOX_UNAVAILABLE');
  }
  const sandbox: SandboxProfile | undefined = executor
    ? undefined
    : sandboxFor(ctx, options.judgedElsewhere === true);
  const spawn = (signal: AbortSignal | undefined) =>
    plan.mode === 'direct'
      ? manager.spawn(plan.argv![0]!, plan.argv!.slice(1), spawnOptions(signal))
      : manager.spawn(plan.line, [], { ...spawnOptions(signal), shell: plan.shell });
  const spawnOptions = (signal: AbortSignal | undefined) => ({
    ...(executor ? { executor } : {}),
    ...(sandbox ? { sandbox } : {}),
    cwd,
    env,
    ...(limitSeconds !== undefined && Number.isFinite(limitSeconds)
      ? { timeoutMs: limitSeconds * 1000 }
      : {}),
    ...(signal ? { signal } : {}),
    capture: { headBytes: budgetBytes, tailBytes: budgetBytes, spill: 'combined' as const },
    keepLeftoverOutput: true,
    label,
  });

  /** The final result of a process: formatted, every cut byte in a file, leftovers owned. */
  const finish = async (proc: ManagedProcess, result: ProcessResult): Promise<CliResult> => {
    let outcome = result;
    let out = formatResult(outcome, format);
    if (out.truncated && !out.output_file) {
      // Cut by characters though the bytes fit in memory: every byte goes to a file all the same.
      const file = await proc.materializeOutput();
      if (file) {
        outcome = { ...outcome, outputFile: file };
        out = formatResult(outcome, format);
      }
    }
    const refusal = sandboxRefusal(result);
    if (refusal) {
      out.error = out.error ? `${out.error} ${refusal}` : refusal;
      out.error_code = 'SANDBOX_REFUSED_WRITE';
    }
    if (result.leftRunning.length > 0) await ownLeftovers(proc, result, out);
    return out;
  };

  /** Processes the command left running: adopted as a background task, or killed (cli config `leftovers`). */
  const ownLeftovers = async (proc: ManagedProcess, result: ProcessResult, out: CliResult): Promise<void> => {
    out.left_running = result.leftRunning.map((p) => ({ pid: p.pid, command: p.command }));
    const list = result.leftRunning.map((p) => `${p.pid} (${p.command})`).join(', ');
    let handle: LeftoverHandle;
    try {
      handle = manager.adoptLeftovers(proc);
    } catch {
      out.left_running_message = `The command left processes running: ${list}.`;
      return;
    }
    if (cfg.leftovers === 'adopt' && background) {
      const info = background.adopt({
        command: `${label} (left running)`,
        tool: ctx.toolName,
        idPrefix: 'cli',
        run: leftoverRun(handle),
      });
      out.background_task_id = info.id;
      out.left_running_message = `The command returned but left processes running: ${list}. They continue as background task ${info.id}: check_background_task, read_background_output (their output after the command ended) and cancel_background_task work on it.`;
      return;
    }
    await handle.kill();
    out.left_running_message = `The command returned but left processes running: ${list}. They were killed (${background ? "cli config leftovers: 'kill'" : 'no background plugin to own them'}); run long-lived processes with background: true.`;
  };

  const runFor = (proc: ManagedProcess): BackgroundRun =>
    toRun(proc, async (result) => {
      const formatted = await finish(proc, result);
      const status: BackgroundRunOutcome['status'] = result.killed
        ? 'cancelled'
        : result.exitCode === 0 && !result.spawnError
          ? 'completed'
          : 'failed';
      return { status, result: formatted };
    });

  if (canBackground) {
    const estimate = estimateSeconds(plan.parsed, runtime.slowPatterns);
    if (request.background === true || estimate > threshold) {
      const info = background.submit({
        command: label,
        tool: ctx.toolName,
        idPrefix: 'cli',
        start: () => runFor(spawn(undefined)),
      });
      const why =
        request.background === true
          ? 'Command started as a background task, as requested'
          : `Command backgrounded due to estimated duration (~${estimate}s, over the ${threshold}s threshold)`;
      return {
        background_task_id: info.id,
        status: info.status === 'queued' ? 'queued' : 'running',
        message: `${why}${info.status === 'queued' ? '; it is queued until a background worker is free' : ''}. Use check_background_task({ task_id: "${info.id}", wait_seconds: 30 }) for its result and read_background_output for its output so far.`,
        mode: plan.mode,
      };
    }
  }

  let proc: ManagedProcess;
  try {
    proc = spawn(ctx.signal);
  } catch (error) {
    // Synchronous spawn failures: a NUL byte in an argument, an invalid option.
    return errorResult(
      plan.mode,
      `Could not start the command: ${(error as Error).message}`,
      'INVALID_ARGUMENTS',
    );
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
        run: runFor(proc),
      });
      return {
        background_task_id: info.id,
        status: 'running',
        message: `Command still running after ${threshold}s, so it continues as a background task (nothing restarted, no output lost). Use check_background_task({ task_id: "${info.id}", wait_seconds: 30 }) for its result and read_background_output for its output so far.`,
        mode: plan.mode,
      };
    }
  }
  return finish(proc, await proc.result);
}
