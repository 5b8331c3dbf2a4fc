import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import {
  BACKGROUND_SERVICE,
  ConchError,
  type BackgroundRun,
  type BackgroundRunOutcome,
  TRASH_SERVICE,
  type ToolCallContext,
  PERMISSION_GATE,
  removeSync,
} from '@conch/core';
import { defaultTrashDir, TrashStore } from '@conch/trash';
import {
  BubblewrapExecutor,
  commandLineProblem,
  describeCommandLineProblem,
  type Executor,
  type LeftoverHandle,
  type ProcessHandle,
  type ProcessLayer,
  type ProcessResult,
  type ProcessTarget,
  type SandboxProfile,
  envForOutside,
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
  cliDisplay,
  formatResult,
  type CliBackgroundResult,
  type CliMode,
  type CliResult,
  type FormatOptions,
} from './format-result.js';
import { hiddenSecret, outsideSignal, sandboxFor, sandboxRefusal } from './kernel-wall.js';
import { quoteWord } from './quote.js';
import { planCommand, resolveShell, type CliPlan } from './plan.js';
import { DEFAULT_SLOW_PATTERNS, estimateSeconds } from './slow-patterns.js';
import {
  blindReason,
  directoryState,
  isUnreachable,
  markBlind,
  markTarget,
  processLayerFor,
  reachTarget,
  remoteBaseCwd,
  remoteSafeRm,
  transportLost,
  sessionExpired,
} from './process-target.js';

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
  /**
   * The explicit bubblewrap executor of `sandbox: true` configs (per workspace); `writable` adds
   * directories (the trash, for safe rm).
   */
  executor(workspace: string, writable?: readonly string[]): Executor | undefined;
  /**
   * cli config `safeRm`: the file defining the trash's `rm` function for a dialect (written once,
   * in the registry's temp dir), and the trash directory it moves files into.
   */
  safeRm(ctx: ToolCallContext<unknown>, dialect: CliPlan['dialect']): { file: string; trashDir: string };
}

export function cliRuntime(config: CliConfig): CliRuntime {
  const executors = new Map<string, Executor>();
  const safeRmFiles = new Map<string, string>();
  let fallbackTrash: TrashStore | undefined;
  return {
    config,
    slowPatterns: config.slowPatterns.length
      ? [...DEFAULT_SLOW_PATTERNS, ...config.slowPatterns]
      : DEFAULT_SLOW_PATTERNS,
    executor(workspace, writable = []) {
      if (config.sandbox === false) return undefined;
      const key = [workspace, ...writable].join('\0');
      let executor = executors.get(key);
      if (!executor) {
        const extra = config.sandbox === true ? {} : config.sandbox;
        executor = new BubblewrapExecutor({
          writable: [workspace, ...(extra.writable ?? []).map((dir) => resolve(workspace, dir)), ...writable],
          ...(extra.network === undefined ? {} : { network: extra.network }),
        });
        executors.set(key, executor);
      }
      return executor;
    },
    safeRm(ctx, dialect) {
      // The trash partner's service; without it (the trash plugin is not installed or exposed) the
      // same default trash, so rm never falls back to deleting.
      const trash =
        ctx.resolveOptional(TRASH_SERVICE) ??
        (fallbackTrash ??= new TrashStore({ dir: defaultTrashDir(ctx.env.cwd) }));
      const key = `${dialect}\0${trash.dir}`;
      let file = safeRmFiles.get(key);
      if (!file || !existsSync(file)) {
        file = join(ctx.env.tempDir(), `cli-safe-rm-${dialect}-${safeRmFiles.size + 1}.sh`);
        writeFileSync(
          file,
          cliSafeRmScript(
            trash.shellFunction(dialect === 'zsh' ? 'zsh' : dialect === 'bash' ? 'bash' : 'sh'),
          ),
          {
            mode: 0o600,
          },
        );
        safeRmFiles.set(key, file);
      }
      return { file, trashDir: trash.dir };
    },
  };
}

