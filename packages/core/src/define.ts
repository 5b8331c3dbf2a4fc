import type { DependencyContainer, InjectionToken } from 'tsyringe';
import type { z } from 'zod';
import type { EventBus } from './events.js';
import type { Logger } from './logger.js';
import type { ApproveFn, PermissionRequest } from './permission.js';

/** Where a registry lives: its working directory and its private temp directory. */
export interface RegistryEnvironment {
  /** The registry's working directory (tools default to it). */
  readonly cwd: string;
  /** The registry's private temp dir, created on first call; removed by dispose() unless kept. */
  tempDir(): string;
}

/** What a plugin gets when it is exposed. */
export interface PluginContext<TConfig = unknown> {
  readonly pluginName: string;
  readonly config: TConfig;
  readonly container: DependencyContainer;
  readonly logger: Logger;
  readonly events: EventBus;
  readonly env: RegistryEnvironment;
  /** Resolves a partner service if some exposed plugin registered it, else undefined. */
  resolveOptional<T>(token: InjectionToken<T>): T | undefined;
  /** Whether a plugin of that name is exposed on this registry. */
  isExposed(pluginName: string): boolean;
  /** Runs at registry dispose, in reverse order of registration. */
  onDispose(fn: () => void | Promise<void>): void;
}

export interface ToolProgress {
  progress: number;
  total?: number;
  message?: string;
}

/** What a tool's execute gets on each call. */
export interface ToolCallContext<TConfig = unknown> extends PluginContext<TConfig> {
  readonly callId: string;
  readonly toolName: string;
  /** Fires when the caller aborts; a tool must stop its work and kill what it started. */
  readonly signal: AbortSignal;
  /** Per-call approver (e.g. MCP elicitation), preferred by the gate over the configured one. */
  readonly approve?: ApproveFn;
  /** Reports progress to callers that listen (MCP progress notifications, UIs). */
  reportProgress(progress: ToolProgress): void;
}

export interface ToolAnnotations {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

export type ToolResult = Record<string, unknown>;

export interface ToolDefinition<TArgs = any, TResult extends ToolResult = ToolResult, TConfig = any> {
  /** The name models see; unique across a registry. `^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`. */
  name: string;
  description: string;
  /** zod schema of the arguments; converted once to JSON Schema at expose time. */
  inputSchema: z.ZodType<TArgs>;
  annotations?: ToolAnnotations;
  /**
   * What the permission gate must decide before the tool runs. Return undefined when this call
   * needs no decision (e.g. answering a prompt). Tools without the hook never consult the gate.
   */
  permission?: (args: TArgs, ctx: ToolCallContext<TConfig>) => PermissionRequest | undefined;
  execute(args: TArgs, ctx: ToolCallContext<TConfig>): Promise<TResult> | TResult;
}

export interface PluginDefinition<TConfig = any> {
  /** Plugin name used with exposeTool. `^[a-z][a-z0-9-]*$`. */
  name: string;
  version: string;
  description?: string;
  /** zod schema of the config object (camelCase keys; snake_case aliases are mapped). */
  configSchema: z.ZodType<TConfig>;
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
  /** The tools, or a function of the plugin context (for tools that close over plugin state). */
  tools: readonly ToolDefinition[] | ((ctx: PluginContext<TConfig>) => readonly ToolDefinition[]);
  /** Runs once at expose time, before tools(): register services into ctx.container here. */
  register?: (ctx: PluginContext<TConfig>) => void;
  /** Guidance for the model about this plugin's tools. */
  systemInstructions?: string | ((ctx: PluginContext<TConfig>) => string | undefined);
  dispose?: () => void | Promise<void>;
}

/** Identity helper for type inference of a plugin definition. */
export function definePlugin<TConfig>(plugin: PluginDefinition<TConfig>): PluginDefinition<TConfig> {
  return plugin;
}

/** Identity helper for type inference of a tool definition. */
export function defineTool<TArgs, TResult extends ToolResult = ToolResult, TConfig = any>(
  tool: ToolDefinition<TArgs, TResult, TConfig>,
): ToolDefinition<TArgs, TResult, TConfig> {
  return tool;
}
