import {
  ConchError,
  defineTool,
  PERMISSION_GATE,
  type EventBus,
  type Logger,
  type PermissionRequest,
  type ToolCallContext,
  type ToolDefinition,
  type ToolResult,
} from '@conch/core';
import { terminalInputSchema, type TerminalArgs, type TerminalSessionInfo } from '@conch/terminal';
import { TransportLostError } from '../errors/transport-lost-error.js';
import type { ExecClient } from './exec-client.js';

export interface RemoteTerminalOptions {
  client: ExecClient;
  /** The terminal plugin's config (validated in the target by the same schema). */
  config?: Record<string, unknown>;
  /** The host's bus: terminal.* events of the target are re-emitted on it. */
  events?: EventBus | undefined;
  logger?: Logger | undefined;
}

export interface RemoteTerminalInfo {
  name: string;
  description: string;
  instructions?: string;
}

/**
 * Terminal sessions in a target: @conch/terminal's session pool runs in the exec server (PTYs from
 * the bundled node-pty, the marker protocol, prompt and tty-read detection, session logs and
 * overflow files there). The host keeps the permission gate: a call asks the target for the
 * tool's permission request (its hook needs the target's sessions), the host's gate judges it,
 * and the call runs with the decision. This is the backend the terminal plugin delegates to when
 * its executor is remote (see the README's integration notes); `createRemoteTerminalTool` makes
 * the tool from it directly.
 */
export class RemoteTerminal {
  readonly target: string;
  private readonly client: ExecClient;
  private readonly options: RemoteTerminalOptions & { config?: Record<string, unknown> };
  private opened: { session: number; info: RemoteTerminalInfo } | undefined;
  private opening: Promise<{ session: number; info: RemoteTerminalInfo }> | undefined;
  private sessions: TerminalSessionInfo[] = [];
  /** Calls whose permission step found the session expired: their execute reports it, running nothing. */
  private readonly expiredCalls = new Map<string, Error>();
  private readonly unsubscribe: (() => void)[] = [];

  constructor(options: RemoteTerminalOptions) {
    this.options = options;
    this.client = options.client;
    this.target = options.client.target;
    this.unsubscribe.push(
      this.client.on('event', ({ name, payload }) => {
        if (!name.startsWith('terminal.')) return;
        // The target's terminal events, as a local terminal emits them.
        (this.options.events as { emit(name: string, payload: unknown): void } | undefined)?.emit(
          name,
          payload,
        );
        if (
          name === 'terminal.session.started' ||
          name === 'terminal.session.exited' ||
          name === 'terminal.session.state'
        ) {
          void this.refresh();
        }
      }),
      // The sessions belong to the server: a dropped connection with a detachable session keeps
      // them (the next call re-attaches); they end only with the server.
      this.client.onSessionEnded((_error, session) => {
        if (this.opened?.session === session) {
          this.opened = undefined;
          this.sessions = [];
        }
      }),
      this.client.participate({
        describe: (session) =>
          this.opened?.session === session ? this.sessions.map((s) => `terminal session ${s.id}`) : [],
        attached: (_result, session) => {
          if (this.opened?.session === session) void this.refresh();
        },
      }),
    );
  }

  /**
   * Sets the terminal plugin's config (the host's terminal plugin passes its own, in its setup):
   * it applies when the terminal opens in the target — the first call, and after a reconnection.
   */
  configure(config: Record<string, unknown>): void {
    this.options.config = config;
  }

  /** Starts the terminal in the target (connecting first); again after a reconnect. */
  async open(): Promise<RemoteTerminalInfo> {
    return (await this.ensureOpen()).info;
  }

  /** The tool's permission request for a call, computed in the target. */
  async permission(args: TerminalArgs, ctx: ToolCallContext): Promise<PermissionRequest | undefined> {
    // Side-effect free, so a connection found dead here is replaced once: the call runs on the
    // new one (whose sessions are new: a session_id from before is reported unknown).
    for (let attempt = 0; ; attempt++) {
      let session: number;
      try {
        ({ session } = await this.ensureOpen());
      } catch (error) {
        if (!isExpired(error)) throw error;
        // Reported by this call's execute as a result (nothing runs: there is nothing to judge).
        this.expiredCalls.set(ctx.callId, error as Error);
        if (this.expiredCalls.size > 16) this.expiredCalls.delete(this.expiredCalls.keys().next().value!);
        return undefined;
      }
      try {
        const { request } = await this.client.requestIn(session, 'terminal.permission', {
          callId: ctx.callId,
          args,
        });
        // The host's sandbox does not reach the target: the gate judges the command as it does a
        // cli command there (sandbox off), and the target's session gets the kernel wall of a
        // command outside the sandbox (protected paths read-only where bubblewrap works there).
        if (request?.kind !== 'command') return request ?? undefined;
        // Judged against the target's home and workspace, not this machine's.
        const { hello, init } = await this.client.connect();
        return {
          ...request,
          sandboxAvailable: false,
          target: { name: this.target, workspace: init.cwd, ...(hello.home ? { home: hello.home } : {}) },
        };
      } catch (error) {
        if (isExpired(error)) {
          // Reported by this call's execute, not papered over by a new server.
          this.expiredCalls.set(ctx.callId, error as Error);
          return undefined;
        }
        if (attempt > 0 || !(error instanceof TransportLostError)) throw error;
      }
    }
  }

