import {
  token,
  type PermissionRequest,
  type PluginScope,
  type ToolCallContext,
  type ToolDefinition,
  type ToolResult,
} from '@conch/core';
import type { TerminalConfig } from './config.js';
import type { TerminalSessionInfo } from './session-pool.js';
import type { TerminalArgs } from './terminal-tool.js';

/**
 * Where the terminal tool's sessions run when it is not this machine: @conch/exec-server's
 * `RemoteTerminal` (an ssh host, a container, a pod), which runs this package's session pool in the
 * target. The host keeps the permission gate: `permission` computes the tool's request where the
 * sessions are, the host's gate judges it, and `execute` runs the call there with the decision.
 */
export interface TerminalBackend {
  /** Where the sessions run, as results name it: 'ssh:me@dev:22', 'podman:box'. */
  readonly target: string;
  /** The host terminal plugin's config, applied when the terminal opens in the target. */
  configure(config: Record<string, unknown>): void;
  permission(args: TerminalArgs, ctx: ToolCallContext): Promise<PermissionRequest | undefined>;
  execute(args: TerminalArgs, ctx: ToolCallContext): Promise<ToolResult>;
  /** The target's sessions as last seen. */
  list(): TerminalSessionInfo[];
}

/**
 * The terminal backend provided by @conch/exec-server's `executor` plugin for a remote target. The
 * token's name is the key, so the provider need not import this package's copy of it.
 */
export const TERMINAL_BACKEND = token<TerminalBackend>('conch.terminal.TerminalBackend');

/** What a call's `prepare` chose: the backend (resolved once per call) or the local tool's own plan. */
type Routed = { backend: TerminalBackend } | { local: unknown };

/**
 * The terminal tool with its calls routed per call: to the backend provided under
 * `TERMINAL_BACKEND` when one is (resolved in `prepare`, so exposure order does not matter and the
 * three phases of one call go to the same place), else to the local tool. The backend gets the
 * plugin's config once, before its first call.
 */
export function routeToBackend(
  local: ToolDefinition<TerminalArgs, ToolResult, TerminalConfig>,
  scope: Pick<PluginScope, 'resolveOptional'>,
  config: TerminalConfig,
): ToolDefinition<TerminalArgs, ToolResult, TerminalConfig, Routed> {
  const configured = new WeakSet<TerminalBackend>();
  return {
    ...local,
    async prepare(args, ctx) {
      const backend = scope.resolveOptional(TERMINAL_BACKEND);
      if (backend) {
        if (!configured.has(backend)) {
          backend.configure(config as unknown as Record<string, unknown>);
          configured.add(backend);
        }
        return { backend };
      }
      return { local: local.prepare ? await local.prepare(args, ctx) : undefined };
    },
    // A caller that skipped prepare (routed undefined) gets the local tool, as before routing existed.
    permission(args, ctx, routed: Routed | undefined) {
      if (routed && 'backend' in routed) return routed.backend.permission(args, ctx);
      return local.permission?.(args, ctx, routed?.local);
    },
    execute(args, ctx, routed: Routed | undefined) {
      if (routed && 'backend' in routed) return routed.backend.execute(args, ctx);
      return local.execute(args, ctx, routed?.local);
    },
  };
}
