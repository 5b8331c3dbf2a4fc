// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { DEFAULT_SLOW_PATTERNS, type SlowPattern } from '@conch/process';
import {
  ARGUMENT_BYTES,
  compileWaitFor,
  defineTool,
  oneLine,
  PERMISSION_GATE,
  PermissionGateMissingError,
  type PermissionRequest,
  waitForPatternSchema,
  type ToolCallContext,
  type ToolDefinition,
  type ToolResult,
} from '@conch/core';
import { analyzeCommand, type CommandAnalysis } from './command-analysis.js';
import { describeTerminalCall } from './describe-terminal-call.js';
import type { DownloadReview } from './download-review.js';
import { DISABLED_IDLE_MS, type TerminalConfig } from './config.js';
import { TerminalSessionError } from './errors/terminal-session-error.js';
import { inspectInput, type JudgedInput } from './input-gate.js';
import { judgedCommand } from './judged-command.js';
import {
  execRefusal,
  lostFields,
  type CollectMode,
  type CollectOutcome,
  type SessionLease,
  type SessionPool,
} from './session-pool.js';
import { ENV_NAME, GATE_BYTE } from './shell-scripts.js';

export { judgedCommand };

export const terminalInputSchema = z.strictObject({
  command: z
    .string()
    .optional()
    .describe(
      'A shell command to run in a persistent login shell (bash). Multi-line scripts and heredocs work. cd and export persist in the session.',
    ),
  session_id: z
    .number()
    .int()
    .positive()
    .optional()
    .describe(
      'A session returned by an earlier call (state "waiting" or "background"): use with input or kill.',
    ),
  input: z
    .string()
    .optional()
    .describe(
      'Text typed into the running program of session_id, e.g. "y\\n" or "mypass\\n" (\\n is Enter). "" polls for new output without typing.',
    ),
  background: z
    .boolean()
    .optional()
    .describe(
      'For servers and watchers: return after ~2 s of startup output with a session_id; the command keeps running.',
    ),
  kill: z.boolean().optional().describe('With session_id: end the session and every process it started.'),
  cwd: z.string().optional().describe('Directory to cd into before the command (persists, like a typed cd).'),
  env: z.record(z.string(), z.string()).optional().describe('Environment variables for this command only.'),
  timeout: z
    .number()
    .positive()
    .max(86_400)
    .optional()
    .describe(
      'Seconds to wait before returning a session_id for a command still running (default 60; 180 for known slow commands such as npm install, cargo build, pytest).',
    ),
  idle_ms: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe(
      'Milliseconds of silence after which a running command is reported as waiting for input; 0 (or 10000000) disables this (wait for the end, a prompt or the timeout).',
    ),
  sandbox: z
    .boolean()
    .optional()
    .describe(
      'false (with command, without session_id): run it in a new session outside the sandbox (writes outside the workspace, the network); needs justification, and a human decides. Default: the sandbox',
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
  wait_for: waitForPatternSchema()
    .optional()
    .describe(
      'A regular expression (case-insensitive): return as soon as new output matches it, e.g. "listening on|ready in" when starting a dev server (with background: true) or polling one (input: ""). The result says wait_for_matched: true, or false when the timeout came first.',
    ),
});

export type TerminalArgs = z.output<typeof terminalInputSchema>;

/**
 * The byte limits of the terminal's strings, checked before any work: a command (a script the
 * session sources from a file) and an input (typed or pasted) 1 MiB each, an env value 128 KiB
 * (Linux's MAX_ARG_STRLEN: a longer one cannot reach a program), cwd 4096 (PATH_MAX), a wait_for
 * pattern 4096.
 */
export const TERMINAL_ARGUMENT_LIMITS = {
  fields: {
    command: 1024 * 1024,
    input: 1024 * 1024,
    'env.*': ARGUMENT_BYTES.argv,
    cwd: ARGUMENT_BYTES.path,
    wait_for: ARGUMENT_BYTES.pattern,
    justification: 4096,
  },
} as const;

export type CallShape =
  | { kind: 'run'; command: string; sessionId: number | undefined; background: boolean }
  | { kind: 'input'; sessionId: number; input: string }
  | { kind: 'kill'; sessionId: number }
  | { kind: 'invalid'; error: string };

/** A failure the model can act on: its message, a stable code, one line for a UI. */
function failure(code: string, error: string, extra: Record<string, unknown> = {}): ToolResult {
  return { error, error_code: code, ...extra, display: `✗ ${code}: ${oneLine(error)}` };
}

const SHAPES =
  'The call shapes are: { command } runs and waits; { command, background: true } starts a server; ' +
  '{ session_id, input } answers a waiting program; { session_id, input: "" } polls; { session_id, kill: true } ends a session';

/** Which of the five call shapes the arguments are, or why they are none. */
export function classifyCall(args: TerminalArgs): CallShape {
  const hasCommand = args.command !== undefined;
  if (args.kill === true) {
    if (args.session_id === undefined) {
      return {
        kind: 'invalid',
        error: `kill: true needs session_id (the session to end); given none. ${SHAPES}`,
      };
    }
    if (hasCommand || args.input !== undefined || args.wait_for !== undefined) {
      return {
        kind: 'invalid',
        error: `kill: true takes only session_id; given also ${hasCommand ? 'command' : args.input !== undefined ? 'input' : 'wait_for'}. Kill first, then run the command`,
      };
    }
    return { kind: 'kill', sessionId: args.session_id };
  }
  if (hasCommand) {
    if (args.input !== undefined) {
      return {
        kind: 'invalid',
        error:
          'command and input cannot be combined: command starts a new command; input answers the program of a running session (with session_id)',
      };
    }
    if (args.command!.trim() === '') {
      return { kind: 'invalid', error: 'command: expected a shell command; given an empty string' };
    }
    const bad = Object.keys(args.env ?? {}).find((name) => !ENV_NAME.test(name));
    if (bad !== undefined) {
      return {
        kind: 'invalid',
        error: `env: expected variable names matching [A-Za-z_][A-Za-z0-9_]*; given ${JSON.stringify(bad)}`,
      };
    }
    const reserved = Object.keys(args.env ?? {}).find((name) => name.startsWith('__conch_'));
    if (reserved !== undefined) {
      return {
        kind: 'invalid',
        error: `env: names starting with __conch_ are reserved by the terminal session protocol; given ${JSON.stringify(reserved)}`,
      };
    }
    if (args.sandbox === false && args.session_id !== undefined) {
      return {
        kind: 'invalid',
        error:
          'sandbox: false starts a new session outside the sandbox: omit session_id (a session keeps the sandbox it started in)',
      };
    }
    if (args.sandbox === false && !args.justification) {
      return {
        kind: 'invalid',
        error:
          'justification: expected one sentence a human reads, saying why the command must leave the sandbox (sandbox: false)',
      };
    }
    return {
      kind: 'run',
      command: args.command!,
      sessionId: args.session_id,
      background: args.background === true,
    };
  }
  if (args.sandbox !== undefined || args.justification !== undefined) {
    return {
      kind: 'invalid',
      error: 'sandbox and justification go with a new command (command, without session_id)',
    };
  }
  if (args.input !== undefined) {
    if (args.session_id === undefined) {
      return {
        kind: 'invalid',
        error: `input needs session_id: the session whose program should receive it (from a result with state "waiting" or "background"); given none. ${SHAPES}`,
      };
    }
    const reservedAt = args.input.indexOf(GATE_BYTE);
    if (reservedAt >= 0) {
      return {
        kind: 'invalid',
        error: `input: the control character U+001E (record separator) is reserved by the terminal session protocol and cannot be typed; given at index ${reservedAt}`,
      };
    }
    return { kind: 'input', sessionId: args.session_id, input: args.input };
  }
  if (args.session_id !== undefined) {
    return {
      kind: 'invalid',
      error: `session_id ${args.session_id} given without input or kill: pass input (text to type, or "" to poll for output) or kill: true`,
    };
  }
  if (args.background === true) {
    return { kind: 'invalid', error: 'background: true needs a command to start; given none' };
  }
  return { kind: 'invalid', error: `give a command, or a session_id with input or kill. ${SHAPES}` };
}

export const TERMINAL_DESCRIPTION = [
  'Run shell commands in persistent terminal sessions (a real PTY and login shell: cd, export, nvm/pyenv shims persist).',
  'Five call shapes:',
  '1) { command } runs and waits -> { exit_code, output, cwd }.',
  '2) { command, background: true } for servers/watchers -> ~2 s of startup output, then { session_id, state: "background", output } (or { exit_code, output } if it crashed).',
  '3) A command that blocks on input (password, [Y/n], REPL) returns { session_id, state: "waiting", output }; answer with { session_id, input: "y\\n" }.',
  '4) { session_id, input: "" } polls for new output.',
  '5) { session_id, kill: true } ends the session and everything it started.',
  'A result with exit_code means the command finished; a result with session_id means it is still running.',
  'wait_for (a regex) returns as soon as new output matches it: { command: "npm run dev", background: true, wait_for: "ready in|listening on" } starts a server and waits for it to be ready in one call.',
  'Known slow commands (installs, builds, test suites) wait up to 180 s without an idle return.',
  'exec that would replace the session shell is refused.',
  'Long output is shortened; the full text is in output_file (it stays readable in later turns).',
].join('\n');

/** How the shell reading an input reads it: bash, zsh, or (dash, ksh, busybox …) sh. */
function dialectOf(pid: number): 'bash' | 'sh' | 'zsh' {
  let name = '';
  try {
    name = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return 'sh';
  }
  return name === 'bash' ? 'bash' : name === 'zsh' ? 'zsh' : 'sh';
}

/** The `terminal` tool over a session pool. */
export function createTerminalTool(
  pool: SessionPool,
): ToolDefinition<TerminalArgs, ToolResult, TerminalConfig> {
  // What each call's permission hook judged of its input, by call id (execute takes it; a denied
  // call never comes back for it, so the map is bounded).
  const judgedInputs = new Map<string, JudgedInput>();
  const config = pool.config;
  // The shared table (unless the host replaces it: defaultSlowPatterns: false) plus the host's own.
  const base = config.defaultSlowPatterns ? DEFAULT_SLOW_PATTERNS : [];
  const slowPatterns: readonly SlowPattern[] = config.slowPatterns.length
    ? [
        ...base,
        ...config.slowPatterns.map((p) =>
          typeof p === 'string'
            ? { pattern: p, seconds: config.slowCommandTimeout }
            : { pattern: p.pattern, seconds: p.seconds ?? config.slowCommandTimeout },
        ),
      ]
    : base;
  return defineTool<TerminalArgs, ToolResult, TerminalConfig, CommandAnalysis | undefined>({
    name: 'terminal',
    description: config.safeRm
      ? `${TERMINAL_DESCRIPTION}\nrm moves files to the project's trash instead of deleting them (the trash tool lists and restores them).`
      : TERMINAL_DESCRIPTION,
    inputSchema: terminalInputSchema,
    argumentLimits: TERMINAL_ARGUMENT_LIMITS,
    annotations: { destructiveHint: true, openWorldHint: true },
    describeCall: describeTerminalCall,
    // A new command is read once: whether it would exec over the session's shell, whether it is slow.
    async prepare(args) {
      const shape = classifyCall(args);
      if (shape.kind !== 'run') return undefined;
      return analyzeCommand(shape.command, { slowPatterns, dialect: pool.shellKind });
    },
    permission(args, ctx, analysis) {
      const shape = classifyCall(args);
      // Refused before it runs: no human is asked about a command that will not run.
      if (analysis?.replacesShell !== undefined) return undefined;
      // A download fed to an interpreter: execute asks the gate itself, so that its refusal can be
      // answered with the download-and-review steps (core's denial carries no such fields).
      if (analysis?.downloadReview !== undefined) return undefined;
      if (shape.kind === 'run') return commandRequest(pool, shape, args);
      // Input typed into a shell (the model ran `bash` and types into it) is a command; input to
      // any other program, polls and kills reach a program the gate already allowed.
      if (shape.kind !== 'input') return undefined;
      const session = pool.get(shape.sessionId);
      const judged = session && inspectInput(session, shape.input).judged;
      if (!judged) return undefined;
      judgedInputs.set(ctx.callId, judged);
      if (judgedInputs.size > 64) judgedInputs.delete(judgedInputs.keys().next().value!);
      return {
        kind: 'command',
        tool: 'terminal',
        command: judged.command,
        cwd: judged.cwd,
        dialect: dialectOf(judged.reader.pid),
        ...(session.outside
          ? {
              escalation: {
                justification: `typed into session ${session.id}, which runs outside the sandbox`,
              },
            }
          : {}),
      };
    },
    async execute(args, ctx, analysis) {
      const shape = classifyCall(args);
      switch (shape.kind) {
        case 'invalid':
          return failure('INVALID_ARGUMENTS', shape.error);
        case 'kill':
          return killSession(pool, shape.sessionId);
        case 'input': {
          const judged = judgedInputs.get(ctx.callId);
          judgedInputs.delete(ctx.callId);
          return answer(pool, shape.sessionId, shape.input, args, ctx, judged);
        }
        case 'run':
          if (analysis?.replacesShell !== undefined) {
            return failure('EXEC_REPLACES_SHELL', execRefusal(analysis.replacesShell));
          }
          if (analysis?.downloadReview !== undefined) {
            const refused = await gateDownload(pool, shape, args, ctx, analysis.downloadReview);
            if (refused) return refused;
          }
          return run(pool, shape, args, ctx, analysis?.slow === true);
      }
    },
  });
}

/** The gate's request for a new command: the line as the session's shell will read it. */
function commandRequest(
  pool: SessionPool,
  shape: Extract<CallShape, { kind: 'run' }>,
  args: TerminalArgs,
): PermissionRequest {
  const escalation = outsideJustification(pool, shape.sessionId, args);
  return {
    kind: 'command',
    tool: 'terminal',
    // The per-call env is judged as the `export` line it becomes (the gate reads it with the command).
    command: shape.command,
    ...(args.env && Object.keys(args.env).length > 0 ? { env: args.env } : {}),
    cwd: resolve(pool.expectedCwd(shape.sessionId, args.sandbox === false), args.cwd ?? '.'),
    // The gate reads the command as the session's shell will.
    dialect: pool.shellKind,
    ...(escalation ? { escalation: { justification: escalation } } : {}),
  };
}

/** The gate rules whose refusal the terminal answers with download-and-review steps. */
const DOWNLOAD_RULES = new Set(['safety:downloadToInterpreter', 'safety:sourceDownloaded']);

/**
 * Asks the gate about a command that feeds a download to an interpreter (the permission hook left
 * it to this call) and shapes a refusal: `DOWNLOAD_AND_REVIEW` with the commands to run instead
 * when the gate's download rules refused it (nothing is run for the model; each step goes through
 * the gate when the model runs it), the registry's `PERMISSION_DENIED` shape for any other refusal
 * (`curl … | sudo bash`). Undefined when the gate allows the command (a host that turned the rule
 * off): it runs as any other.
 */
async function gateDownload(
  pool: SessionPool,
  shape: Extract<CallShape, { kind: 'run' }>,
  args: TerminalArgs,
  ctx: ToolCallContext<TerminalConfig>,
  review: DownloadReview,
): Promise<ToolResult | undefined> {
  const gate = ctx.resolveOptional(PERMISSION_GATE);
  if (!gate) throw new PermissionGateMissingError('terminal');
  const request = commandRequest(pool, shape, args);
  const decision = await gate.check(request, {
    signal: ctx.signal,
    callId: ctx.callId,
    ...(ctx.approve ? { approve: ctx.approve } : {}),
  });
  ctx.events.emit('tool.permission', { callId: ctx.callId, tool: 'terminal', request, decision });
  if (decision.outcome === 'allow') return undefined;
  const rule = decision.rule ? { rule: decision.rule } : {};
  if (!decision.rule || !DOWNLOAD_RULES.has(decision.rule)) {
    return {
      error: `Permission denied: ${decision.reason}`,
      error_code: 'PERMISSION_DENIED',
      display: `[Blocked] ${oneLine(decision.reason)}`,
      permission_denied: true,
      ...rule,
      ...(decision.suggestion ? { suggestion: decision.suggestion } : {}),
    };
  }
  const { steps } = review;
  return failure(
    'DOWNLOAD_AND_REVIEW',
    `refused: ${JSON.stringify(oneLine(review.download, 120))} would run downloaded code with ${review.interpreter} without review; nothing was run. ` +
      `Download it and review it instead: 1) ${steps.download} 2) ${steps.review} and read it 3) only if it is fine: ${steps.run}`,
    {
      suggested_command: steps.download,
      review_command: steps.review,
      run_command: steps.run,
      download_file: steps.file,
      url: steps.url,
      permission_denied: true,
      ...rule,
    },
  );
}

/**
 * Why a new command runs outside the sandbox, when it does: the model asked (`sandbox: false` with
 * a justification), or it goes to a session a human already let run outside.
 */
function outsideJustification(
  pool: SessionPool,
  sessionId: number | undefined,
  args: TerminalArgs,
): string | undefined {
  if (args.sandbox === false) return args.justification;
  const session = sessionId === undefined ? undefined : pool.get(sessionId);
  return session?.outside ? `runs in session ${session.id}, which runs outside the sandbox` : undefined;
}

// eslint-disable-next-line no-control-regex
const ONLY_EOF = /^\u0004+$/;

/** A session the pool could not give: the model gets the error's message and code. */
function sessionError(error: unknown): ToolResult {
  if (TerminalSessionError.is(error)) return failure(error.code, error.message);
  throw error;
}

/** Milliseconds of silence that report 'waiting': 0 (or wait_for) means never. */
function idleOf(idleMs: number): number {
  return idleMs === 0 || idleMs >= DISABLED_IDLE_MS ? Infinity : idleMs;
}

async function run(
  pool: SessionPool,
  shape: Extract<CallShape, { kind: 'run' }>,
  args: TerminalArgs,
  ctx: ToolCallContext<TerminalConfig>,
  slow: boolean,
): Promise<ToolResult> {
  const { config } = pool;
  let lease: SessionLease;
  try {
    lease = await pool.claim(shape.sessionId, args.sandbox === false);
  } catch (error) {
    return sessionError(error);
  }
  const { session } = lease;
  if (ctx.signal.aborted) {
    pool.abandon(lease);
    return failure('ABORTED', 'aborted before the command started');
  }
  const startedAt = performance.now();
  try {
    let seq: number;
    try {
      seq = session.run(shape.command, {
        ...(args.cwd === undefined ? {} : { cwd: args.cwd }),
        ...(args.env === undefined ? {} : { env: args.env }),
      });
    } catch (error) {
      // Writing the command file failed (disk full, temp dir removed): nothing was typed.
      pool.abandon(lease);
      return failure('COMMAND_START_FAILED', `could not start the command: ${(error as Error).message}`);
    }
    ctx.events.emit('terminal.command.started', {
      sessionId: session.id,
      seq,
      command: shape.command,
      cwd: session.cwd,
    });
    // A known slow command (npm install, cargo build, pytest ...) waits slowCommandTimeout with no
    // idle return, unless the call set its own timeout / idle_ms.
    const longWait = slow && !shape.background;
    const timeoutMs = (args.timeout ?? (longWait ? config.slowCommandTimeout : config.defaultTimeout)) * 1000;
    const waitFor = args.wait_for === undefined ? undefined : compileWaitFor(args.wait_for);
    const mode: CollectMode = shape.background
      ? {
          background: true,
          // Startup output for ~2 s; with wait_for, until it matches (or the timeout).
          timeoutMs: waitFor ? timeoutMs : Math.min(timeoutMs, config.backgroundCollectMs),
          idleMs: Infinity,
          detectPrompt: false,
          ...(waitFor ? { waitFor } : {}),
        }
      : {
          background: false,
          timeoutMs,
          idleMs: waitFor ? Infinity : idleOf(args.idle_ms ?? (longWait ? 0 : config.defaultIdleMs)),
          detectPrompt: true,
          ...(waitFor ? { waitFor } : {}),
        };
    if (shape.background) session.lifecycle.report('background');
    // The caller gave up on a command this call started: nothing of it may keep running. Killed in
    // the abort event itself (SIGKILL, no grace), so the tree is gone when the caller hears of it.
    const cancel = () => {
      // Errors surface from the awaited cancel below.
      pool.cancel(session.id, 'killed').catch(() => undefined);
    };
    ctx.signal.addEventListener('abort', cancel, { once: true });
    let outcome: CollectOutcome;
    try {
      outcome = await pool.collect(session, mode, ctx.signal);
    } finally {
      ctx.signal.removeEventListener('abort', cancel);
    }
    if (outcome === 'aborted') {
      await pool.cancel(session.id, 'killed');
      return failure('ABORTED', 'aborted; the session and its processes were killed');
    }
    if (outcome === 'broken') return await broken(pool, session.id);
    return await pool.withSandboxActivity(
      session,
      pool.result(session, outcome === 'matched' ? 'background' : outcome, startedAt, {
        waitFor: waitFor !== undefined,
      }),
    );
  } finally {
    lease.release();
  }
}

/** A shell that stopped following the protocol is killed, never talked to. */
async function broken(pool: SessionPool, sessionId: number): Promise<ToolResult> {
  await pool.kill(sessionId, 'broken');
  return failure(
    'SHELL_PROTOCOL_BROKEN',
    `session_id ${sessionId}: its shell stopped following the terminal protocol (the command did not start: ` +
      `the shell made no progress for ${pool.config.commandStartTimeoutMs} ms after it was typed), so the session and its processes were killed. ` +
      'Run the command again; it starts in a new shell',
  );
}

async function answer(
  pool: SessionPool,
  sessionId: number,
  input: string,
  args: TerminalArgs,
  ctx: ToolCallContext<TerminalConfig>,
  judged: JudgedInput | undefined,
): Promise<ToolResult> {
  const { config } = pool;
  let lease: SessionLease;
  try {
    lease = pool.acquire(sessionId);
  } catch (error) {
    return sessionError(error);
  }
  const { session } = lease;
  try {
    let note: string | undefined;
    if (input.length > 0) {
      // Checked again now: the permission hook ran before the gate's (possibly long) decision.
      const now = inspectInput(session, input);
      if (now.judged && now.judged.command !== judged?.command) {
        return failure(
          'INPUT_READER_CHANGED',
          `input: session_id ${sessionId} now reads it with a shell (${now.judged.reader.shell}, pid ${now.judged.reader.pid}) ` +
            'that the permission check did not see; nothing was typed. Send the input again so it is checked as a command',
        );
      }
      // Logged without its content: it may be a password.
      ctx.logger.info({ sessionId, inputLength: input.length }, 'terminal input');
      ctx.events.emit('terminal.input', { sessionId, length: input.length });
      // Enter on a keyboard is \r; the tty turns it into \n for line-reading programs.
      if (session.done || !session.lifecycle.commandRunning) {
        note = 'input was not sent: the command had already finished';
      } else if (!session.write(input.replace(/\r?\n/g, '\r'))) {
        note = 'input was not sent: the command has not started yet';
      } else if (now.line) {
        // What the foreground shell's line holds now, judged with the next line end.
        session.shellLine = now.line;
      } else if (!ONLY_EOF.test(input)) {
        // Typed into a program, or a Ctrl-C emptied the line (a lone Ctrl-D leaves it).
        session.shellLine = undefined;
      }
    }
    const wasBackground = session.lifecycle.state === 'background';
    if (session.lifecycle.state === 'waiting') session.lifecycle.report('running');
    const startedAt = performance.now();
    const timeoutMs = (args.timeout ?? config.defaultTimeout) * 1000;
    const waitFor = args.wait_for === undefined ? undefined : compileWaitFor(args.wait_for);
    // With wait_for only a match, the end, a prompt or the timeout return (no quiet return).
    const idleMs = waitFor
      ? Infinity
      : idleOf(args.idle_ms ?? (wasBackground ? config.pollQuietMs : config.defaultIdleMs));
    const outcome = await pool.collect(
      session,
      { background: false, timeoutMs, idleMs, detectPrompt: true, ...(waitFor ? { waitFor } : {}) },
      ctx.signal,
    );
    if (outcome === 'aborted') {
      // The program belongs to an earlier call: stop reading, leave it running.
      if (session.lifecycle.state === 'running') session.lifecycle.report('waiting');
      return failure('ABORTED', 'aborted while reading; the session keeps running');
    }
    if (outcome === 'broken') return await broken(pool, sessionId);
    const result = await pool.withSandboxActivity(
      session,
      pool.result(
        session,
        outcome === 'matched' ? (wasBackground ? 'background' : 'waiting') : outcome,
        startedAt,
        { waitFor: waitFor !== undefined },
      ),
    );
    return note === undefined ? result : { ...result, note };
  } finally {
    lease.release();
  }
}

async function killSession(pool: SessionPool, sessionId: number): Promise<ToolResult> {
  const session = pool.get(sessionId);
  if (!session) return failure('UNKNOWN_SESSION', pool.unknownSession(sessionId));
  const reader = pool.isLeased(sessionId);
  // SIGKILL at once, no grace: ending a session is a cancel of whatever it runs.
  await pool.cancel(sessionId, 'killed');
  if (reader) {
    // Another call is reading it and returns the output; this one just confirms.
    return {
      exit_code: session.exit?.exitCode ?? -1,
      output: '',
      cwd: session.cwd,
      killed: true,
      display: `■ session ${sessionId} killed`,
    };
  }
  const { output, output_file, lost } = pool.takeFinalOutput(session);
  return {
    exit_code: session.exit?.exitCode ?? -1,
    output,
    cwd: session.cwd,
    killed: true,
    ...(output_file === undefined ? {} : { output_file }),
    ...lostFields(lost, output_file),
    display: `■ session ${sessionId} killed`,
  };
}
