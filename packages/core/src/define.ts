import type { DependencyContainer, InjectionToken } from 'tsyringe';
import type { z } from 'zod';
import type { EventBus } from './events.js';
import type { Logger } from './logger.js';
import type { ToolArgumentLimits } from './argument-limits.js';
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

/**
 * A service a plugin declares it needs (`PluginDefinition.needs`): a token alone is required (the
 * registry exposes a known plugin that `provides` it first, or refuses with `MISSING_DEPENDENCY`);
 * `{ token, optional: true }` resolves to undefined while no exposed plugin provides it.
 */
export type Dependency<T = unknown> = Token<T> | { readonly token: Token<T>; readonly optional?: boolean };

/** `needs` of a plugin: the name each service gets in `ctx.deps` -> its token. */
export type Dependencies = Readonly<Record<string, Dependency<any>>>;

/**
 * The type of `ctx.deps` for a `needs` declaration: required services as their type, optional ones
 * as `T | undefined`.
 */
export type ResolvedDependencies<TNeeds> = 0 extends 1 & TNeeds
  ? any
  : {
      readonly [K in keyof TNeeds]: TNeeds[K] extends Token<infer T>
        ? T
        : TNeeds[K] extends { readonly token: Token<infer T>; readonly optional: false }
          ? T
          : TNeeds[K] extends { readonly token: Token<infer T>; readonly optional: boolean }
            ? T | undefined
            : TNeeds[K] extends { readonly token: Token<infer T> }
              ? T
              : never;
    };

/** What a plugin's `setup` gets when it is exposed. */
export interface PluginContext<TConfig = unknown, TDeps = any> extends PluginScope<TConfig> {
  /**
   * The services the plugin declared in `needs`, resolved by the registry's tsyringe child
   * container. A required one is there before `setup` runs; an optional one is read each time it
   * is accessed (undefined while no exposed plugin provides it), so read it at call time
   * (`ctx.deps.gate` inside `execute`) to see a partner exposed after this plugin.
   */
  readonly deps: TDeps;
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
  /**
   * Byte limits of this tool's string arguments, checked before anything else sees them: every
   * string is at most the registry's `argumentLimits.maxStringBytes` (64 KiB) unless named here
   * (`{ fields: { path: 4096, content: 4 * 1024 * 1024, 'env.*': 128 * 1024 } }`). A longer one
   * fails with `INVALID_ARGUMENTS` naming the field, the limit and the size given.
   */
  argumentLimits?: ToolArgumentLimits;
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
  /**
   * Runs once when the tool is exposed, with its plugin's setup context (before any call): a tool
   * that needs a registry service makes sure of it here, so it works in whatever plugin returns it
   * (a command template starts the registry's process manager). A throw fails the expose,
   * naming the plugin and the tool.
   */
  onExpose?: (ctx: PluginContext<TConfig>) => void;
  /**
   * One short line saying what a call does, for UIs (`terminal(npm test)`, `read_file(src/a.ts)`).
   * Gets the arguments as the schema parsed them; `registry.describeCall` keeps it to one line of
   * at most 120 characters and falls back to `name(first string argument)` when this is absent,
   * throws, or the arguments do not parse.
   */
  describeCall?: (args: TArgs) => string;
}

export interface PluginDefinition<TConfig = any, TNeeds extends Dependencies = any> {
  /** Plugin name used with `registry.exposeTool` (or `registry.expose`, the same call). `^[a-z][a-z0-9-]*$`. */
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
   * The services this plugin provides with `ctx.provide` in its setup. The registry reads it to
   * derive exposure order: a plugin that needs one of these tokens gets this plugin exposed first.
   */
  provides?: readonly Token<any>[];
  /**
   * The services this plugin needs, by the name they get in `ctx.deps`:
   * `needs: { bg: BACKGROUND_SERVICE, gate: { token: PERMISSION_GATE, optional: true } }`.
   * Before `setup` runs, a required token no exposed plugin provides makes the registry expose the
   * known plugin that declares it in `provides` (with its default config); none ->
   * `MISSING_DEPENDENCY` naming this plugin, the token and the plugins that could provide it; a
   * cycle of required needs -> `CIRCULAR_DEPENDENCY` naming the plugins.
   */
  needs?: TNeeds;
  /**
   * The one lifecycle hook: runs once per exposure with the validated config. Create per-exposure
   * state here (it lives in this closure, never in module scope), provide services with
   * `ctx.provide`, read the declared services from `ctx.deps`, and return the tools.
   */
  setup?: (ctx: PluginContext<TConfig, ResolvedDependencies<TNeeds>>) => PluginSetup | Promise<PluginSetup>;
  /** @deprecated use `setup` returning `{ tools }`. Removed in the next release. */
  tools?: readonly ToolDefinition[] | ((ctx: PluginContext<TConfig>) => readonly ToolDefinition[]);
  /** @deprecated use `setup` (with `ctx.provide`). Removed in the next release. */
  register?: (ctx: PluginContext<TConfig>) => void;
  /** @deprecated use `setup` returning `{ instructions }`. Removed in the next release. */
  systemInstructions?: string | ((ctx: PluginContext<TConfig>) => string | undefined);
  /** @deprecated use `setup` returning `{ dispose }`. Removed in the next release. */
  dispose?: () => void | Promise<void>;
}

/** Identity helper for type inference of a plugin definition (its config and `ctx.deps`). */
export function definePlugin<TConfig, TNeeds extends Dependencies = Record<never, never>>(
  plugin: PluginDefinition<TConfig, TNeeds>,
): PluginDefinition<TConfig, TNeeds> {
  return plugin;
}

/** Identity helper for type inference of a tool definition. */
export function defineTool<TArgs, TResult extends ToolResult = ToolResult, TConfig = any, TPrepared = any>(
  tool: ToolDefinition<TArgs, TResult, TConfig, TPrepared>,
): ToolDefinition<TArgs, TResult, TConfig, TPrepared> {
  return tool;
}
