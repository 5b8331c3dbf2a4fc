import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { container as rootContainer, type DependencyContainer, type InjectionToken } from 'tsyringe';
import { z } from 'zod';
import { normalizeConfigKeys } from './config-aliases.js';
import type {
  Dependency,
  PluginContext,
  PluginDefinition,
  PluginSetup,
  ToolAnnotations,
  ToolCallContext,
  ToolDefinition,
  ToolProgress,
  ToolResult,
} from './define.js';
import {
  checkArgumentLimits,
  compileToolLimits,
  DEFAULT_ARGUMENT_LIMITS,
  type ArgumentLimits,
  type CompiledToolLimits,
} from './argument-limits.js';
import { type DiscoveryWarning, findPluginCandidates, loadCandidate } from './discovery.js';
import { onHostExit } from './host-exit.js';
import { makeTempDir } from './temp-dirs.js';
import { ConchError } from './errors/conch-error.js';
import { CircularDependencyError } from './errors/circular-dependency-error.js';
import { DuplicateToolError } from './errors/duplicate-tool-error.js';
import { MissingDependencyError } from './errors/missing-dependency-error.js';
import { InvalidArgumentsError } from './errors/invalid-arguments-error.js';
import { InvalidConfigError } from './errors/invalid-config-error.js';
import { NoSuchPluginError } from './errors/no-such-plugin-error.js';
import { NoSuchToolError } from './errors/no-such-tool-error.js';
import { PluginLoadError } from './errors/plugin-load-error.js';
import { PluginSetupError } from './errors/plugin-setup-error.js';
import {
  AbortedError,
  InvalidPluginError,
  PermissionGateMissingError,
  PluginAlreadyExposedError,
  RegistryDisposedError,
} from './errors/simple-errors.js';
import { ToolExecutionError } from './errors/tool-execution-error.js';
import { toValidationIssues, type ValidationIssue } from './errors/validation-issue.js';
import { EventBus } from './events.js';
import { toJsonSafe } from './json-safe.js';
import { createDefaultLogger, type Logger } from './logger.js';
import type { ApproveFn, PermissionDecision } from './permission.js';
import { checkPluginShape, toolShape } from './plugin-shape.js';
import { boundedText, compactText, ERROR_TEXT_MAX, oneLine, withResultSummary } from './results.js';
import { formatToolSchema, toJsonSchema, type JsonSchema, type SchemaFormat } from './schema.js';
import { PERMISSION_GATE } from './tokens.js';
import { isToken, type Token } from './token.js';
import { judgePluginCandidates, type TrustAcceptance } from './plugin-trust.js';
import { realPathOf, TrustStore, type UntrustedItem } from './trust-store.js';
import { DuplicateServiceError, NoSuchServiceError } from './errors/service-errors.js';
import { clearStaleStat, removeSync } from './stale-stat.js';

export interface PluginRegistryOptions {
  /** Working directory of the registry and default cwd of its tools. Default: process.cwd(). */
  cwd?: string;
  /** pino logger; each plugin gets a child `{ plugin }`. Default: warnings on stderr, silent in tests. */
  logger?: Logger;
  /** Plugins known without discovery. */
  plugins?: readonly PluginDefinition[];
  /** Directories discover() searches besides node_modules: a plugin package, or a folder of them. */
  pluginDirs?: readonly string[];
  /** Extra start points for the node_modules walk (e.g. the host's own directory). */
  searchPaths?: readonly string[];
  /**
   * The trust store discover() checks plugin packages against (what conch last loaded in each
   * workspace). Default `$XDG_STATE_HOME/conch/trust.json`, else `~/.local/state/conch/trust.json`.
   */
  trustStore?: string;
  /** Where the registry's temp dir is created. Default: os.tmpdir(). */
  tempRoot?: string;
  /** Keep the registry's temp dir (spill files, logs) after dispose(). Default false. */
  keepTempFiles?: boolean;
  /**
   * How long an asynchronous plugin `setup` may take before `expose()` rejects with
   * `PLUGIN_SETUP_TIMEOUT` naming the plugin (a deadline for a hung third-party plugin, in wall
   * time). Default 60 000 ms; `Infinity` waits forever.
   */
  setupTimeoutMs?: number;
  /**
   * Limits on tool-call arguments, checked before the tool's schema and before any work: deeper
   * nesting, more values, a longer string or key fail with `INVALID_ARGUMENTS` naming the field
   * (and for a string the limit and the size given, never the value). Default `{ maxDepth: 64,
   * maxValues: 100_000, maxStringBytes: 65_536, maxKeyBytes: 4096 }`; a tool's own
   * `argumentLimits` override `maxStringBytes` for the fields it names.
   */
  argumentLimits?: Partial<ArgumentLimits>;
  /**
   * Nesting a tool result may have; deeper values are replaced by "[Too deep]" (and logged) so the
   * result still serializes. Default 500.
   */
  maxResultDepth?: number;
}

/** The default of `PluginRegistryOptions.setupTimeoutMs`: generous, since setups may start processes. */
export const DEFAULT_SETUP_TIMEOUT_MS = 60_000;

export interface ExecuteOptions {
  signal?: AbortSignal;
  /** Per-call approver for asks (e.g. MCP elicitation); preferred over the permission config's. */
  approve?: ApproveFn;
  /** Receives progress reports of long tools. */
  onProgress?: (progress: ToolProgress) => void;
  /** Correlates events; generated when absent. */
  callId?: string;
}

export interface ExposeOptions {
  /** Partners not to auto-expose because the caller will expose them itself with its own config. */
  deferPartners?: readonly string[];
}

export interface ToolInfo {
  name: string;
  description: string;
  plugin: string;
  inputSchema: JsonSchema;
  annotations: ToolAnnotations;
}

export interface PluginInfo {
  name: string;
  version: string;
  description?: string;
  source: string;
  exposed: boolean;
}

export interface RegistryStatus {
  plugins: PluginInfo[];
  /** What discovery did not load because it is new or changed since conch last ran in the workspace. */
  trust: TrustStatus;
  /** Packages discovery found and did not load because of their manifest or their plugin. */
  discovery: DiscoveryStatus;
  /** One section per `ctx.reportStatus(section, read)` of the exposed plugins. */
  [section: string]: unknown;
}

export interface DiscoveryReport {
  loaded: string[];
  errors: PluginLoadError[];
  /** Plugin packages in the workspace that are new or changed since conch last ran there: not loaded. */
  untrusted: UntrustedItem[];
  /** Packages that were new or changed and loaded (and re-pinned) because the host accepted them. */
  accepted: UntrustedItem[];
  /** Packages named like plugins (`conch-plugin-*`, `@scope/conch-plugin-*`) without a `conch` field in package.json. */
  warnings: DiscoveryWarning[];
}

/** `registry.status().discovery`: what discovery found and did not load, and why. */
export interface DiscoveryStatus {
  /** Packages named like plugins whose package.json has no `conch` field (each also logged once, at warn). */
  warnings: DiscoveryWarning[];
  /** Plugins skipped with an error (`registry.loadErrors`): an invalid `conch` field, an import that threw, a clash. */
  loadErrors: { code: string; source: string; message: string }[];
}

