import type { DependencyContainer, InjectionToken } from 'tsyringe';
import type { z } from 'zod';
import type { EventBus } from './events.js';
import type { Logger } from './logger.js';
import type { ApproveFn, PermissionDecision, PermissionRequest } from './permission.js';
import type { Token } from './token.js';

/** Where a registry lives: its working directory and its private temp directory. */
export interface RegistryEnvironment {
  /** The registry's working directory (tools default to it). */
  readonly cwd: string;
  /** The registry's private temp dir, created on first call; removed by dispose() unless kept. */
  tempDir(): string;
}

/** What every plugin and tool call can read: config, logger, events, where the registry lives. */
export interface PluginScope<TConfig = unknown> {
  readonly pluginName: string;
  readonly config: TConfig;
  readonly logger: Logger;
  readonly events: EventBus;
  readonly env: RegistryEnvironment;
  /** The service a partner provided under `token`, if one is exposed; resolve at call time. */
  resolveOptional<T>(token: Token<T>): T | undefined;
  /** @deprecated a raw tsyringe token; use a typed `Token`. Removed in the next release. */
  resolveOptional<T>(token: InjectionToken<T>): T | undefined;
  /** Whether a plugin of that name is exposed on this registry. */
  isExposed(pluginName: string): boolean;
}

/** What a plugin's `setup` gets when it is exposed. */
export interface PluginContext<TConfig = unknown> extends PluginScope<TConfig> {
  /** Makes a service available to partners and the host (`registry.resolveOptional(token)`). Once per token. */
  provide<T>(token: Token<T>, value: T): void;
  /** Runs at registry dispose, in reverse order of registration (after the plugins' own dispose). */
  onDispose(fn: () => void | Promise<void>): void;
  /** Adds a section to `registry.status()` (read when the host asks). */
  reportStatus(section: string, read: () => unknown): void;
  /**
   * @deprecated the registry's tsyringe container, for plugins still on `register`/`tools`.
   * Use `provide` / `resolveOptional`. Removed in the next release.
   */
  readonly container: DependencyContainer;
}

/** What `setup` returns: the plugin's tools and what the registry should do with them. */
export interface PluginSetup {
  tools?: readonly ToolDefinition[];
  /** Guidance for the model about these tools (joined into `registry.systemInstructions()`). */
  instructions?: string | (() => string | undefined);
  /** Releases what setup started; runs at registry dispose, before `onDispose` callbacks. */
  dispose?: () => void | Promise<void>;
}

export interface ToolProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** What a tool's execute gets on each call. */
export interface ToolCallContext<TConfig = unknown> extends PluginScope<TConfig> {
  readonly callId: string;
  readonly toolName: string;
  /** Fires when the caller aborts; a tool must stop its work and kill what it started. */
  readonly signal: AbortSignal;
  /** Per-call approver (e.g. MCP elicitation), preferred by the gate over the configured one. */
  readonly approve?: ApproveFn;
  /** Reports progress to callers that listen (MCP progress notifications, UIs). */
  reportProgress(progress: ToolProgress): void;
  /** The permission gate's decision for this call, when the tool asked it (`permission` hook). */
  readonly decision?: PermissionDecision;
}

export interface ToolAnnotations {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

export type ToolResult = Record<string, unknown>;

export interface ToolDefinition<
  TArgs = any,
  TResult extends ToolResult = ToolResult,
  TConfig = any,
  TPrepared = any,
> {
  /** The name models see; unique across a registry. `^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`. */
  name: string;
  description: string;
  /** zod schema of the arguments; converted once to JSON Schema at expose time. */
  inputSchema: z.ZodType<TArgs>;
  annotations?: ToolAnnotations;
  /**
   * Builds, once per call, what both the permission gate and `execute` work from (for a command:
   * the parse, argv or script, shell and cwd), so what is judged is exactly what runs. Its result
   * is handed to `permission` and to `execute`.
   */
  prepare?: (args: TArgs, ctx: ToolCallContext<TConfig>) => TPrepared | Promise<TPrepared>;
  /**
   * What the permission gate must decide before the tool runs. Return undefined when this call
   * needs no decision (e.g. answering a prompt). Tools without the hook never consult the gate.
   */
  permission?: (
    args: TArgs,
    ctx: ToolCallContext<TConfig>,
    prepared: TPrepared,
  ) => PermissionRequest | undefined | Promise<PermissionRequest | undefined>;
  execute(args: TArgs, ctx: ToolCallContext<TConfig>, prepared: TPrepared): Promise<TResult> | TResult;
}

export interface PluginDefinition<TConfig = any> {
  /** Plugin name used with `registry.expose`. `^[a-z][a-z0-9-]*$`. */
  name: string;
  version: string;
  description?: string;
  /**
   * zod schema of the config object (camelCase keys; snake_case aliases are mapped). Without one
   * the plugin takes no config: any key given is refused.
   */
  configSchema?: z.ZodType<TConfig>;
  /**
   * Partners exposed with their defaults when this plugin is exposed and they are not yet
   * (the config mapper may derive the partner's config from this plugin's config).
   */
  partners?: readonly {
    plugin: string;
    /** Derives the partner's config from this plugin's; default `{}`. */
    config?: (config: TConfig) => Record<string, unknown> | undefined;
    /** Whether to expose the partner for this config; default always. */
    when?: (config: TConfig) => boolean;
  }[];
  /**
   * The one lifecycle hook: runs once per exposure with the validated config. Create per-exposure
   * state here (it lives in this closure, never in module scope), provide services with
   * `ctx.provide`, and return the tools.
   */
  setup?: (ctx: PluginContext<TConfig>) => PluginSetup | Promise<PluginSetup>;
  /** @deprecated use `setup` returning `{ tools }`. Removed in the next release. */
  tools?: readonly ToolDefinition[] | ((ctx: PluginContext<TConfig>) => readonly ToolDefinition[]);
  /** @deprecated use `setup` (with `ctx.provide`). Removed in the next release. */
  register?: (ctx: PluginContext<TConfig>) => void;
  /** @deprecated use `setup` returning `{ instructions }`. Removed in the next release. */
  systemInstructions?: string | ((ctx: PluginContext<TConfig>) => string | undefined);
  /** @deprecated use `setup` returning `{ dispose }`. Removed in the next release. */
  dispose?: () => void | Promise<void>;
}

/** Identity helper for type inference of a plugin definition. */
export function definePlugin<TConfig>(plugin: PluginDefinition<TConfig>): PluginDefinition<TConfig> {
  return plugin;
}

/** Identity helper for type inference of a tool definition. */
export function defineTool<TArgs, TResult extends ToolResult = ToolResult, TConfig = any, TPrepared = any>(
  tool: ToolDefinition<TArgs, TResult, TConfig, TPrepared>,
): ToolDefinition<TArgs, TResult, TConfig, TPrepared> {
  return tool;
}
