import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  ARGUMENT_BYTES,
  BACKGROUND_SERVICE,
  compactText,
  ConchError,
  definePlugin,
  defineTool,
  PERMISSION_GATE,
  TRASH_SERVICE,
  type PluginContext,
  type PluginScope,
  type SandboxLevel,
} from '@conch/core';
import { defaultTrashDir } from '@conch/trash';
import { ensureProcessManager, findBwrap, profileFor, type ProcessManager } from '@conch/process';
import { z } from 'zod';
import { cliConfigSchema, timerSeconds, type CliConfig } from './config.js';
import { cliInstructions } from './instructions.js';
import { plannedTarget, processLayerFor } from './process-target.js';
import type { CliPlan } from './plan.js';
import { resolveShell } from './plan.js';
import {
  cliRuntime,
  getShellParser,
  planRequest,
  runCommand,
  type RunCommandRequest,
} from './run-command.js';

const noNul = (s: string) => !s.includes('\0');
const NUL_MESSAGE = 'a string without NUL bytes (no command can receive one)';

export const cliToolInputSchema = z
  .strictObject({
    command: z
      .string()
      .min(1)
      .refine(noNul, NUL_MESSAGE)
      .describe('The shell command to execute, e.g. "ls -la" or "find . -name \'*.py\' | head -20"'),
    args: z
      .array(z.string().refine(noNul, NUL_MESSAGE))
      .optional()
      .describe('Optional argument list passed to the executable in `command` without shell interpretation'),
    cwd: z
      .string()
      .min(1)
      .optional()
      .describe('Working directory (relative to the workspace); default the workspace'),
    timeout: timerSeconds()
      .optional()
      .describe('Seconds after which the command is killed (at most 2147483, ~24.8 days; omit for no limit)'),
    background: z
      .boolean()
      .optional()
      .describe('true: run as a background task and return a task id at once; false: wait in the foreground'),
    sandbox: z
      .boolean()
      .optional()
      .describe(
        'false: ask to run outside the sandbox (writes outside the workspace, the network); needs justification, and a human decides. Default: the sandbox',
      ),
    justification: z
      .string()
      .trim()
      .min(1)
      .max(1000)
      .optional()
      .describe(
        'With sandbox: false: one sentence for the human who decides, saying why the command must leave the sandbox',
      ),
  })
  .superRefine((args, ctx) => {
    if (args.sandbox === false && !args.justification)
      ctx.addIssue({
        code: 'custom',
        path: ['justification'],
        message: 'expected a justification (one sentence a human reads) when sandbox is false',
      });
  });

export type CliToolInput = z.output<typeof cliToolInputSchema>;

/**
 * The byte limits of cli_based_tool's strings, checked before the command is parsed: a command
 * (a script; a long one runs from a file) 1 MiB, each of `args` 128 KiB (Linux's MAX_ARG_STRLEN:
 * a longer one cannot be passed to a program), cwd 4096 (PATH_MAX).
 */
export const CLI_ARGUMENT_LIMITS = {
  fields: {
    command: 1024 * 1024,
    'args.*': ARGUMENT_BYTES.argv,
    cwd: ARGUMENT_BYTES.path,
    justification: 4096,
  },
} as const;

function toRequest(args: CliToolInput): RunCommandRequest {
  return {
    command: args.command,
    ...(args.args ? { args: args.args } : {}),
    ...(args.cwd ? { cwd: args.cwd } : {}),
    ...(args.timeout !== undefined ? { timeoutSec: args.timeout } : {}),
    ...(args.background !== undefined ? { background: args.background } : {}),
  };
}

/**
 * One line for a UI: `cli_based_tool(ls -la)`, `cli_based_tool(npm run dev, background)`,
 * `cli_based_tool(rm -rf build, outside sandbox)`; long commands end in an ellipsis.
 */
export function describeCliCall(args: CliToolInput): string {
  const line = args.args?.length ? `${args.command} ${args.args.join(' ')}` : args.command;
  const notes = [
    ...(args.background ? ['background'] : []),
    ...(args.sandbox === false ? ['outside sandbox'] : []),
  ];
  return `cli_based_tool(${[compactText(line, 60), ...notes].join(', ')})`;
}

/**
 * The trash safe rm moves files into (the trash plugin's when it is exposed, else the default
 * one), made now: a sandbox binds only what exists.
 */