export interface DiscoverOptions {
  /** More directories to search, besides the registry's `pluginDirs`. */
  dirs?: readonly string[];
  /**
   * `'pinned'` (default): a plugin package inside a workspace loads when it is what conch last
   * loaded there (or on the workspace's first use). `'all'`: the host accepts everything found now
   * (loads and re-pins it). A list of paths: accepts those (package directories as reported).
   */
  trust?: TrustAcceptance;
}

/** `registry.status().trust`: where the pins are kept and what discovery did not load. */
export interface TrustStatus {
  /** The trust store's file. */
  store: string;
  /** Real path of the registry's cwd. */
  workspace: string;
  untrusted: UntrustedItem[];
}

/** The result a denied call returns to the model (a value, not a throw: the model can adapt). */
export interface PermissionDeniedResult extends ToolResult {
  error: string;
  error_code: 'PERMISSION_DENIED';
  /** `[Blocked] <reason>` */
  display: string;
  permission_denied: true;
  rule?: string;
  suggestion?: string;
}

interface KnownPlugin {
  plugin: PluginDefinition;
  source: string;
  /** The package directory of a discovered plugin (to attribute a stack trace to it). */
  dir?: string;
}

interface ExposedTool {
  tool: ToolDefinition;
  plugin: string;
  info: ToolInfo;
  ctx: PluginContext;
  limits: CompiledToolLimits;
}

/** The config schema of a plugin that declares none. */
const NO_CONFIG = z.strictObject({});

const CORE_DIR = dirname(fileURLToPath(import.meta.url));

/**
 * The host's entry point: discovers plugins, exposes their tools with validated config, gives
 * the model their schemas and instructions, and runs tool calls through the execute pipeline
 * (find -> validate -> permission gate -> run). Each registry has its own DI child container,
 * event bus, temp dir and processes; dispose() releases all of them.
 */
export class PluginRegistry {
  readonly cwd: string;
  readonly events: EventBus;
  readonly logger: Logger;
  readonly container: DependencyContainer;
  /** Plugins discovery skipped, with why. */
  readonly loadErrors: PluginLoadError[] = [];
  /** Where discover() keeps its pins. */
  readonly trustStore: TrustStore;

  private readonly options: PluginRegistryOptions;
  private readonly known = new Map<string, KnownPlugin>();
  private readonly exposed = new Map<string, { ctx: PluginContext; setup: PluginSetup }>();
  private readonly exposing = new Set<string>();
  private readonly provided = new Map<string, string>();
  private readonly statusReaders: { section: string; read: () => unknown; owner: string }[] = [];
  /** Fails the expose of each asynchronous setup still running, at dispose (the registry is gone). */
  private readonly pendingSetups = new Set<(error: Error) => void>();
  private readonly toolsByName = new Map<string, ExposedTool>();
  private readonly disposers: { owner: string; fn: () => void | Promise<void> }[] = [];
  private readonly inFlight = new Set<AbortController>();
  private tempDirPath: string | undefined;
  private removeTempHook: (() => void) | undefined;
  private disposing: Promise<void> | undefined;
  private readonly argumentLimits: ArgumentLimits;
  /** Plugin packages discovery did not load, by path (an accepted or trusted one is removed). */
  private readonly untrustedItems = new Map<string, UntrustedItem>();
  /** Packages named like plugins but without a `conch` field, by real path (removed once they have one). */
  private readonly manifestWarnings = new Map<string, DiscoveryWarning>();
  /** The paths already warned about: each package is logged once per registry. */
  private readonly warnedPaths = new Set<string>();
  /** Every `dirs` a discover() call searched, so that trust() searches them again. */
  private readonly searchedDirs = new Set<string>();
  private trustWorkspace: string | undefined;

  constructor(options: PluginRegistryOptions = {}) {
    this.options = options;
    this.cwd = resolve(options.cwd ?? process.cwd());
    this.logger = options.logger ?? createDefaultLogger();
    this.events = new EventBus(this.logger);
    this.container = rootContainer.createChildContainer();
    this.argumentLimits = { ...DEFAULT_ARGUMENT_LIMITS, ...options.argumentLimits };
    this.trustStore = new TrustStore({
      ...(options.trustStore === undefined ? {} : { file: options.trustStore }),
      logger: this.logger,
    });
    for (const plugin of options.plugins ?? []) this.register(plugin, 'host');
  }

  /** Adds a plugin definition the host imported itself. Throws on an invalid or duplicate one. */
  register(plugin: PluginDefinition, source = 'host'): this {
    this.assertAlive('register a plugin');
    const check = checkPluginShape(plugin);
    if (!check.ok) throw new InvalidPluginError(check.detail);
    const existing = this.known.get(plugin.name);
    if (existing && existing.plugin !== plugin) {
      throw new InvalidPluginError(
        `a plugin named '${plugin.name}' is already known (from ${existing.source}); plugin names must be unique`,
      );
    }
    const clash = this.staticToolClash(plugin);
    if (clash) throw new DuplicateToolError(clash.tool, clash.plugin, plugin.name);
    this.known.set(plugin.name, { plugin, source });
    return this;
  }

