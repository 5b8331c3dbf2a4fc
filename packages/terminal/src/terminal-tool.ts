import { resolve } from 'node:path';
import { z } from 'zod';
import { defineTool, type ToolCallContext, type ToolDefinition, type ToolResult } from '@conch/core';
import type { TerminalConfig } from './config.js';
import type { CollectMode, SessionPool } from './session-pool.js';
import { ENV_NAME } from './shell-scripts.js';

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
    .describe('Seconds to wait before returning a session_id for a command still running (default 60).'),
  idle_ms: z
    .number()
    .int()
    .positive()
    .optional()
    .describe('Milliseconds of silence after which a running command is reported as waiting for input.'),
});

export type TerminalArgs = z.output<typeof terminalInputSchema>;

export type CallShape =
  | { kind: 'run'; command: string; sessionId: number | undefined; background: boolean }
  | { kind: 'input'; sessionId: number; input: string }
  | { kind: 'kill'; sessionId: number }
  | { kind: 'invalid'; error: string };

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
    if (hasCommand || args.input !== undefined) {
      return {
        kind: 'invalid',
        error: `kill: true takes only session_id; given also ${hasCommand ? 'command' : 'input'}. Kill first, then run the command`,
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
    return {
      kind: 'run',
      command: args.command!,
      sessionId: args.session_id,
      background: args.background === true,
    };
  }
  if (args.input !== undefined) {
    if (args.session_id === undefined) {
      return {
        kind: 'invalid',
        error: `input needs session_id: the session whose program should receive it (from a result with state "waiting" or "background"); given none. ${SHAPES}`,
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
  'Long output is shortened; the full text is in output_file.',
].join('\n');

/** The `terminal` tool over a session pool. */
export function createTerminalTool(
  pool: SessionPool,
): ToolDefinition<TerminalArgs, ToolResult, TerminalConfig> {
  return defineTool<TerminalArgs, ToolResult, TerminalConfig>({
    name: 'terminal',
    description: TERMINAL_DESCRIPTION,
    inputSchema: terminalInputSchema,
    annotations: { destructiveHint: true, openWorldHint: true },
    permission(args) {
      const shape = classifyCall(args);
      // input, polls and kills reach a program the gate already allowed; nothing new runs.
      if (shape.kind !== 'run') return undefined;
      return {
        kind: 'command',
        tool: 'terminal',
        command: shape.command,
        cwd: resolve(pool.expectedCwd(shape.sessionId), args.cwd ?? '.'),
      };
    },
    async execute(args, ctx) {
      const shape = classifyCall(args);
      switch (shape.kind) {
        case 'invalid':
          return { error: shape.error };
        case 'kill':
          return killSession(pool, shape.sessionId);
        case 'input':
          return answer(pool, shape.sessionId, shape.input, args, ctx);
        case 'run':
          return run(pool, shape, args, ctx);
      }
    },
  });
}

async function run(
  pool: SessionPool,
  shape: Extract<CallShape, { kind: 'run' }>,
  args: TerminalArgs,
  ctx: ToolCallContext<TerminalConfig>,
): Promise<ToolResult> {
  const { config } = pool;
  const claimed = await pool.claim(shape.sessionId);
  if (typeof claimed === 'string') return { error: claimed };
  const session = claimed;
  if (ctx.signal.aborted) {
    pool.setState(session, 'idle');
    return { error: 'aborted before the command started' };
  }
  session.reading = true;
  const startedAt = Date.now();
  try {
    let seq: number;
    try {
      seq = session.run(shape.command, {
        ...(args.cwd === undefined ? {} : { cwd: args.cwd }),
        ...(args.env === undefined ? {} : { env: args.env }),
      });
    } catch (error) {
      // Writing the command file failed (disk full, temp dir removed): nothing was typed.
      pool.setState(session, 'idle');
      return { error: `could not start the command: ${(error as Error).message}` };
    }
    ctx.events.emit('terminal.command.started', {
      sessionId: session.id,
      seq,
      command: shape.command,
      cwd: session.cwd,
    });
    const timeoutMs = (args.timeout ?? config.defaultTimeout) * 1000;
    const mode: CollectMode = shape.background
      ? {
          background: true,
          timeoutMs: Math.min(timeoutMs, config.backgroundCollectMs),
          idleMs: Infinity,
          detectPrompt: false,
        }
      : { background: false, timeoutMs, idleMs: args.idle_ms ?? config.defaultIdleMs, detectPrompt: true };
    if (shape.background) pool.setState(session, 'background');
    const outcome = await pool.collect(session, mode, ctx.signal);
    if (outcome === 'aborted') {
      // The caller gave up on a command this call started: nothing of it may keep running.
      await pool.kill(session.id, 'killed');
      return { error: 'aborted; the session and its processes were killed' };
    }
    return pool.result(session, outcome, startedAt);
  } finally {
    session.reading = false;
  }
}

async function answer(
  pool: SessionPool,
  sessionId: number,
  input: string,
  args: TerminalArgs,
  ctx: ToolCallContext<TerminalConfig>,
): Promise<ToolResult> {
  const { config } = pool;
  const session = pool.get(sessionId);
  if (!session) return { error: pool.unknownSession(sessionId) };
  if (session.reading) {
    return {
      error: `session_id ${sessionId} is being read by another call right now; wait for that result, then try again`,
    };
  }
  if (session.state === 'idle' || session.state === 'starting') {
    return {
      error: `session_id ${sessionId} has no running command (its last command finished and its result was returned); start a new one with { command }`,
    };
  }
  let note: string | undefined;
  if (input.length > 0) {
    // Logged without its content: it may be a password.
    ctx.logger.info({ sessionId, inputLength: input.length }, 'terminal input');
    ctx.events.emit('terminal.input', { sessionId, length: input.length });
    // Enter on a keyboard is \r; the tty turns it into \n for line-reading programs.
    if (session.done || !session.write(input.replace(/\r?\n/g, '\r'))) {
      note = 'input was not sent: the command had already finished';
    }
  }
  const wasBackground = session.state === 'background';
  if (!wasBackground) pool.setState(session, 'running');
  session.reading = true;
  const startedAt = Date.now();
  try {
    const timeoutMs = (args.timeout ?? config.defaultTimeout) * 1000;
    const idleMs = args.idle_ms ?? (wasBackground ? config.pollQuietMs : config.defaultIdleMs);
    const outcome = await pool.collect(
      session,
      { background: false, timeoutMs, idleMs, detectPrompt: true },
      ctx.signal,
    );
    if (outcome === 'aborted') {
      // The program belongs to an earlier call: stop reading, leave it running.
      if (!wasBackground) pool.setState(session, 'waiting');
      return { error: 'aborted while reading; the session keeps running' };
    }
    if (wasBackground) pool.setState(session, 'background');
    const result = pool.result(session, outcome, startedAt);
    return note === undefined ? result : { ...result, note };
  } finally {
    session.reading = false;
  }
}

async function killSession(pool: SessionPool, sessionId: number): Promise<ToolResult> {
  const session = pool.get(sessionId);
  if (!session) return { error: pool.unknownSession(sessionId) };
  const reader = session.reading;
  await pool.kill(sessionId, 'killed');
  if (reader) {
    // Another call is reading it and returns the output; this one just confirms.
    return { exit_code: session.exit?.exitCode ?? -1, output: '', cwd: session.cwd, killed: true };
  }
  const { output, output_file } = pool.takeFinalOutput(session);
  return {
    exit_code: session.exit?.exitCode ?? -1,
    output,
    cwd: session.cwd,
    killed: true,
    ...(output_file === undefined ? {} : { output_file }),
  };
}