function trashDirOf(ctx: PluginScope & { env: { cwd: string } }): string {
  const dir = ctx.resolveOptional(TRASH_SERVICE)?.dir ?? defaultTrashDir(ctx.env.cwd);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

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
    // safe rm: the trash its rm moves files into, and the model's tool to list and restore them.
    { plugin: 'trash', when: (c) => c.safeRm },
  ],
  setup(ctx) {
    const config = ctx.config;
    if (config.sandbox !== false && !findBwrap()) {
      throw new ConchError({
        code: 'SANDBOX_UNAVAILABLE',
        message:
          "cli config 'sandbox': expected bubblewrap (bwrap) on PATH to sandbox commands; it was not found. Install it (apt-get install bubblewrap) or set sandbox: false.",
      });
    }
    const runtime = cliRuntime(config);
    const manager = ensureProcessManager(ctx);
    // The registry's cap on spill files (output_file and plumbing), when the config names one.
    if (config.spillLimitPerRegistry !== undefined)
      manager.setSpillLimits({ total: config.spillLimitPerRegistry });
    // What every sandbox of this registry gives commands: the registry's temp dir (the safe-rm
    // function file) read-only, the trash writable. Registered before the first command, so cli,
    // terminal and file tools share one sandbox (one network namespace, one /tmp).
    manager.shareWithSandbox({
      // A configured output directory too: under a closed home the sandbox would not show it, and
      // a model reads its output_file back (cat, read_file) inside.
      visible: [ctx.env.tempDir(), ...sharedOutputDir(config.outputDir, ctx.env.cwd)],
      ...(config.safeRm ? { writable: [trashDirOf(ctx)] } : {}),
    });
    const { shell, fallback } = resolveShell(config.shell);
    if (fallback)
      ctx.logger.warn(
        { shell },
        'bash was not found: shell mode runs /bin/sh, and the permission gate reads commands as sh',
      );
    const warm = warmUp(ctx, config, manager);
    ctx.reportStatus('cli', () => ({ shell, dialect: fallback ? 'sh' : 'bash', warmUp: warm.state() }));
    return {
      tools: [
        defineTool<CliToolInput, Record<string, unknown>, CliConfig, CliPlan>({
          name: 'cli_based_tool',
          description:
            'Execute a shell command on the local machine and return { stdout, stderr, returncode }. ' +
            'Supports pipes, redirections and chaining (run via bash); simple commands run directly. ' +
            'stdin is closed. Large output is truncated to its start and end with the full output in output_file. ' +
            'Long-running commands return a background_task_id to query with check_background_task.',
          inputSchema: cliToolInputSchema,
          argumentLimits: CLI_ARGUMENT_LIMITS,
          annotations: { destructiveHint: true, openWorldHint: true },
          describeCall: describeCliCall,
          // One plan per call: the gate judges it and the runner runs it.
          // (Planned for where it runs: the executor plugin's target when one is exposed.)
          prepare: (args, call) => (
            warm.noteCall(),
            planRequest(call, toRequest(args), config, processLayerFor(call, manager))
          ),
          permission: (args, call, plan) => ({
            kind: 'command',
            tool: 'cli_based_tool',
            command: plan.line,
            cwd: plan.cwd,
            plan,
            ...(args.sandbox === false ? { escalation: { justification: args.justification ?? '' } } : {}),
            // A remote target: the local sandbox does not apply there; the gate judges as without
            // one, with the target's home and workspace.
            ...(processLayerFor(call, manager)?.remote ? { sandboxAvailable: false } : {}),
            ...targetOfPlan(plan),
          }),
          execute: (args, call, plan) =>
            runCommand(call, toRequest(args), undefined, { plan, runtime, manager }),
        }),
      ],
      instructions: () =>
        cliInstructions(
          config,
          config.background !== false && ctx.resolveOptional(BACKGROUND_SERVICE) !== undefined,
        ),
    };
  },
});

/** What the cli plugin's warm-up did (`registry.status().cli.warmUp`). */
export interface CliWarmUpState {
  /** The bash parser (tree-sitter WASM): loading, loaded, or failed (the first call retries). */
  parser: 'loading' | 'ready' | 'failed';
  /**
   * The process supervisor of the sandbox the first command runs in: 'pending' until
   * WARM_UP_DELAY_MS after expose (so a permission gate exposed right after cli is seen);
   * 'started' once asked to start (`status().processes.supervisor` says 'starting', then
   * 'running' once it answers); 'skipped' (no
   * permission gate yet, a call came first and started what it needed, or the manager spawns
   * in-process); 'failed' (logged; the first command starts it as before).
   */
  supervisor: 'pending' | 'started' | 'skipped' | 'failed';
}