  /**
   * Finds installed plugin packages (`"conch": { "plugin": "<entry>" }` in package.json) from the
   * registry's cwd up, from the host's search paths, and in the named plugin dirs. A plugin that
   * fails to load, has an invalid manifest or clashes with a known tool is skipped and reported.
   *
   * Sandboxed commands can write the workspace, so a package inside it (or inside another workspace
   * conch has run in) is imported only when it is what conch last loaded there (the trust store):
   * on a workspace's first use everything in it is trusted and pinned; later a new or changed
   * package is not imported but reported (`untrusted`, `status().trust`, a warning, the
   * `plugin.untrusted` event) until the host accepts it (`trust`, or `registry.trust()`).
   */
  async discover(options: DiscoverOptions = {}): Promise<DiscoveryReport> {
    this.assertAlive('discover plugins');
    const starts = [this.cwd, ...(this.options.searchPaths ?? []), CORE_DIR];
    for (const dir of options.dirs ?? []) this.searchedDirs.add(dir);
    const dirs = [...(this.options.pluginDirs ?? []), ...(options.dirs ?? [])];
    const { candidates: found, warnings } = await findPluginCandidates(starts, dirs);
    const verdict = await judgePluginCandidates({
      store: this.trustStore,
      cwd: this.cwd,
      candidates: found,
      ...(options.trust === undefined ? {} : { accept: options.trust }),
    });
    this.assertAlive('discover plugins');
    this.trustWorkspace = verdict.workspace;
    const report: DiscoveryReport = {
      loaded: [],
      errors: [],
      untrusted: verdict.untrusted,
      accepted: verdict.accepted,
      warnings,
    };
    for (const candidate of found) this.manifestWarnings.delete(candidate.dir);
    for (const warning of warnings) {
      this.manifestWarnings.set(warning.path, warning);
      if (this.warnedPaths.has(warning.path)) continue;
      this.warnedPaths.add(warning.path);
      this.logger.warn(
        { package: warning.package, path: warning.path, problem: warning.problem },
        warning.message,
      );
    }
    for (const path of verdict.checked) this.untrustedItems.delete(path);
    for (const item of verdict.accepted) {
      this.logger.warn(
        { path: item.path, package: item.package, reason: item.reason, workspace: verdict.workspace },
        `plugin package '${item.package}' at ${item.path} was ${item.reason} and is loaded because the host accepted it (pinned as it is now)`,
      );
    }
    for (const item of verdict.untrusted) {
      this.untrustedItems.set(item.path, item);
      this.logger.warn(
        { path: item.path, package: item.package, reason: item.reason, workspace: verdict.workspace },
        `plugin package '${item.package}' at ${item.path} is not loaded: ${item.reason} (${verdict.workspace}), ` +
          `and a sandboxed command may have written it. Review it; to accept it, call registry.trust() ` +
          `in the host (conch-mcp: restart it with --trust)`,
      );
      this.events.emit('plugin.untrusted', { ...item, workspace: verdict.workspace });
    }
    for (const candidate of verdict.trusted) {
      const { plugins, errors } = await loadCandidate(candidate);
      report.errors.push(...errors);
      for (const { plugin, source } of plugins) {
        const existing = this.known.get(plugin.name);
        if (existing) {
          if (existing.plugin !== plugin && existing.source !== source) {
            report.errors.push(
              new PluginLoadError(
                source,
                'duplicate-plugin',
                `a plugin named '${plugin.name}' is already known (from ${existing.source})`,
              ),
            );
          }
          continue;
        }
        const clash = this.staticToolClash(plugin);
        if (clash) {
          report.errors.push(
            new PluginLoadError(
              source,
              'duplicate-tool',
              `tool '${clash.tool}' is already provided by plugin '${clash.plugin}'`,
            ),
          );
          continue;
        }
        this.known.set(plugin.name, { plugin, source, dir: candidate.dir });
        report.loaded.push(plugin.name);
      }
    }
    for (const error of report.errors) {
      this.loadErrors.push(error);
      this.logger.error({ code: error.code, source: error.source }, error.message);
      this.events.emit('plugin.load-error', {
        source: error.source,
        code: error.code,
        message: error.message,
      });
    }
    return report;
  }

  /**
   * Accepts the plugin packages discovery left unloaded — those `untrusted()` lists, or those at
   * `paths` — as they are now: pins them in the trust store and loads them (a second discover()
   * with `trust`; a package that appeared since it was listed is not accepted unless named). The
   * human's act: call it when the user says so, never on a plugin's or the model's word.
   */
  trust(paths?: readonly string[]): Promise<DiscoveryReport> {
    return this.discover({
      dirs: [...this.searchedDirs],
      trust: paths ?? this.untrusted().map((item) => item.path),
    });
  }

  /** Plugin packages discovery found in the workspace and did not load (new or changed since conch last ran there). */
  untrusted(): UntrustedItem[] {
    return [...this.untrustedItems.values()];
  }

  /** Every known plugin, exposed or not. */
  plugins(): PluginInfo[] {
    return [...this.known.values()].map(({ plugin, source }) => ({
      name: plugin.name,
      version: plugin.version,
      ...(plugin.description === undefined ? {} : { description: plugin.description }),
      source,
      exposed: this.exposed.has(plugin.name),
    }));
  }

  isExposed(pluginName: string): boolean {
    return this.exposed.has(pluginName);
  }

  /**
   * The discovered plugin a thrown value most likely comes from, by the first frame of its stack
   * that lies in a plugin package's directory; undefined when none does (or it has no stack). For a
   * host's process-level handlers: an exception thrown from a plugin's own timer reaches
   * `process.on('uncaughtException')` with nothing else to tell whose it was.
   */
  pluginOfError(error: unknown): string | undefined {
    const stack = error instanceof Error && typeof error.stack === 'string' ? error.stack : undefined;
    if (!stack) return undefined;
    const dirs: { name: string; path: string; url: string }[] = [];
    for (const { plugin, dir } of this.known.values()) {
      if (dir) dirs.push({ name: plugin.name, path: `${dir}/`, url: `${pathToFileURL(dir).href}/` });
    }
    if (dirs.length === 0) return undefined;
    for (const line of stack.split('\n').slice(1)) {
      const hit = dirs.find((d) => line.includes(d.path) || line.includes(d.url));
      if (hit) return hit.name;
    }
    return undefined;
  }

