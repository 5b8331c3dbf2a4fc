import {
  definePlugin,
  PERMISSION_GATE,
  PluginRegistry,
  type KernelPolicy,
  type Logger,
  type PermissionDecision,
  type PermissionRequest,
  type PluginContext,
  type PluginSetup,
  type ToolCallContext,
  type ToolDefinition,
  type ToolResult,
  clearStaleStat,
} from '@conch/core';
import { PROCESS_MANAGER, type ProcessManager } from '@conch/process';
import type * as TerminalModule from '@conch/terminal';
import type { TerminalService, TerminalSessionInfo } from '@conch/terminal';
import { z } from 'zod';
import type { ClientLink } from './exec-server.js';
import { ServerError } from './server-error.js';

/** Terminal events re-emitted on the host's bus (`terminal.session.output` only when asked). */
const FORWARDED_EVENTS = [
  'terminal.session.started',
  'terminal.session.state',
  'terminal.session.exited',
  'terminal.command.started',
  'terminal.command.finished',
  'terminal.input',
] as const;

/** Results of recent calls kept for a client whose stream dropped while they ran (`terminal.result`). */
const KEPT_RESULTS = 32;

/**
 * The terminal plugin, running in the target: its session pool (PTYs through the target's
 * process manager, marker protocol, prompt and tty-read detection, session logs and overflow
 * files in the target's temp dir) is @conch/terminal's own code, loaded on first use.
 *
 * The permission gate stays on the host. The host's terminal tool asks `permission` here (the
 * tool's own hook, which needs the target's sessions: their cwd, what reads the tty), judges the
 * request with its gate, then calls `execute` with the decision. The tool definition is taken from
 * the plugin's setup (run inside a wrapper plugin of this registry) so that both halves of a call
 * run on one tool instance, as in a local registry.
 */
export class TerminalHost {
  private readonly peer: ClientLink;
  private readonly logger: Logger;
  private readonly cwd: string;
  private readonly tempRoot: string;
  private readonly manager: ProcessManager;
  private registry: PluginRegistry | undefined;
  private opening: Promise<{ name: string; description: string; instructions?: string }> | undefined;
  private tool: ToolDefinition | undefined;
  private ctx: PluginContext | undefined;
  private kernelPolicy: KernelPolicy | undefined;
  private readonly calls = new Map<string, AbortController>();
  /**
   * Recent calls' results by call id: a call whose stream dropped while it ran keeps running (its
   * session belongs to the target); a client that re-attaches asks for its result here.
   */
  private readonly results = new Map<string, Promise<{ result: ToolResult }>>();
  private terminalModule: typeof TerminalModule | undefined;
  /** What each call's prepare made, by call id, from its permission step to its execute (bounded). */
  private readonly preparedCalls = new Map<string, unknown>();
  private serviceToken: (typeof TerminalModule)['TERMINAL_SERVICE'] | undefined;
  private readonly pty: { available: boolean; reason?: string };

  constructor(options: {
    link: ClientLink;
    logger: Logger;
    cwd: string;
    tempRoot: string;
    manager: ProcessManager;
    /** Whether node-pty loaded in this server (probed once at initialize). */
    pty?: { available: boolean; reason?: string };
  }) {
    this.pty = options.pty ?? { available: true };
    this.peer = options.link;
    this.logger = options.logger;
    this.cwd = options.cwd;
    this.tempRoot = options.tempRoot;
    this.manager = options.manager;
  }

  /** Exposes the terminal plugin with the host's config (once per connection; later calls get the same tool). */
  open(
    config: Record<string, unknown>,
    forwardOutput: boolean,
  ): Promise<{ name: string; description: string; instructions?: string }> {
    this.opening ??= this.doOpen(config, forwardOutput).catch((error: unknown) => {
      this.opening = undefined;
      throw error;
    });
    return this.opening;
  }

  async permission(callId: string, args: unknown): Promise<{ request: PermissionRequest | null }> {
    const tool = this.openTool();
    const parsed = this.parse(tool, args);
    const controller = new AbortController();
    const ctx = this.callContext(callId, controller.signal, undefined);
    // One plan per call, as in a local registry: the tool's prepare, handed to permission and execute.
    const prepared = await this.prepare(tool, parsed, ctx);
    if (!tool.permission) return { request: null };
    const request = await tool.permission(parsed, ctx, prepared);
    return { request: request ?? null };
  }