/**
 * The file a safe-rm command sources first: the rm function, then BASH_ENV put back as the user had
 * it (bash reads the file through BASH_ENV; children must not inherit ours, so the rm of a script the
 * command runs is the real one, as in a terminal session).
 */
function cliSafeRmScript(fn: string): string {
  return [
    fn,
    'if [ -n "${CONCH_USER_BASH_ENV-}" ]; then',
    '  BASH_ENV=$CONCH_USER_BASH_ENV; export BASH_ENV; unset CONCH_USER_BASH_ENV',
    '  . "$BASH_ENV"',
    'else',
    '  unset BASH_ENV',
    'fi',
    '',
  ].join('\n');
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
  /** The layer it will run on: a remote one's cwd is the target's (its workspace, its paths). */
  layer?: ProcessLayer,
): Promise<CliPlan> {
  const parser = await getShellParser();
  const { shell } = resolveShell(config.shell);
  const where = await reachTarget(layer);
  const cwd =
    where === undefined
      ? resolve(baseCwdOf(config, ctx.env.cwd), request.cwd ?? '.')
      : isUnreachable(where)
        ? resolve('/', request.cwd ?? '.')
        : resolve(remoteBaseCwd(config.cwd, where), request.cwd ?? '.');
  const plan = await planCommand(parser, {
    command: request.command,
    ...(request.args ? { args: request.args } : {}),
    cwd,
    shell,
    ...(request.mode ? { mode: request.mode } : {}),
    ...(config.safeRm ? { safeRm: true } : {}),
  });
  // Planned without its target (the connection failed): it must not run; runCommand says why.
  if (isUnreachable(where)) markBlind(plan, where);
  else if (where) markTarget(plan, where);
  return plan;
}

function errorResult(mode: CliMode, error: string, errorCode: string): CliResult {
  const out: CliResult = { stdout: '', stderr: '', returncode: -1, mode, error, error_code: errorCode };
  out.display = cliDisplay(out);
  return out;
}

function withDisplay(result: CliBackgroundResult): CliBackgroundResult {
  result.display = cliDisplay(result);
  return result;
}

/** A running process as a background task sees it. */
function toRun(
  proc: ProcessHandle,
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
  options: RunCommandOptions = {},
): Promise<RunCommandResult> {
  const manager = processLayerFor(ctx, options.manager);
  const result = await runOn(ctx, request, config, { ...options, ...(manager ? { manager } : {}) });
  // Where it ran, on every result of a remote run (local results stay as they were).
  return manager?.target && manager.remote ? { ...result, target: manager.target } : result;
}

export interface RunCommandOptions {
  plan?: CliPlan;
  runtime?: CliRuntime;
  /** The process layer (default: the executor plugin's PROCESS_LAYER, else the registry's ProcessManager). */
  manager?: ProcessLayer;
  /**
   * The gate judged another text than the one that runs (templates judge their steps, run a
   * plumbing script): a read-only verdict then does not carry over to the read-only sandbox.
   */
  judgedElsewhere?: boolean;
}