  /**
   * Exposes a plugin: validates `config` with its schema (snake_case keys accepted as aliases),
   * exposes first the known plugins that provide the services it `needs` and are not exposed yet,
   * runs its `setup`, exposes its tools (schemas converted once), then exposes the partners it
   * names with derived config. Bad config, unknown plugins and unmet needs reject
   * (`INVALID_CONFIG`, `NO_SUCH_PLUGIN`, `MISSING_DEPENDENCY`, `CIRCULAR_DEPENDENCY`); when every
   * setup involved is synchronous the tools are usable as soon as this returns, before the
   * promise is awaited. Resolves to the names of the plugin's tools.
   *
   * `exposeTool` and `expose` are the same call; `exposeTool` is the request's name.
   */
  expose(pluginName: string, config: unknown = {}, options: ExposeOptions = {}): Promise<string[]> {
    try {
      const result = this.exposeNow(pluginName, config, options);
      return Array.isArray(result) ? Promise.resolve(result) : result;
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }

  /**
   * Exposes a plugin and resolves to the names of its tools: the same call as {@link expose}
   * (`exposeTool` is the request's name, and the name the docs use). Awaits an asynchronous setup.
   */
  exposeTool(pluginName: string, config: unknown = {}, options: ExposeOptions = {}): Promise<string[]> {
    return this.expose(pluginName, config, options);
  }

  /**
   * @internal The synchronous path under `exposeTool`, for callers that cannot await (test
   * helpers that build a registry synchronously): exposes a plugin whose setup, and its
   * providers' setups, are synchronous and returns the tool names. Throws what `exposeTool`
   * rejects with, and `INVALID_PLUGIN` for an asynchronous setup (use `await registry.exposeTool`).
   */
  exposeSync(pluginName: string, config: unknown = {}, options: ExposeOptions = {}): string[] {
    const result = this.exposeNow(pluginName, config, options);
    if (Array.isArray(result)) return result;
    void result.catch(() => undefined);
    throw new InvalidPluginError(
      `plugin '${pluginName}' has an asynchronous setup; expose it with await registry.exposeTool('${pluginName}', config)`,
    );
  }

  /**
   * The order in which to expose `pluginNames` so that every plugin comes after the plugins of the
   * list that provide what it `needs` (required or optional); otherwise the given order is kept.
   * Names it does not know stay where they are. Throws `CIRCULAR_DEPENDENCY` when required needs
   * form a cycle. `createRegistryFromConfig` exposes a config's plugins in this order.
   */
  dependencyOrder(pluginNames: readonly string[]): string[] {
    const names = [...new Set(pluginNames)];
    const edges = (includeOptional: boolean): Map<string, Map<string, string>> => {
      // plugin -> (provider it must follow -> the token it needs from it)
      const after = new Map<string, Map<string, string>>();
      for (const name of names) {
        const plugin = this.known.get(name)?.plugin;
        const deps = new Map<string, string>();
        for (const need of plugin ? needsOf(plugin) : []) {
          if ((need.optional && !includeOptional) || this.isProvided(need.token)) continue;
          for (const provider of this.providersOf(need.token)) {
            if (provider !== name && names.includes(provider) && !deps.has(provider))
              deps.set(provider, need.token.name);
          }
        }
        after.set(name, deps);
      }
      return after;
    };
    const sort = (after: Map<string, Map<string, string>>): string[] | undefined => {
      const done: string[] = [];
      const left = [...names];
      while (left.length > 0) {
        const next = left.findIndex((n) => [...(after.get(n)?.keys() ?? [])].every((d) => done.includes(d)));
        if (next < 0) return undefined;
        done.push(...left.splice(next, 1));
      }
      return done;
    };
    const order = sort(edges(true)) ?? sort(edges(false));
    if (order) return order;
    const required = edges(false);
    throw findCycle(names, required) ?? new CircularDependencyError(names);
  }

  private exposeNow(
    pluginName: string,
    config: unknown,
    options: ExposeOptions,
  ): string[] | Promise<string[]> {
    this.assertAlive('expose a plugin');
    const known = this.known.get(pluginName);
    if (!known) throw new NoSuchPluginError(pluginName, [...this.known.keys()].sort());
    if (this.exposed.has(pluginName) || this.exposing.has(pluginName))
      throw new PluginAlreadyExposedError(pluginName);
    const { plugin } = known;

    const normalized = normalizeConfigKeys(config ?? {});
    if (!normalized.ok) {
      throw new InvalidConfigError(pluginName, [
        {
          path: normalized.key,
          expected: `one spelling of the key (given both '${normalized.key}' and '${normalized.alias}')`,
          received: 'both',
        },
      ]);
    }
    const configSchema = plugin.configSchema ?? NO_CONFIG;
    const parsed = configSchema.safeParse(normalized.value);
    if (!parsed.success) {
      throw new InvalidConfigError(
        pluginName,
        asSpelled(
          toValidationIssues(parsed.error, normalized.value, {
            schema: configSchema,
            snakeCaseAliases: true,
          }),
          config,
        ),
        parsed.error,
      );
    }
    const providers = this.planProviders(pluginName, options.deferPartners ?? []);
    if (providers.length === 0) return this.exposeValidated(plugin, parsed.data, options);
    // The providers of what it needs go first, one after the other (each may be asynchronous).
    this.exposing.add(pluginName);
    const exposeFrom = (index: number): void | Promise<void> => {
      for (let i = index; i < providers.length; i++) {
        const provider = providers[i]!;
        this.logger.info(
          { plugin: provider, for: pluginName },
          `exposing plugin '${provider}' with its default config: plugin '${pluginName}' needs a service it provides`,
        );
        const result = this.exposeNow(provider, {}, {});
        if (!Array.isArray(result)) return result.then(() => exposeFrom(i + 1));
      }
    };
    let pending: void | Promise<void>;
    try {
      pending = exposeFrom(0);
    } catch (error) {
      this.exposing.delete(pluginName);
      throw error;
    }
    if (!pending) {
      this.exposing.delete(pluginName);
      return this.exposeValidated(plugin, parsed.data, options);
    }
    return pending.then(
      () => {
        this.exposing.delete(pluginName);
        this.assertAlive('expose a plugin');
        return this.exposeValidated(plugin, parsed.data, options);
      },
      (error: unknown) => {
        this.exposing.delete(pluginName);
        throw error;
      },
    );
  }

  /**
   * The known, unexposed plugins to expose (in this order) before `root`, so that every service it
   * requires, and they require, is provided. Throws MISSING_DEPENDENCY / CIRCULAR_DEPENDENCY.
   */
  private planProviders(root: string, deferred: readonly string[]): string[] {
    const order: string[] = [];
    const visit = (name: string, stack: string[], tokens: string[]): void => {
      const plugin = this.known.get(name)?.plugin;
      for (const need of plugin ? needsOf(plugin) : []) {
        if (need.optional || this.isProvided(need.token)) continue;
        const candidates = this.providersOf(need.token).filter((c) => c !== name);
        const usable = candidates.find(
          (c) => !this.exposed.has(c) && !this.exposing.has(c) && !deferred.includes(c) && !stack.includes(c),
        );
        if (usable) {
          if (order.includes(usable)) continue;
          visit(usable, [...stack, usable], [...tokens, need.token.name]);
          order.push(usable);
          continue;
        }
        const looped = candidates.find((c) => stack.includes(c));
        if (looped) {
          const at = stack.indexOf(looped);
          throw new CircularDependencyError(stack.slice(at), [...tokens.slice(at), need.token.name]);
        }
        const busy = candidates.find((c) => this.exposing.has(c));
        if (busy) throw new CircularDependencyError([name, busy], [need.token.name]);
        const exposed = candidates.filter((c) => this.exposed.has(c));
        const reason = exposed.length
          ? `${exposed.map((c) => `'${c}'`).join(', ')} exposed without providing it`
          : candidates.some((c) => deferred.includes(c))
            ? 'not exposed yet'
            : undefined;
        throw new MissingDependencyError(name, need.token.name, candidates, reason);
      }
    };
    visit(root, [root], []);
    return order;
  }

  /** Known plugins that declare `token` in `provides`, in registration order. */
  private providersOf(service: Token<unknown>): string[] {
    const names: string[] = [];
    for (const { plugin } of this.known.values()) {
      if (plugin.provides?.some((t) => isToken(t) && t.id === service.id)) names.push(plugin.name);
    }
    return names;
  }

  private isProvided(service: Token<unknown>): boolean {
    return this.container.isRegistered(service.id, true);
  }

  /** The `ctx.deps` of a plugin: required services resolved now, optional ones at each read. */
  private resolveDeps(plugin: PluginDefinition): Record<string, unknown> {
    const deps: Record<string, unknown> = {};
    for (const need of needsOf(plugin)) {
      if (need.optional) {
        Object.defineProperty(deps, need.key, {
          enumerable: true,
          get: () => this.resolveOptional(need.token),
        });
        continue;
      }
      const value = this.resolveOptional(need.token);
      if (value === undefined) {
        const candidates = this.providersOf(need.token);
        const exposed = candidates.filter((c) => this.exposed.has(c));
        throw new MissingDependencyError(
          plugin.name,
          need.token.name,
          candidates,
          exposed.length
            ? `${exposed.map((c) => `'${c}'`).join(', ')} exposed without providing it`
            : undefined,
        );
      }
      Object.defineProperty(deps, need.key, { enumerable: true, value });
    }
    return Object.freeze(deps);
  }

  private exposeValidated(
    plugin: PluginDefinition,
    config: unknown,
    options: ExposeOptions,
  ): string[] | Promise<string[]> {
    const pluginName = plugin.name;
    const parsed = { data: config };
    const deps = this.resolveDeps(plugin);
    const exposure = { late: false };
    const ctx = this.pluginContext(plugin.name, parsed.data, exposure, deps);
    this.exposing.add(pluginName);
    let setup: PluginSetup | Promise<PluginSetup>;
    try {
      setup = this.runSetup(plugin, ctx);
    } catch (error) {
      this.exposing.delete(pluginName);
      throw PluginSetupError.from(pluginName, error);
    }
    const finish = (done: PluginSetup): string[] | Promise<string[]> => {
      const names = this.registerExposure(plugin, ctx, done);
      for (const declared of plugin.provides ?? []) {
        if (isToken(declared) && !this.isProvided(declared)) {
          ctx.logger.warn(
            { token: declared.name },
            `plugin '${pluginName}' declares it provides '${declared.name}' but its setup did not provide it`,
          );
        }
      }
      const partners: Promise<string[]>[] = [];
      for (const partner of plugin.partners ?? []) {
        if (
          this.exposed.has(partner.plugin) ||
          this.exposing.has(partner.plugin) ||
          !this.known.has(partner.plugin)
        )
          continue;
        if (options.deferPartners?.includes(partner.plugin)) continue;
        if (partner.when && !partner.when(parsed.data)) continue;
        const r = this.exposeNow(partner.plugin, partner.config?.(parsed.data) ?? {}, {});
        if (!Array.isArray(r)) partners.push(r);
      }
      return partners.length ? Promise.all(partners).then(() => names) : names;
    };
    if (!isThenable(setup)) {
      try {
        return finish(setup);
      } finally {
        this.exposing.delete(pluginName);
      }
    }
    return this.withSetupDeadline(pluginName, Promise.resolve(setup), exposure).then(
      (done) => {
        this.exposing.delete(pluginName);
        return finish(done);
      },
      (error: unknown) => {
        this.exposing.delete(pluginName);
        throw PluginSetupError.from(pluginName, error);
      },
    );
  }

  /**
   * An asynchronous setup, bounded by `setupTimeoutMs`: past it the expose fails with
   * PLUGIN_SETUP_TIMEOUT, and whatever the setup does later is refused (provide) or undone (its
   * dispose runs when it finally returns), never half-exposed.
   */
  private withSetupDeadline(
    pluginName: string,
    setup: Promise<PluginSetup>,
    exposure: { late: boolean },
  ): Promise<PluginSetup> {
    const bound = this.options.setupTimeoutMs ?? DEFAULT_SETUP_TIMEOUT_MS;
    if (!(bound < Infinity)) return setup;
    return new Promise<PluginSetup>((resolvePromise, reject) => {
      // dispose() while the setup runs: the expose fails now instead of at the deadline.
      const abandon = (error: Error) => {
        clearTimeout(timer);
        exposure.late = true;
        reject(error);
      };
      this.pendingSetups.add(abandon);
      const timer = setTimeout(() => {
        this.pendingSetups.delete(abandon);
        exposure.late = true;
        reject(
          new PluginSetupError(pluginName, {
            code: 'PLUGIN_SETUP_TIMEOUT',
            message:
              `Plugin '${pluginName}' setup did not finish within ${bound} ms (the registry's setupTimeoutMs), ` +
              'so the plugin was not exposed; the registry and its other plugins keep working. ' +
              'A setup that waits for a service should time out on its own, or the host can raise setupTimeoutMs',
          }),
        );
      }, bound);
      setup.then(
        (done) => {
          clearTimeout(timer);
          this.pendingSetups.delete(abandon);
          if (!exposure.late) return resolvePromise(done);
          this.logger.warn(
            { plugin: pluginName },
            `plugin '${pluginName}' setup finished after its deadline; it stays unexposed and its dispose runs now`,
          );
          void Promise.resolve()
            .then(() => done?.dispose?.())
            .catch((error: unknown) =>
              this.logger.error({ err: error, plugin: pluginName }, 'late plugin dispose failed'),
            );
        },
        (error: unknown) => {
          clearTimeout(timer);
          this.pendingSetups.delete(abandon);
          if (!exposure.late) return reject(error);
          this.logger.warn(
            { err: error, plugin: pluginName },
            `plugin '${pluginName}' setup failed after its deadline had already failed the expose`,
          );
        },
      );
    });
  }

  /** Runs `setup` (or, for plugins still on the deprecated hooks, `register` + `tools`). */
  private runSetup(plugin: PluginDefinition, ctx: PluginContext): PluginSetup | Promise<PluginSetup> {
    if (plugin.setup) return plugin.setup(ctx);
    plugin.register?.(ctx);
    const tools = typeof plugin.tools === 'function' ? plugin.tools(ctx) : (plugin.tools ?? []);
    const instructions = plugin.systemInstructions;
    return {
      tools,
      ...(instructions === undefined
        ? {}
        : { instructions: typeof instructions === 'function' ? () => instructions(ctx) : instructions }),
      ...(plugin.dispose ? { dispose: plugin.dispose } : {}),
    };
  }

  /** Checks and exposes the tools setup returned; records instructions and disposal. */
  private registerExposure(plugin: PluginDefinition, ctx: PluginContext, setup: PluginSetup): string[] {
    const pluginName = plugin.name;
    const prepared: ExposedTool[] = [];
    for (const tool of setup.tools ?? []) {
      const shape = toolShape.safeParse(tool);
      if (!shape.success) {
        const issue = shape.error.issues[0];
        throw new InvalidPluginError(
          `plugin '${pluginName}' tool ${JSON.stringify(tool?.name)}: ${issue?.path.join('.')}: ${issue?.message}`,
        );
      }
      const clash = this.toolsByName.get(tool.name) ?? prepared.find((p) => p.tool.name === tool.name);
      if (clash) throw new DuplicateToolError(tool.name, clash.plugin, pluginName);
      let inputSchema: JsonSchema;
      try {
        inputSchema = toJsonSchema(tool.inputSchema);
      } catch (error) {
        throw new InvalidPluginError(
          `plugin '${pluginName}' tool '${tool.name}': inputSchema cannot be converted to JSON Schema: ${(error as Error).message}`,
        );
      }
      let limits: CompiledToolLimits;
      try {
        limits = compileToolLimits(tool.argumentLimits, this.argumentLimits);
      } catch (error) {
        throw new InvalidPluginError(
          `plugin '${pluginName}' tool '${tool.name}': ${(error as Error).message}`,
        );
      }
      const info: ToolInfo = Object.freeze({
        name: tool.name,
        description: tool.description,
        plugin: pluginName,
        inputSchema,
        annotations: { ...tool.annotations },
      });
      prepared.push({ tool, plugin: pluginName, info, ctx, limits });
    }
    for (const { tool } of prepared) {
      if (!tool.onExpose) continue;
      try {
        tool.onExpose(ctx);
      } catch (error) {
        throw new InvalidPluginError(
          `plugin '${pluginName}' tool '${tool.name}': its onExpose failed: ${(error as Error)?.message ?? String(error)}`,
        );
      }
    }
    for (const entry of prepared) this.toolsByName.set(entry.tool.name, entry);
    this.exposed.set(pluginName, { ctx, setup });
    if (setup.dispose) this.disposers.push({ owner: pluginName, fn: setup.dispose });
    const names = prepared.map((p) => p.tool.name);
    ctx.logger.debug({ tools: names }, 'plugin exposed');
    this.events.emit('plugin.exposed', { plugin: pluginName, tools: names });
    return names;
  }

  /** The exposed tools with their JSON Schemas. */
  tools(): ToolInfo[] {
    return [...this.toolsByName.values()].map((t) => t.info);
  }

  /** The exposed tools' schemas in the shape a provider expects. */
  toolSchemas(format: SchemaFormat = 'json-schema'): Record<string, unknown>[] {
    if (format !== 'openai' && format !== 'anthropic' && format !== 'json-schema') {
      throw new ConchError({
        code: 'INVALID_ARGUMENTS',
        message: `toolSchemas(format): expected 'openai', 'anthropic' or 'json-schema'; received ${JSON.stringify(format)}`,
      });
    }
    return this.tools().map((info) => formatToolSchema(info, format));
  }

  /** Each exposed plugin's guidance for the model, joined in expose order. */
  systemInstructions(): string {
    const parts: string[] = [];
    for (const [plugin, { setup }] of this.exposed) {
      const instructions = setup.instructions;
      let text: unknown;
      try {
        text = typeof instructions === 'function' ? instructions() : instructions;
      } catch (error) {
        // A plugin bug costs its own guidance, not the host's prompt.
        this.logger.error(
          { err: error, plugin },
          `plugin '${plugin}' instructions() threw; its guidance is left out`,
        );
        continue;
      }
      if (typeof text === 'string' && text.trim()) parts.push(text.trim());
    }
    return parts.join('\n\n');
  }

  /** The service provided under `token` (throws a ConchError when no exposed plugin provides it). */
  resolve<T>(token: Token<T>): T;
  /** @deprecated a raw tsyringe token; use a typed `Token`. */
  resolve<T>(token: InjectionToken<T>): T;
  resolve<T>(token: Token<T> | InjectionToken<T>): T {
    const value = this.resolveOptional<T>(token as Token<T>);
    if (value === undefined) throw new NoSuchServiceError(tokenName(token), this.providedServices());
    return value;
  }

  /** The service provided under `token`, or undefined when no exposed plugin provides it. */
  resolveOptional<T>(token: Token<T>): T | undefined;
  /** @deprecated a raw tsyringe token; use a typed `Token`. */
  resolveOptional<T>(token: InjectionToken<T>): T | undefined;
  resolveOptional<T>(token: Token<T> | InjectionToken<T>): T | undefined {
    const key = (isToken(token) ? token.id : token) as InjectionToken<T>;
    return this.container.isRegistered(key, true) ? this.container.resolve(key) : undefined;
  }

  /**
   * One short line saying what a tool call does, for UIs: the tool's own `describeCall` (e.g.
   * `terminal(npm test)`, `terminal(send "y")`) given the parsed arguments, or else
   * `toolName(first string argument)`. Never throws: an unknown tool, arguments that do not parse
   * or a `describeCall` that throws get the generic line. No newlines, at most 120 characters.
   */
  describeCall(toolName: string, args: unknown): string {
    const entry = this.toolsByName.get(toolName);
    let text: string | undefined;
    if (entry?.tool.describeCall) {
      try {
        const input = args ?? {};
        if (!checkArgumentLimits(input, this.argumentLimits, entry.limits)) {
          const parsed = entry.tool.inputSchema.safeParse(input);
          if (parsed.success) {
            const own: unknown = entry.tool.describeCall(parsed.data);
            if (typeof own === 'string' && own.trim()) text = own;
          }
        }
      } catch (error) {
        entry.ctx.logger.debug({ err: error, tool: toolName }, `tool '${toolName}' describeCall threw`);
      }
    }
    return compactText(text ?? genericCallDescription(toolName, args), CALL_DESCRIPTION_MAX);
  }

  /**
   * What the exposed plugins report about themselves (sandbox, supervisor, sessions …), one
   * section each, read now (a reader may be async): returns a Promise, so `await registry.status()`.
   * A section that throws reports its error instead.
   */
  async status(): Promise<RegistryStatus> {
    const sections: Record<string, unknown> = {};
    for (const { section, read, owner } of this.statusReaders) {
      try {
        sections[section] = await read();
      } catch (error) {
        this.logger.warn({ err: error, plugin: owner, section }, `plugin '${owner}' status section threw`);
        sections[section] = { error: error instanceof Error ? error.message : String(error) };
      }
    }
    const trust: TrustStatus = {
      store: this.trustStore.file,
      workspace: this.trustWorkspace ?? (await realPathOf(this.cwd)),
      untrusted: this.untrusted(),
    };
    const discovery: DiscoveryStatus = {
      warnings: [...this.manifestWarnings.values()],
      loadErrors: this.loadErrors.map((e) => ({ code: e.code, source: e.source, message: e.message })),
    };
    return { plugins: this.plugins(), ...sections, trust, discovery };
  }

  private providedServices(): string[] {
    return [...this.provided.keys()].sort();
  }

  /**
   * Runs a tool call: find -> validate -> permission gate -> run, with `tool.*` events at each
   * step. Throws typed errors for unknown tools, bad arguments and aborts; a denied call and
   * failures the model can recover from come back as result values.
   */
  async execute(toolName: string, args: unknown, options: ExecuteOptions = {}): Promise<ToolResult> {
    this.assertAlive('execute a tool');
    const entry = this.toolsByName.get(toolName);
    if (!entry) throw new NoSuchToolError(toolName, [...this.toolsByName.keys()].sort());
    const { tool, plugin } = entry;
    const callId = options.callId ?? randomUUID();
    const started = performance.now();
    if (options.signal?.aborted) throw new AbortedError(`Tool call '${toolName}'`, options.signal.reason);

    const controller = new AbortController();
    const onAbort = () => controller.abort(options.signal?.reason);
    options.signal?.addEventListener('abort', onAbort, { once: true });
    this.inFlight.add(controller);

    const fail = (error: unknown) => {
      const code = ConchError.isInstance(error) ? error.code : 'TOOL_FAILED';
      const message = boundedText(error instanceof Error ? error.message : String(error));
      this.events.emit('tool.error', {
        callId,
        tool: toolName,
        error: { code, message },
        durationMs: performance.now() - started,
      });
      return error;
    };

    try {
      this.events.emit('tool.call', { callId, tool: toolName, plugin, args });
      // Before anything reads them: zod validates recursively (arguments past the shape limits
      // would overflow the stack in it), and no tool, message or log sees a string past its limit.
      const tooBig = checkArgumentLimits(args ?? {}, this.argumentLimits, entry.limits);
      if (tooBig) throw new InvalidArgumentsError(toolName, [tooBig]);
      const parsed = tool.inputSchema.safeParse(args ?? {});
      if (!parsed.success) {
        throw new InvalidArgumentsError(
          toolName,
          toValidationIssues(parsed.error, args ?? {}, { schema: tool.inputSchema }),
          parsed.error,
        );
      }
      const validArgs: unknown = parsed.data;
      this.events.emit('tool.validated', { callId, tool: toolName, args: validArgs });

      let ctx: ToolCallContext = {
        ...entry.ctx,
        callId,
        toolName,
        signal: controller.signal,
        ...(options.approve ? { approve: options.approve } : {}),
        reportProgress: (progress) => options.onProgress?.(progress),
      };

      // One prepared object per call for the gate and the run (a command's plan).
      const prepared: unknown = tool.prepare
        ? await raceAbort(Promise.resolve(tool.prepare(validArgs, ctx)), controller.signal, toolName)
        : undefined;
      const request = tool.permission
        ? await raceAbort(
            Promise.resolve(tool.permission(validArgs, ctx, prepared)),
            controller.signal,
            toolName,
          )
        : undefined;
      if (request) {
        const gate = this.resolveOptional(PERMISSION_GATE);
        if (!gate) throw new PermissionGateMissingError(toolName);
        const gateOptions: { signal: AbortSignal; callId: string; approve?: ApproveFn } = {
          signal: controller.signal,
          callId,
        };
        if (options.approve) gateOptions.approve = options.approve;
        const decision: PermissionDecision = await raceAbort(
          gate.check(request, gateOptions),
          controller.signal,
          toolName,
        );
        this.events.emit('tool.permission', { callId, tool: toolName, request, decision });
        if (decision.outcome !== 'allow') {
          // A reason may quote the command: the answer keeps a bounded prefix of each text.
          const denied: PermissionDeniedResult = {
            error: boundedText(`Permission denied: ${decision.reason}`),
            error_code: 'PERMISSION_DENIED',
            display: `[Blocked] ${oneLine(decision.reason)}`,
            permission_denied: true,
            ...(decision.rule ? { rule: boundedText(decision.rule, 1000) } : {}),
            ...(decision.suggestion ? { suggestion: boundedText(decision.suggestion) } : {}),
          };
          this.events.emit('tool.result', {
            callId,
            tool: toolName,
            result: denied,
            durationMs: performance.now() - started,
          });
          return denied;
        }
        ctx = { ...ctx, decision };
      }

      this.events.emit('tool.start', { callId, tool: toolName });
      const raw = await raceAbort(
        Promise.resolve().then(() => tool.execute(validArgs, ctx, prepared)),
        controller.signal,
        toolName,
        (error) =>
          entry.ctx.logger.warn(
            { err: loggable(error), tool: toolName },
            `tool '${toolName}' of plugin '${plugin}' failed after its call was aborted`,
          ),
        () =>
          entry.ctx.logger.warn(
            { tool: toolName, waitedMs: ABORT_WIND_DOWN_MS },
            `tool '${toolName}' of plugin '${plugin}' had not stopped ${ABORT_WIND_DOWN_MS} ms after its call was aborted: the call answers ABORTED without it (what it started may still run)`,
          ),
      );
      // Results leave as JSON: a BigInt, a cycle or a Map must not fail later, far from the tool.
      const safe = toJsonSafe(raw, { maxDepth: this.options.maxResultDepth ?? 500 });
      if (safe.changes.length > 0) {
        entry.ctx.logger.warn(
          { tool: toolName, changes: safe.changes },
          `tool '${toolName}' of plugin '${plugin}' returned values JSON cannot carry; converted: ${safe.changes.join('; ')}`,
        );
      }
      const result = withResultSummary(safe.value as ToolResult);
      this.events.emit('tool.result', {
        callId,
        tool: toolName,
        result,
        durationMs: performance.now() - started,
      });
      return result;
    } catch (error) {
      // A plugin bug surfaces as a typed error; the registry and its other tools keep working.
      if (!ConchError.isInstance(error)) {
        entry.ctx.logger.error(
          { err: loggable(error), tool: toolName },
          `tool '${toolName}' of plugin '${plugin}' threw; the call fails with TOOL_FAILED and the registry keeps working`,
        );
      }
      throw fail(ConchError.isInstance(error) ? error : new ToolExecutionError(toolName, error));
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
      this.inFlight.delete(controller);
      // Whatever the tool stat'ed (a socket the model named to read_file, one trash moved), node's
      // shared stat buffer is left on `/` when the host gets the answer: see stale-stat.ts.
      clearStaleStat();
    }
  }

  /**
   * Aborts in-flight calls, disposes plugins in reverse order, kills every process the registry
   * started and removes its temp dir (unless keepTempFiles). Safe to call more than once.
   */
  dispose(): Promise<void> {
    this.disposing ??= this.doDispose();
    return this.disposing;
  }

  get disposed(): boolean {
    return this.disposing !== undefined;
  }

  private async doDispose(): Promise<void> {
    for (const controller of this.inFlight) controller.abort(new AbortedError('Registry dispose'));
    for (const abandon of [...this.pendingSetups])
      abandon(new RegistryDisposedError('finish exposing a plugin'));
    this.pendingSetups.clear();
    for (const { owner, fn } of [...this.disposers].reverse()) {
      try {
        await fn();
      } catch (error) {
        this.logger.error({ err: error, plugin: owner }, 'plugin dispose failed; continuing');
      }
    }
    if (this.tempDirPath && !this.options.keepTempFiles) {
      removeSync(this.tempDirPath, { recursive: true, force: true });
    }
    this.removeTempHook?.();
    this.removeTempHook = undefined;
    this.events.emit('registry.disposed', {});
    this.events.removeAllListeners();
    this.container.clearInstances();
  }

  /** The registry's private temp dir (created on first use). */
  tempDir(): string {
    if (this.tempDirPath === undefined) {
      const path = makeTempDir('conch-', {
        ...(this.options.tempRoot !== undefined ? { root: this.options.tempRoot } : {}),
        owned: !this.options.keepTempFiles,
      });
      this.tempDirPath = path;
      // A host that dies without dispose() (an unhandled SIGTERM, process.exit()) leaves no temp dir
      // (nor a browser profile in it): removed after every process manager has killed its trees.
      if (!this.options.keepTempFiles)
        this.removeTempHook = onHostExit(() => removeSync(path, { recursive: true, force: true }), 'clean');
    }
    return this.tempDirPath;
  }

  private pluginContext(
    pluginName: string,
    config: unknown,
    exposure: { late: boolean },
    deps: Record<string, unknown>,
  ): PluginContext {
    return {
      pluginName,
      config,
      deps,
      container: this.container,
      logger: this.logger.child({ plugin: pluginName }),
      // Listeners registered through it that throw are logged with the plugin's name.
      events: this.events.forPlugin(pluginName),
      env: { cwd: this.cwd, tempDir: () => this.tempDir() },
      resolveOptional: <T>(token: Token<T> | InjectionToken<T>) => this.resolveOptional<T>(token as Token<T>),
      isExposed: (name) => this.exposed.has(name),
      provide: (token, value) => {
        if (exposure.late) {
          throw new PluginSetupError(pluginName, {
            code: 'PLUGIN_SETUP_TIMEOUT',
            message: `plugin '${pluginName}' provided the service '${token.name}' after its setup deadline had passed; refused (the plugin is not exposed)`,
          });
        }
        const by = this.provided.get(token.name);
        if (by) throw new DuplicateServiceError(token.name, by, pluginName);
        this.provided.set(token.name, pluginName);
        this.container.register(token.id, { useValue: value });
      },
      onDispose: (fn) => this.disposers.push({ owner: pluginName, fn }),
      reportStatus: (section, read) => {
        if (!exposure.late) this.statusReaders.push({ section, read, owner: pluginName });
      },
    };
  }

  private staticToolClash(plugin: PluginDefinition): { tool: string; plugin: string } | undefined {
    if (!Array.isArray(plugin.tools)) return undefined;
    for (const tool of plugin.tools as readonly ToolDefinition[]) {
      for (const other of this.known.values()) {
        if (other.plugin === plugin || !Array.isArray(other.plugin.tools)) continue;
        if ((other.plugin.tools as readonly ToolDefinition[]).some((t) => t.name === tool.name))
          return { tool: tool.name, plugin: other.plugin.name };
      }
    }
    return undefined;
  }

  private assertAlive(operation: string): void {
    if (this.disposing) throw new RegistryDisposedError(operation);
  }
}

/**
 * How long an aborted call waits, at most, for its tool to stop (kill its tree) before it answers
 * anyway. Only a tool that does not stop on its signal (a plugin's bug) meets it: a tool that stops
 * answers the call when it has, which is what a caller relies on ("nothing of the call still
 * runs"). It was 100 ms, and on a busy machine a SIGTERM-ignoring tree's SIGKILL after the grace
 * came later than that: the call answered while the tree still ran.
 */
const ABORT_WIND_DOWN_MS = 5_000;

/**
 * `promise`, or an AbortedError once `signal` fires and the tool has stopped (at most ABORT_WIND_DOWN_MS later, when
 * `overdue` is told). The tool's promise is always handled: a
 * rejection that comes after the abort already answered the call goes to `late` (logged with the
 * plugin's name), never to node as an unhandled rejection.
 */
function raceAbort<T>(
  promise: Promise<T>,
  signal: AbortSignal,
  toolName: string,
  late?: (error: unknown) => void,
  overdue?: () => void,
): Promise<T> {
  if (signal.aborted) {
    promise.catch((error: unknown) => late?.(error));
    return Promise.reject(new AbortedError(`Tool call '${toolName}'`, signal.reason));
  }
  return new Promise<T>((resolvePromise, reject) => {
    // An aborted call answers once the tool has wound down (its process tree killed: the caller
    // can rely on nothing still running), or after ABORT_WIND_DOWN_MS, whichever comes first.
    let windDown: NodeJS.Timeout | undefined;
    const aborted = () => {
      if (windDown) clearTimeout(windDown);
      reject(new AbortedError(`Tool call '${toolName}'`, signal.reason));
    };
    const onAbort = () => {
      windDown = setTimeout(() => {
        overdue?.();
        aborted();
      }, ABORT_WIND_DOWN_MS);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) return aborted();
        resolvePromise(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        // A tool that stops on the abort rejects with it: nothing to report.
        const stopped =
          error === signal.reason ||
          (error instanceof Error && error.name === 'AbortError') ||
          (ConchError.isInstance(error) && error.code === 'ABORTED');
        if (signal.aborted) {
          if (!stopped) late?.(error);
          return aborted();
        }
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

function isThenable<T>(value: T | Promise<T>): value is Promise<T> {
  return (
    typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function'
  );
}

function tokenName(token: Token<unknown> | InjectionToken<unknown>): string {
  if (isToken(token)) return token.name;
  if (typeof token === 'symbol') return token.description ?? String(token);
  return String(token);
}

/**
 * Config issues name top-level keys as the caller spelled them (`max_ouput_chars`), not as the
 * snake_case -> camelCase mapping made them (`maxOuputChars`).
 */
function asSpelled(issues: ValidationIssue[], config: unknown): ValidationIssue[] {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) return issues;
  const spelled = new Map<string, string>();
  for (const key of Object.keys(config)) {
    const camel = key.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
    if (camel !== key) spelled.set(camel, key);
  }
  return issues.map((issue) => {
    const [head = '', ...rest] = issue.path.split('.');
    const original = spelled.get(head);
    if (!original) return issue;
    return {
      ...issue,
      path: [original, ...rest].join('.'),
      expected: issue.expected.replace(`unknown field ${head})`, `unknown field ${original})`),
    };
  });
}

/**
 * An error as a log entry shows it: itself, or, when its message is past ERROR_TEXT_MAX (it may
 * quote an argument), its name, a bounded prefix of the message and the top of its stack.
 */
function loggable(error: unknown): unknown {
  if (
    !(error instanceof Error) ||
    typeof error.message !== 'string' ||
    error.message.length <= ERROR_TEXT_MAX
  )
    return error;
  // The stack starts with the message: keep only its frames.
  const stack = typeof error.stack === 'string' ? error.stack : '';
  const frames = stack.indexOf('\n    at ');
  return {
    type: error.name,
    message: boundedText(error.message),
    stack: frames < 0 ? '' : stack.slice(frames + 1, frames + 4001),
  };
}

/** How long `describeCall` lines may be. */
const CALL_DESCRIPTION_MAX = 120;

/** `name(first string argument…)`: the line `describeCall` gives a tool without its own. */
function genericCallDescription(toolName: string, args: unknown): string {
  let first: string | undefined;
  try {
    if (typeof args === 'string') first = args;
    else if (args !== null && typeof args === 'object' && !Array.isArray(args)) {
      for (const value of Object.values(args)) {
        if (typeof value === 'string' && value.trim()) {
          first = value;
          break;
        }
      }
    }
  } catch {
    // A hostile getter or proxy: no argument shown.
  }
  return `${toolName}(${first === undefined ? '' : compactText(first.slice(0, 1024), 60)})`;
}

function needsOf(plugin: PluginDefinition): { key: string; token: Token<unknown>; optional: boolean }[] {
  const needs = plugin.needs as Record<string, Dependency> | undefined;
  if (!needs) return [];
  return Object.entries(needs).map(([key, dep]) =>
    isToken(dep)
      ? { key, token: dep as Token<unknown>, optional: false }
      : { key, token: dep.token as Token<unknown>, optional: dep.optional === true },
  );
}

/** A cycle among `names` over `after` (plugin -> providers it must follow), as an error. */
function findCycle(
  names: readonly string[],
  after: Map<string, Map<string, string>>,
): CircularDependencyError | undefined {
  const visiting: string[] = [];
  const done = new Set<string>();
  const visit = (name: string): CircularDependencyError | undefined => {
    if (done.has(name)) return undefined;
    const at = visiting.indexOf(name);
    if (at >= 0) {
      const plugins = visiting.slice(at);
      const tokens = plugins.map((p, i) => after.get(p)?.get(plugins[i + 1] ?? plugins[0]!) ?? '');
      return new CircularDependencyError(plugins, tokens);
    }
    visiting.push(name);
    for (const provider of after.get(name)?.keys() ?? []) {
      const found = visit(provider);
      if (found) return found;
    }
    visiting.pop();
    done.add(name);
    return undefined;
  };
  for (const name of names) {
    const found = visit(name);
    if (found) return found;
  }
  return undefined;
}