  execute(
    callId: string,
    args: unknown,
    decision: PermissionDecision | undefined,
    kernelPolicy: KernelPolicy | null | undefined,
  ): Promise<{ result: ToolResult }> {
    const running = this.run(callId, args, decision, kernelPolicy);
    this.results.set(callId, running);
    if (this.results.size > KEPT_RESULTS) this.results.delete(this.results.keys().next().value!);
    // Kept for `terminal.result`; a failure is also reported to the caller that is still there.
    running.catch(() => undefined);
    return running;
  }

  /** The result of a call started on a stream that dropped (waits for the call to finish). */
  result(callId: string): Promise<{ result: ToolResult }> {
    const running = this.results.get(callId);
    if (!running) {
      throw new ServerError(
        'UNKNOWN_CALL',
        `terminal.result 'callId': expected a recent terminal call of this server; '${callId}' is none (it never arrived, or is too old)`,
      );
    }
    return running;
  }

  private async run(
    callId: string,
    args: unknown,
    decision: PermissionDecision | undefined,
    kernelPolicy: KernelPolicy | null | undefined,
  ): Promise<{ result: ToolResult }> {
    const tool = this.openTool();
    const parsed = this.parse(tool, args);
    // What the host's gate wants the kernel to enforce, read by the plugin when a session starts.
    this.kernelPolicy = kernelPolicy ?? undefined;
    const controller = new AbortController();
    this.calls.set(callId, controller);
    try {
      const ctx = this.callContext(callId, controller.signal, decision);
      // The plan the permission step made (a host that skipped it gets one made now).
      const prepared = this.preparedCalls.has(callId)
        ? this.preparedCalls.get(callId)
        : await this.prepare(tool, parsed, ctx);
      this.preparedCalls.delete(callId);
      const result = await tool.execute(parsed, ctx, prepared);
      return { result };
    } finally {
      this.calls.delete(callId);
    }
  }

  abort(callId: string): Record<string, never> {
    this.calls.get(callId)?.abort(new Error('aborted by the host'));
    return {};
  }

  list(): { sessions: TerminalSessionInfo[] } {
    return { sessions: this.service()?.list() ?? [] };
  }

  /**
   * A session's log, whole or from a byte offset of the raw log (a client that lost its stream
   * reads on from where it was); `size` is the offset to read on from next time.
   */
  async readLog(
    id: number,
    clean: boolean | undefined,
    offset: number | undefined,
  ): Promise<{ text: string; size: number }> {
    const service = this.service();
    if (!service)
      throw new ServerError(
        'TERMINAL_NOT_OPEN',
        'terminal.readLog: expected an open terminal (terminal.open first); none is',
      );
    if (offset !== undefined && !(Number.isInteger(offset) && offset >= 0)) {
      throw new ServerError(
        'INVALID_PARAMS',
        `terminal.readLog 'offset': expected a byte offset (an integer >= 0); given ${JSON.stringify(offset)}`,
      );
    }
    const raw = Buffer.from(await service.readLog(id));
    const slice = raw.subarray(Math.min(offset ?? 0, raw.length)).toString('utf8');
    const text =
      clean && this.terminalModule
        ? this.terminalModule.cleanOutput(slice, { maxLineChars: Number.MAX_SAFE_INTEGER }).full
        : slice;
    return { text, size: raw.length };
  }

  async kill(id: number): Promise<{ killed: boolean }> {
    const service = this.service();
    return { killed: service ? await service.kill(id) : false };
  }

  /** Kills every session (and its tree) and disposes the registry. */
  async dispose(): Promise<void> {
    for (const controller of this.calls.values())
      controller.abort(new Error('the exec server is shutting down'));
    await this.registry?.dispose();
  }

  private service(): TerminalService | undefined {
    if (!this.registry || !this.serviceToken) return undefined;
    return this.registry.resolveOptional(this.serviceToken) as TerminalService | undefined;
  }

  private openTool(): ToolDefinition {
    if (!this.tool) {
      throw new ServerError(
        'TERMINAL_NOT_OPEN',
        "terminal: expected an open terminal (call 'terminal.open' first); none is",
      );
    }
    return this.tool;
  }