  /**
   * Runs a call in the target with the host gate's decision; link failures are results the model
   * can act on. A call whose connection drops while it runs keeps running in the target when the
   * session is detachable: the call re-attaches and returns its result as if nothing happened.
   */
  async execute(args: TerminalArgs, ctx: ToolCallContext): Promise<ToolResult> {
    const release = this.client.hold();
    const onAbort = () => {
      const session = this.opened?.session;
      if (session !== undefined) {
        void this.client.requestIn(session, 'terminal.abort', { callId: ctx.callId }).catch(() => undefined);
      }
    };
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    let sent: number | undefined;
    try {
      const expired = this.expiredCalls.get(ctx.callId);
      if (expired) {
        this.expiredCalls.delete(ctx.callId);
        throw expired;
      }
      const { session } = await this.ensureOpen();
      const policy = ctx.resolveOptional(PERMISSION_GATE)?.kernelPolicy?.();
      // Judged as sandbox off (see permission): the session runs with the wall of 'off'.
      const kernelPolicy = policy ? { ...policy, mode: 'off' as const } : null;
      sent = session;
      const { result } = await this.client
        .requestIn(session, 'terminal.execute', {
          callId: ctx.callId,
          args,
          ...(ctx.decision ? { decision: ctx.decision } : {}),
          kernelPolicy,
        })
        .catch((error: unknown) => {
          // The call runs on in the target: its result is asked for there after the re-attach.
          if (error instanceof TransportLostError && error.keptMs > 0 && !ctx.signal.aborted) {
            return this.client.requestIn(session, 'terminal.result', { callId: ctx.callId });
          }
          throw error;
        });
      // Where it ran: paths in it (cwd, output_file) are the target's.
      return { ...result, target: this.target };
    } catch (error) {
      if (isExpired(error)) {
        return { error: (error as Error).message, error_code: 'SESSION_EXPIRED', target: this.target };
      }
      if (error instanceof TransportLostError) {
        return {
          error:
            error.keptMs > 0 && sent !== undefined
              ? `${error.message}. The terminal sessions there keep running meanwhile: call again (with session_id to see a session's output)`
              : `${error.message}. Terminal sessions there were ended; start the command again`,
          error_code: 'TRANSPORT_LOST',
          target: this.target,
        };
      }
      if (ConchError.isInstance(error) && error.code === 'TERMINAL_UNAVAILABLE') {
        return { error: error.message, error_code: 'TERMINAL_UNAVAILABLE', target: this.target };
      }
      throw error;
    } finally {
      ctx.signal.removeEventListener('abort', onAbort);
      release();
    }
  }

  /** The target's sessions as last seen (refreshed on every session event). */
  list(): TerminalSessionInfo[] {
    return [...this.sessions];
  }

  /** The target's sessions now. */
  async refresh(): Promise<TerminalSessionInfo[]> {
    const session = this.opened?.session;
    // Only on a live connection: a refresh never re-attaches by itself.
    if (session === undefined || this.client.currentGeneration === undefined) return this.list();
    try {
      this.sessions = (await this.client.requestIn(session, 'terminal.list', {})).sessions;
    } catch {
      // the connection went: a session end clears the list
    }
    return this.list();
  }

  async readLog(id: number, options: { clean?: boolean } = {}): Promise<string> {
    const { session } = await this.ensureOpen();
    const { text } = await this.client.requestIn(session, 'terminal.readLog', { id, ...options });
    return text;
  }

  /**
   * A session's raw log from a byte offset (0: the start) and the offset to read on from: a host
   * that lost its connection reads what the session printed meanwhile, not its screen again.
   */
  async readLogFrom(
    id: number,
    offset: number,
    options: { clean?: boolean } = {},
  ): Promise<{ text: string; nextOffset: number }> {
    const { session } = await this.ensureOpen();
    const { text, size } = await this.client.requestIn(session, 'terminal.readLog', {
      id,
      offset,
      ...options,
    });
    return { text, nextOffset: size };
  }

  async kill(id: number): Promise<boolean> {
    const session = this.opened?.session;
    if (session === undefined) return false;
    const { killed } = await this.client.requestIn(session, 'terminal.kill', { id });
    void this.refresh();
    return killed;
  }

  /** Stops relaying; the sessions end with the connection (or the server's terminal dispose). */
  dispose(): void {
    for (const off of this.unsubscribe) off();
  }

  /** The terminal open in the current server (a re-attached one keeps it; a new one opens it again). */
  private ensureOpen(): Promise<{ session: number; info: RemoteTerminalInfo }> {
    const current = this.client.currentSession;
    if (this.opened && this.opened.session === current) return Promise.resolve(this.opened);
    this.opening ??= (async () => {
      // Connects, re-attaches, or finds the session expired (thrown: the call reports it).
      const { session } = await this.client.connect();
      const info = await this.client.requestIn(session, 'terminal.open', {
        config: this.options.config ?? {},
        forwardOutput: (this.options.events?.listenerCount('terminal.session.output') ?? 0) > 0,
      });
      this.opened = { session, info };
      return this.opened;
    })().finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }
}

function isExpired(error: unknown): boolean {
  return ConchError.isInstance(error) && error.code === 'SESSION_EXPIRED';
}

/**
 * The `terminal` tool on a RemoteTerminal: @conch/terminal's input schema, the description the
 * target's terminal plugin gives, the permission hook and execute relayed to the target.
 */
export async function createRemoteTerminalTool(
  terminal: RemoteTerminal,
): Promise<ToolDefinition<TerminalArgs>> {
  const info = await terminal.open();
  return defineTool<TerminalArgs>({
    name: 'terminal',
    description: info.description,
    inputSchema: terminalInputSchema,
    annotations: { destructiveHint: true, openWorldHint: true },
    permission: (args, ctx) => terminal.permission(args, ctx),
    execute: (args, ctx) => terminal.execute(args, ctx),
  });
}