/** runCommand on a resolved process layer (options.manager). */
async function runOn(
  ctx: ToolCallContext<unknown>,
  request: RunCommandRequest,
  config: Partial<CliConfigInput> | undefined,
  options: RunCommandOptions,
): Promise<RunCommandResult> {
  const runtime = runtimeFor(ctx, config, options.runtime);
  const cfg = runtime.config;
  const manager = options.manager;
  if (!manager)
    throw new ConchError({
      code: 'NO_PROCESS_MANAGER',
      message: `runCommand from tool '${ctx.toolName}': no process manager is provided; call ensureProcessManager(ctx) (from @conch/process) in the plugin's setup, or build the tool with defineCommandTool, which does it when the tool is exposed`,
    });
  const plan = options.plan ?? (await planRequest(ctx, request, cfg, manager));
  // A remote layer (the executor plugin's target): cwd, paths, HOME and PATH are the target's.
  const reached = await reachTarget(manager);
  const blind = blindReason(plan) ?? (isUnreachable(reached) ? reached : undefined);
  if (blind) return errorResult(plan.mode, blind.message, blind.code);
  const where = reached as ProcessTarget | undefined;
  const baseCwd = where ? remoteBaseCwd(cfg.cwd, where) : baseCwdOf(cfg, ctx.env.cwd);
  const { cwd } = plan;
  const cwdState = await directoryState(manager, cwd);
  if (typeof cwdState === 'object') return errorResult(plan.mode, cwdState.message, cwdState.code);
  if (cwdState === 'not-directory')
    return errorResult(
      plan.mode,
      `Not a directory: ${cwd}. Pass an existing directory as cwd.`,
      'INVALID_CWD',
    );
  if (cwdState === 'missing')
    return errorResult(
      plan.mode,
      cwd === baseCwd
        ? `No such directory: ${cwd}, the directory commands run in, is gone (deleted or moved since the session started). Tell the user; pass an existing directory as cwd to run elsewhere.`
        : `No such directory: ${cwd}. Verify the path exists first (ls), or omit cwd to run in ${baseCwd}.`,
      'INVALID_CWD',
    );
  // undefined: a host variable the command must not see (loaderEnvOutside).
  const env: Record<string, string | undefined> = commandEnv({
    extraPaths: cfg.extraPaths,
    configEnv: cfg.env,
    callEnv: request.env,
    cwd: baseCwd,
    ...(where ? { home: where.home ?? baseCwd, basePath: where.path ?? '' } : {}),
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
  // Safe rm: the trash's rm function is defined before the line runs (bash reads it through
  // BASH_ENV, so the script is the line exactly as judged; zsh and sh get it sourced first). Not in
  // the read-only sandbox: a command the gate allowed as a read removes nothing.
  const judgedElsewhere = options.judgedElsewhere === true;
  const baseSandbox = runtime.config.sandbox || where ? undefined : sandboxFor(ctx, judgedElsewhere);
  // A command that may run outside any sandbox (let out by a human or a host rule, the gate's
  // sandbox off, a read where bubblewrap is missing) finds programs only where no sandboxed command
  // could have put one (@conch/process envForOutside): `git push` runs the system's git, not a `.venv/bin/git`.
  let droppedPath: string[] = [];
  if (
    baseSandbox &&
    (baseSandbox.kind === 'protected' || (baseSandbox.kind === 'read-only' && !baseSandbox.required))
  ) {
    const policy = ctx.resolveOptional(PERMISSION_GATE)?.kernelPolicy?.();
    const roots = [...(policy?.writableRoots ?? []), baseCwd];
    // `env` holds additions over the host's environment: a variable it lacks is the host's.
    const outside = envForOutside(env, roots);
    droppedPath = outside.dropped.path;
    Object.assign(env, outside.changes);
    if (outside.dropped.loaders.length > 0) {
      // The user's ssh command line went with what it named: ssh still never waits on a prompt.
      if ('GIT_SSH_COMMAND' in outside.changes && outside.changes.GIT_SSH_COMMAND === undefined)
        env.GIT_SSH_COMMAND = 'ssh -o BatchMode=yes';
      ctx.logger?.info(
        { dropped: outside.dropped.loaders },
        'cli: outside the sandbox, load paths leave out what a sandboxed command could have written',
      );
    }
  }
  const readOnly = baseSandbox?.kind === 'read-only';
  const wantsSafeRm = plan.safeRm && plan.mode === 'shell' && !readOnly;
  // In a target the rm function is inlined at the top of the script (no host file reaches it).
  const remoteRm = wantsSafeRm && where ? remoteSafeRm(plan.dialect, baseCwd, where) : undefined;
  const safeRm = wantsSafeRm && !where ? runtime.safeRm(ctx, plan.dialect) : undefined;
  if (where && cfg.sandbox !== false) {
    return errorResult(
      plan.mode,
      `cli config 'sandbox': the bubblewrap executor wraps commands on this machine; commands run on ${where.target}, where it cannot. Set sandbox: false for this target (the permission gate's kernel wall still applies there where bwrap works).`,
      'SANDBOX_UNAVAILABLE',
    );
  }
  if (safeRm) {
    mkdirSync(safeRm.trashDir, { recursive: true, mode: 0o700 });
    if (plan.dialect === 'bash') {
      const userBashEnv = 'BASH_ENV' in env ? env.BASH_ENV : process.env.BASH_ENV;
      env.BASH_ENV = safeRm.file;
      if (userBashEnv) env.CONCH_USER_BASH_ENV = userBashEnv;
    }
  }
  const script = remoteRm
    ? `${remoteRm}\n${plan.line}`
    : safeRm && plan.dialect !== 'bash'
      ? `. ${quoteWord(safeRm.file)}\n${plan.line}`
      : plan.line;
  // A long script (a heredoc writing a file) cannot be one argument of `bash -c` (Linux takes at
  // most 128 KiB per argument): it runs from a file holding exactly the text the gate judged.
  const scriptFile =
    plan.mode === 'shell' && !where && Buffer.byteLength(script) > SCRIPT_FILE_BYTES
      ? writeScriptFile(ctx.env.tempDir(), script)
      : undefined;
  if (plan.mode === 'direct' && !where) {
    // One argument too long for exec: say which field, before the spawn names the wrong thing.
    const argv = plan.argv!;
    const tooLong = commandLineProblem(argv[0]!, argv.slice(1), env);
    if (tooLong && tooLong.field !== 'env') {
      const fromArgs = request.args?.length ?? 0;
      const field =
        tooLong.field === 'args' && tooLong.index! >= argv.length - 1 - fromArgs ? 'args' : 'command';
      return errorResult(
        plan.mode,
        `cli_based_tool '${field}' is too long to run: ${describeCommandLineProblem(tooLong)}. Write long data to a file and pass its path, or put it in a script (a heredoc: shell mode runs long scripts from a file).`,
        'INVALID_ARGUMENTS',
      );
    }
  }
  let executor: Executor | undefined;
  try {
    executor = where
      ? undefined
      : runtime.executor(baseCwd, [
          ...(safeRm ? [safeRm.trashDir, dirname(safeRm.file)] : []),
          ...(scriptFile ? [dirname(scriptFile)] : []),
        ]);
  } catch (error) {
    return errorResult(plan.mode, (error as Error).message, 'SANDBOX_UNAVAILABLE');
  }
  // (Safe rm in a sandbox: the trash is writable there and the rm function file, in the registry's
  // temp dir, visible but not writable — the cli plugin shares both with every sandbox at setup.)
  const sandbox: SandboxProfile | undefined = executor ? undefined : baseSandbox;
  const outputDir: string | true = cfg.outputDir ? resolve(baseCwd, cfg.outputDir) : true;
  // Connections the sandbox's proxy refuses from now on are this command's (or a concurrent one's).
  const startedAt = performance.now();
  const spawn = (signal: AbortSignal | undefined) => {
    const proc =
      plan.mode === 'direct'
        ? manager.spawn(plan.argv![0]!, plan.argv!.slice(1), spawnOptions(signal))
        : scriptFile
          ? manager.spawn(plan.shell, [scriptFile], spawnOptions(signal))
          : manager.spawn(script, [], { ...spawnOptions(signal), shell: plan.shell });
    if (scriptFile) void proc.result.then(() => removeSync(scriptFile, { force: true }));
    return proc;
  };
  const spawnOptions = (signal: AbortSignal | undefined) => ({
    ...(executor ? { executor } : {}),
    ...(sandbox ? { sandbox } : {}),
    cwd,
    env,
    ...(limitSeconds !== undefined && Number.isFinite(limitSeconds)
      ? { timeoutMs: limitSeconds * 1000 }
      : {}),
    ...(signal ? { signal } : {}),
    // The combined file is what output_file names: kept where a later turn can still read it.
    capture: {
      headBytes: budgetBytes,
      tailBytes: budgetBytes,
      spill: 'combined' as const,
      outputDir,
      ...(cfg.spillLimitPerCall !== undefined ? { maxFileBytes: cfg.spillLimitPerCall } : {}),
      onFileLimit: cfg.onSpillLimit,
    },
    keepLeftoverOutput: true,
    label,
  });

  /** The final result of a process: formatted, every cut byte in a file, leftovers owned. */
  const finish = async (proc: ProcessHandle, result: ProcessResult): Promise<CliResult> => {
    let outcome = result;
    let out = formatResult(outcome, format);
    if (out.truncated && !out.output_file && !result.spill) {
      // Cut by characters though the bytes fit in memory: every byte goes to a file all the same.
      // (When no directory can take it, the report says so and the result names what is lost.)
      const file = await proc.materializeOutput();
      const report = proc.combined?.report?.();
      const spill = report && (report.problem !== undefined || report.relocated) ? report : undefined;
      if (file || spill) {
        outcome = { ...outcome, ...(file ? { outputFile: file } : {}), ...(spill ? { spill } : {}) };
        out = formatResult(outcome, format);
      }
    }
    if (result.sandbox !== 'none') out.sandbox = result.sandbox;
    const refusal = sandboxRefusal(result);
    if (refusal) {
      // Whatever the exit status: a refused write inside a substitution or a pipeline still exits 0.
      out.error = out.error ? `${out.error} ${refusal.message}` : refusal.message;
      out.error_code = 'SANDBOX_REFUSED_WRITE';
      if (refusal.path) out.refused_path = refusal.path;
    }
    const policyNow = ctx.resolveOptional(PERMISSION_GATE)?.kernelPolicy?.();
    const secret = hiddenSecret(result, policyNow?.maskedPaths, cwd, policyNow);
    const succeeded = result.exitCode === 0 && result.signal === null && !result.spawnError;
    if (secret && succeeded && out.error_code === undefined) {
      // A tool that warned about a hidden file and went on (git's "unable to access
      // ~/.config/git/…", a linter probing ~/.netrc) succeeded: said beside the result, not as its
      // error, so MCP clients and hosts do not show a finished command as a failure.
      out.notice = `The command succeeded, but it met a path the sandbox hides: ${secret.message}`;
      out.notice_code = 'SECRET_HIDDEN';
      if (secret.path) out.refused_path = secret.path;
    } else if (secret) {
      if (out.error_code === 'SANDBOX_REFUSED_WRITE') {
        // Both walls, both said: a refused write and a hidden secret in one command.
        out.error = `${out.error} ${secret.message}`;
        out.error_codes = ['SANDBOX_REFUSED_WRITE', 'SECRET_HIDDEN'];
      } else {
        // Instead of the command's own reading (NO_SUCH_FILE's "check the path" would mislead).
        out.error = secret.message;
        out.error_code = 'SECRET_HIDDEN';
        if (secret.path) out.refused_path = secret.path;
      }
    }
    const signal = outsideSignal(result, plan.line);
    if (signal) {
      if (out.error_code === 'SANDBOX_REFUSED_WRITE' || out.error_code === 'SECRET_HIDDEN') {
        out.error = `${out.error} ${signal.message}`;
        out.error_codes = [...(out.error_codes ?? [out.error_code]), 'SANDBOX_REFUSED_SIGNAL'];
      } else {
        out.error = signal.message;
        out.error_code = 'SANDBOX_REFUSED_SIGNAL';
      }
      out.refused_pid = Number(signal.path);
    }
    // Sockets of the host's services the guard kept the command from (connect(2) by path).
    const sockets = [
      ...new Set((result.sandboxRefusals ?? []).filter((r) => r.op === 'connect').map((r) => r.path)),
    ];
    if (sockets.length > 0) {
      const message = `The sandbox refused a connection to ${sockets.length === 1 ? 'the socket' : 'the sockets'} ${sockets.slice(0, 3).join(', ')}${sockets.length > 3 ? ', …' : ''}: a socket outside the workspace and the sandbox's own /tmp belongs to a service of the host (a database, a daemon), which sandboxed commands do not reach. If the task needs the service, tell the user (the host can name its TCP port in the permission config's network.allow, such as localhost:5432), or call again with sandbox: false and a justification.`;
      out.blocked_hosts = sockets.map((path) => `unix:${path}`);
      out.error = out.error && out.error_code !== 'PERMISSION_DENIED' ? `${out.error} ${message}` : message;
      if (out.error_code && out.error_code !== 'PERMISSION_DENIED' && out.error_code !== 'NETWORK_BLOCKED')
        out.error_codes = [...(out.error_codes ?? [out.error_code]), 'NETWORK_BLOCKED'];
      out.error_code =
        out.error_code && out.error_code !== 'PERMISSION_DENIED' ? out.error_code : 'NETWORK_BLOCKED';
    }
    const blocked = networkBlocked(manager, startedAt);
    if (blocked.length > 0) {
      // A request that named no host (a malformed CONNECT target, one the proxy could not read) is
      // said as such: no allow-list entry would let it through.
      const named = blocked.filter((b) => b.host !== '(malformed request)');
      const hosts = [...new Set(named.map((b) => b.host))];
      if (hosts.length > 0) out.blocked_hosts = [...(out.blocked_hosts ?? []), ...hosts];
      const malformed = blocked.find((b) => b.host === '(malformed request)');
      const message = [
        hosts.length > 0
          ? `The sandbox's network refused ${hosts.join(', ')} (${named[0]!.reason}). Only destinations on the host's allow-list are reached; if the task needs ${hosts.length > 1 ? 'these' : 'this one'}, tell the user (the host can add it to the permission config's network.allow), or call again with sandbox: false and a justification.`
          : '',
        malformed
          ? `The sandbox's network proxy refused a request that names no host it can reach (${malformed.reason}); send a plain host:port (CONNECT) or http:// URL.`
          : '',
      ]
        .filter(Boolean)
        .join(' ');
      out.error = out.error ? `${out.error} ${message}` : message;
      out.error_code ??= 'NETWORK_BLOCKED';
      if (out.error_code !== 'NETWORK_BLOCKED')
        out.error_codes = [...(out.error_codes ?? [out.error_code]), 'NETWORK_BLOCKED'];
    }
    const refusals = engineRefused(manager, startedAt);
    if (refusals.length > 0) {
      const seen = new Set<string>();
      out.engine_refusals = [];
      for (const r of refusals) {
        const key = `${r.rule}\0${r.message}`;
        if (seen.has(key) || out.engine_refusals.length >= 5) continue;
        seen.add(key);
        out.engine_refusals.push({
          rule: r.rule,
          message: r.message,
          ...(r.route ? { route: r.route } : {}),
        });
      }
      const first = out.engine_refusals[0]!;
      const message = `The container engine policy refused ${first.route ?? 'a request'}: ${first.message} (rule ${first.rule}${out.engine_refusals.length > 1 ? `, and ${out.engine_refusals.length - 1} more` : ''}). The engine never saw it. Inside the sandbox the engine manages this session's and the workspace compose project's containers, with binds only inside the workspace; if the task needs more, tell the user, or call again with sandbox: false and a justification.`;
      out.error = out.error ? `${out.error} ${message}` : message;
      out.error_code ??= 'ENGINE_REFUSED';
      if (out.error_code !== 'ENGINE_REFUSED')
        out.error_codes = [...(out.error_codes ?? [out.error_code]), 'ENGINE_REFUSED'];
    }
    if (blocked.length === 0 && result.sandbox === 'workspace-write' && !out.error_code) {
      const direct = directNetworkFailure(
        `${result.stderr.head}\n${result.stderr.tail}\n${result.stdout.tail}`,
      );
      if (direct) {
        out.error = `${out.error ? `${out.error} ` : ''}The sandbox has no direct network and no DNS (${direct}): connections go through its proxy (HTTP_PROXY / HTTPS_PROXY are set; node's fetch before 22.21 and 24.5 ignores them, as do raw sockets). Use a tool that honours the proxy, or, if the task needs it, tell the user.`;
        out.error_code = 'NETWORK_BLOCKED';
      }
    }
    if (out.error_code === 'COMMAND_NOT_FOUND' && droppedPath.length > 0)
      out.error = `${out.error} Outside the sandbox, PATH leaves out what a sandboxed command could have written (${droppedPath.slice(0, 3).join(', ')}${droppedPath.length > 3 ? ', …' : ''}): run a program from there by its path (./bin/tool), which the gate judges as such.`;
    if (result.plants?.length) {
      // Reported, not refused: the kernel could not tell this write from ordinary work (the
      // config of a repository the agent made, a workspace .npmrc); the human decides.
      out.plants = result.plants.map((p) => ({ kind: p.kind, path: p.path, detail: p.detail }));
      const message = `The command left ${result.plants.length === 1 ? 'a file' : `${result.plants.length} files`} that the user's own tools would run later outside the sandbox (${result.plants
        .slice(0, 3)
        .map((p) => `${p.path}: ${p.detail}`)
        .join(
          '; ',
        )}${result.plants.length > 3 ? '; …' : ''}). conch ran none of it and reports it to the user; if it was not what the task needed, undo it.`;
      out.error = out.error ? `${out.error} ${message}` : message;
      out.error_code ??= 'PLANT_REPORTED';
    }
    if (transportLost(result)) {
      out.error = `The connection to ${where?.target ?? 'the target'} was lost while the command ran; its exec server killed what the command started when the connection closed. Run it again: the next call reconnects.`;
      out.error_code = 'TRANSPORT_LOST';
    } else if (sessionExpired(result)) {
      // The link dropped and no re-attach came within the target's grace period: the message
      // names the session and what was lost with it.
      out.error = `The connection to ${where?.target ?? 'the target'} was lost while the command ran and could not be re-attached in time: ${result.spawnError?.message ?? 'its exec server session expired'}`;
      out.error_code = 'SESSION_EXPIRED';
    }
    if (result.drainTimedOut && result.leftRunning.length === 0 && !result.killed && !out.error_code) {
      // Every process of the command was gone, yet its pipes did not close within the drain's
      // bound (a process conch cannot see holds them, or the host's event loop fell that far
      // behind): what was read is here, but more may have been written. Never an empty success.
      const kept = `${result.stdout.totalBytes} bytes of stdout and ${result.stderr.totalBytes} of stderr`;
      const message = `The command ended, but its output did not finish arriving (its pipes stayed open after every process of it was gone): ${kept} were read and are shown; more may have been written. Run it again if the output matters; if it keeps happening, a process it started outside conch's view (env -i setsid …) is holding its output, or the machine is overloaded.`;
      out.error = out.error ? `${out.error} ${message}` : message;
      out.error_code = 'OUTPUT_INCOMPLETE';
    }
    // A background task's final result says where it ran, as the call's result does.
    if (where) (out as CliResult & { target?: string }).target = where.target;
    if (result.leftRunning.length > 0) await ownLeftovers(proc, result, out);
    out.display = cliDisplay(out);
    return out;
  };

  /** Processes the command left running: adopted as a background task, or killed (cli config `leftovers`). */
  const ownLeftovers = async (proc: ProcessHandle, result: ProcessResult, out: CliResult): Promise<void> => {
    out.left_running = result.leftRunning.map((p) => ({ pid: p.pid, command: p.command }));
    const list = result.leftRunning.map((p) => `${p.pid} (${p.command})`).join(', ');
    let handle: LeftoverHandle;
    try {
      handle = manager.adoptLeftovers(proc);
    } catch {
      out.left_running_message = `The command left processes running: ${list}.`;
      return;
    }
    // The caller aborted while the result was being made (the command had ended, its leftovers had
    // not): the call rejects with ABORTED, so nobody would ever learn a task's id. An abort stops
    // everything the call started.
    if (ctx.signal?.aborted) {
      await handle.kill();
      out.left_running_message = `The command returned but left processes running: ${list}. They were killed: the call was aborted.`;
      return;
    }
    if (cfg.leftovers === 'adopt' && background) {
      const info = background.adopt({
        command: `${label} (left running)`,
        tool: ctx.toolName,
        idPrefix: 'cli',
        run: leftoverRun(handle),
      });
      // Not background_task_id: that field means the command itself did not finish (seed 001), and
      // a host waiting on it would wait on a server that never ends and miss this result.
      out.left_running_task_id = info.id;
      out.left_running_message = `The command finished (this is its result) but left processes running: ${list}. They continue as background task ${info.id} (left_running_task_id): read_background_output shows what they write from now on, cancel_background_task ends them; check_background_task reports them done only when they all exit (a server never does).`;
      return;
    }
    await handle.kill();
    out.left_running_message = `The command returned but left processes running: ${list}. They were killed (${background ? "cli config leftovers: 'kill'" : 'no background plugin to own them'}); run long-lived processes with background: true.`;
  };

  const runFor = (proc: ProcessHandle): BackgroundRun =>
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
      return withDisplay({
        background_task_id: info.id,
        status: info.status === 'queued' ? 'queued' : 'running',
        message: `${why}${info.status === 'queued' ? '; it is queued until a background worker is free' : ''}. Use check_background_task({ task_id: "${info.id}", wait_seconds: 30 }) for its result and read_background_output for its output so far.`,
        mode: plan.mode,
      });
    }
  }

  let proc: ProcessHandle;
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
    // The threshold counts from the moment the command runs (the first spawn may wait for the
    // supervisor to start).
    await Promise.race([proc.spawned, proc.result]);
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
      return withDisplay({
        background_task_id: info.id,
        status: 'running',
        message: `Command still running after ${threshold}s, so it continues as a background task (nothing restarted, no output lost). Use check_background_task({ task_id: "${info.id}", wait_seconds: 30 }) for its result and read_background_output for its output so far.`,
        mode: plan.mode,
      });
    }
  }
  return finish(proc, await proc.result);
}