  private async prepare(tool: ToolDefinition, args: unknown, ctx: ToolCallContext): Promise<unknown> {
    const prepared: unknown = tool.prepare ? await tool.prepare(args, ctx) : undefined;
    this.preparedCalls.set(ctx.callId, prepared);
    // A call denied by the host's gate never comes back for its plan.
    if (this.preparedCalls.size > 64) this.preparedCalls.delete(this.preparedCalls.keys().next().value!);
    return prepared;
  }

  private parse(tool: ToolDefinition, args: unknown): unknown {
    const parsed = tool.inputSchema.safeParse(args ?? {});
    if (!parsed.success) {
      throw new ServerError(
        'INVALID_PARAMS',
        `terminal arguments: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
      );
    }
    return parsed.data;
  }

  private callContext(
    callId: string,
    signal: AbortSignal,
    decision: PermissionDecision | undefined,
  ): ToolCallContext {
    const ctx = this.ctx!;
    return {
      ...ctx,
      callId,
      toolName: 'terminal',
      signal,
      reportProgress: () => {},
      ...(decision ? { decision } : {}),
    };
  }

  private async doOpen(
    config: Record<string, unknown>,
    forwardOutput: boolean,
  ): Promise<{ name: string; description: string; instructions?: string }> {
    if (!this.pty.available) {
      // Refused without loading node-pty again (see probePty): the server and its work carry on.
      throw new ServerError(
        'TERMINAL_UNAVAILABLE',
        `terminal sessions: expected node-pty to load in the target (${process.platform}-${process.arch}); it did not: ${this.pty.reason ?? 'unknown reason'}. ` +
          'Processes, background tasks and files still work there',
      );
    }
    let terminal: typeof TerminalModule;
    try {
      clearStaleStat(); // a lazy import of a linked package: see @conch/core's stale-stat.ts
      terminal = await import('@conch/terminal');
    } catch (error) {
      throw new ServerError(
        'TERMINAL_UNAVAILABLE',
        `terminal sessions: expected node-pty to load in the target (${process.platform}-${process.arch}); it did not: ${(error as Error).message}`,
        error,
      );
    }
    this.terminalModule = terminal;
    const registry = new PluginRegistry({ cwd: this.cwd, logger: this.logger, tempRoot: this.tempRoot });
    this.registry = registry;
    this.serviceToken = terminal.TERMINAL_SERVICE;
    const manager = this.manager;
    // The host's gate decides; here it only tells the plugin what the kernel wall must keep
    // read-only (the host sends its gate's policy with each call), and shares the server's
    // process manager so that terminal PTYs run under the same supervisor as everything else.
    const targetPlugin = definePlugin({
      name: 'exec-server-target',
      version: '0.0.0',
      configSchema: z.strictObject({}),
      setup: (ctx) => {
        ctx.provide(PROCESS_MANAGER, manager);
        ctx.provide(PERMISSION_GATE, {
          check: () =>
            Promise.reject(
              new ServerError('INTERNAL', 'the exec server judges nothing: the host gate decides every call'),
            ),
          kernelPolicy: () => this.kernelPolicy,
        });
        return {};
      },
    });
    const terminalWrapper = definePlugin({
      name: 'exec-server-terminal',
      version: '0.0.0',
      configSchema: terminal.terminalConfigSchema,
      setup: async (ctx) => {
        // The terminal plugin is on setup() (plugin API v1).
        const setup: PluginSetup = await terminal.terminalPlugin.setup!(ctx);
        const tool = setup.tools?.find((t) => t.name === 'terminal');
        if (!tool)
          throw new ServerError('TERMINAL_UNAVAILABLE', 'the terminal plugin exposed no terminal tool');
        this.tool = tool;
        this.ctx = ctx;
        return setup;
      },
    });
    registry.register(targetPlugin).register(terminalWrapper);
    await registry.expose('exec-server-target');
    await registry.expose('exec-server-terminal', config);
    const events = [...FORWARDED_EVENTS, ...(forwardOutput ? (['terminal.session.output'] as const) : [])];
    for (const name of events) {
      registry.events.on(name, (payload: unknown) => this.peer.notify('event', { name, payload }));
    }
    const tool = this.tool!;
    const instructions = registry.systemInstructions();
    return { name: tool.name, description: tool.description, ...(instructions ? { instructions } : {}) };
  }
}