/**
 * Warm at expose: loads the bash parser and starts the process supervisor of the sandbox the gate
 * will run commands in, in the background, so the first call costs about what the tenth does.
 * Never blocks or fails the exposure: a failure is logged and the first call retries as it always
 * did. The supervisor starts WARM_UP_DELAY_MS after expose (the gate may be exposed just after
 * cli); a dispose before then cancels it, and one after it is killed by the process manager's
 * dispose like any supervisor.
 */
function warmUp(
  ctx: PluginContext<CliConfig>,
  config: CliConfig,
  manager: ProcessManager,
): { state(): CliWarmUpState; noteCall(): void } {
  const state: CliWarmUpState = { parser: 'loading', supervisor: 'pending' };
  let disposed = false;
  // A call made before the warm-up runs starts what it needs itself; a second start alongside it
  // would only race it.
  let called = false;
  const parser = getShellParser().then(
    (loaded) => {
      state.parser = 'ready';
      return loaded;
    },
    (error: unknown) => {
      state.parser = 'failed';
      ctx.logger.warn({ err: error }, 'cli: warm-up could not load the bash parser; the first call retries');
      return undefined;
    },
  );
  const startSupervisor = () => {
    if (disposed) return;
    if (called) {
      state.supervisor = 'skipped';
      return;
    }
    try {
      const gate = ctx.resolveOptional(PERMISSION_GATE);
      if (!gate) {
        // Without a gate no command runs: nothing to warm (a gate exposed later starts it on first use).
        state.supervisor = 'skipped';
        return;
      }
      // The profile the gate's decisions map to (kernel-wall's sandboxFor): with a sandbox every
      // command runs inside it; without one, commands run in the protected profile.
      const policy = config.sandbox ? undefined : gate.kernelPolicy?.();
      const level: SandboxLevel | undefined = policy
        ? policy.mode === 'off'
          ? 'outside'
          : policy.mode === 'read-only'
            ? 'read-only'
            : 'workspace-write'
        : undefined;
      manager.warmUp(policy ? profileFor(policy, level) : undefined);
      state.supervisor = manager.supervisorPids().length > 0 ? 'started' : 'skipped';
    } catch (error) {
      state.supervisor = 'failed';
      ctx.logger.warn(
        { err: error },
        'cli: warm-up could not start the process supervisor; the first call retries',
      );
    }
  };
  // One throwaway parse compiles the parse and plan paths the first call takes.
  const warmParse = () =>
    void parser.then((loaded) => {
      if (!disposed) loaded?.parse(WARM_UP_LINE);
    });
  // Each step on its own turn of the event loop, after a short delay: a host answering a request
  // right after expose (conch-mcp's tools/list) is not kept waiting behind the warm-up.
  let step: NodeJS.Immediate | undefined;
  const timer = setTimeout(() => {
    startSupervisor();
    step = setImmediate(warmParse);
  }, WARM_UP_DELAY_MS);
  // Nothing else to do: the warm-up does not keep the host alive.
  timer.unref();
  ctx.onDispose(() => {
    disposed = true;
    clearTimeout(timer);
    if (step) clearImmediate(step);
  });
  return {
    state: () => ({ ...state }),
    noteCall: () => {
      called = true;
    },
  };
}

/** How long after expose the warm-up starts (the exposing host's own next steps go first). */
export const WARM_UP_DELAY_MS = 200;
/** A line that walks the usual paths of a parse (a pipeline, a redirect, a chain). */
const WARM_UP_LINE = 'ls -la | grep -v x > /dev/null && cat README.md';

/** The permission request's `target` for a plan made for a remote target. */
function targetOfPlan(plan: CliPlan): { target?: { name: string; workspace: string; home?: string } } {
  const where = plannedTarget(plan);
  if (!where) return {};
  return {
    target: { name: where.target, workspace: where.cwd, ...(where.home ? { home: where.home } : {}) },
  };
}

export default cliPlugin;

/** A configured output directory, made now (a sandbox binds only what exists when it starts). */
function sharedOutputDir(outputDir: string | undefined, cwd: string): string[] {
  if (!outputDir) return [];
  const dir = resolve(cwd, outputDir);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch {
    return [];
  }
  return [dir];
}