/** Scripts longer than this run from a file (`bash FILE`) instead of `bash -c SCRIPT`. */
const SCRIPT_FILE_BYTES = 64 * 1024;

/** Writes a long script where every sandbox of the registry can read it (its temp dir); removed after the run. */
function writeScriptFile(tempDir: string, script: string): string {
  const file = join(tempDir, `cli-script-${randomBytes(6).toString('hex')}.sh`);
  writeFileSync(file, script, { mode: 0o600 });
  return file;
}

/** Connections the sandbox's proxy refused since `since` (a local process manager's; none elsewhere). */
function networkBlocked(
  manager: ProcessLayer,
  since: number,
): { host: string; port: number; reason: string }[] {
  const local = manager as ProcessLayer & {
    networkBlockedSince?(since: number): { host: string; port: number; reason: string }[];
  };
  return typeof local.networkBlockedSince === 'function' ? local.networkBlockedSince(since) : [];
}

/** Requests the container-engine policy refused since `since` (a local process manager's; none elsewhere). */
function engineRefused(
  manager: ProcessLayer,
  since: number,
): { rule: string; message: string; route?: string }[] {
  const local = manager as ProcessLayer & {
    engineRefusedSince?(since: number): { rule: string; message: string; route?: string }[];
  };
  return typeof local.engineRefusedSince === 'function' ? local.engineRefusedSince(since) : [];
}

/**
 * A network failure a tool printed that only a sandbox without direct network explains: no DNS,
 * no route, a refused connection to somewhere other than the sandbox's own loopback.
 */
function directNetworkFailure(text: string): string | undefined {
  const m =
    /Could not resolve host[^\n]*|Temporary failure in name resolution|getaddrinfo (?:ENOTFOUND|EAI_AGAIN)[^\n]*|Name or service not known|Network is unreachable|connect ECONNREFUSED (?!127\.0\.0\.1\b|::1\b)[^\s]+/.exec(
      text,
    );
  return m?.[0].slice(0, 120);
}
