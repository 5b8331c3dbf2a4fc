import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { backgroundPlugin } from '@conch/background';
import {
  BROWSER_SERVICE,
  browserPlugin,
  launchChrome,
  type BrowserConfigInput,
  type BrowserService,
  type ChromeInstance,
} from '@conch/browser';
import { cliPlugin } from '@conch/cli';
import {
  AbortedError,
  BACKGROUND_SERVICE,
  ConchError,
  createDefaultLogger,
  DEFAULT_CONCH_CONFIG,
  definePlugin,
  InvalidConfigError,
  makeTempDir,
  onHostExit,
  PluginRegistry,
  PluginSetupError,
  type EventBus,
  type Logger,
  type PluginContext,
  type PluginDefinition,
  type RegistryStatus,
  removeSync,
  safeStatSync,
} from '@conch/core';
import {
  EXECUTION_TARGET,
  executorPlugin,
  parseExecutorConfig,
  remoteFileOperator,
  type ExecutionTarget,
  type ExecutorConfigInput,
  type RemoteFileOperator,
} from '@conch/exec-server';
import {
  createFileOperator,
  fileOperationsRequest,
  filesConfigSchema,
  filesPlugin,
  type FileOperator,
  type FilesConfigInput,
} from '@conch/files';
import { permissionPlugin } from '@conch/permission';
import { z } from 'zod';
import { ensureProcessManager, type ProcessLayer, type ProcessManager } from '@conch/process';
import { TERMINAL_SERVICE, terminalPlugin, type TerminalService } from '@conch/terminal';
import { trashPlugin } from '@conch/trash';
import { EnvironmentClosedError, EnvironmentCloseError } from './errors/environment-closed-error.js';
import { InvalidEnvironmentOptionError } from './errors/invalid-environment-option-error.js';
import { createProcesses, type EnvironmentProcesses } from './processes.js';
import { createShell, type EnvironmentShell } from './shell.js';

/** Commands run on this machine (the default). */
export interface LocalExecutorOption {
  kind: 'local';
}
/**
 * Where commands, terminal sessions and files are: @conch/exec-server's executor config —
 * `{ kind: 'local' }`, `{ kind: 'bubblewrap', writable?, network? }`, `{ kind: 'ssh', host, port?,
 * user?, identityFile?, cwd?, ... }`, `{ kind: 'container', engine, container, ... }`,
 * `{ kind: 'kubernetes', pod, namespace?, ... }` or `{ kind: 'kubernetes', claim: { template | warmPool,
 * namespace?, ... } }` (a kubernetes-sigs/agent-sandbox SandboxClaim); snake_case keys accepted.
 */
export type ExecutorOption = LocalExecutorOption | ExecutorConfigInput;

/** What `env.files` is: this machine's FileOperator, or the target's (same methods and errors). */
export type EnvironmentFiles = FileOperator | RemoteFileOperator;

export interface EnvironmentOptions {
  /** The working directory (tools, files and shell are rooted here). Default: the registry's cwd, else process.cwd(). */
  workingDir?: string;
  /**
   * A registry to use instead of a new one. The environment takes it over: it exposes the
   * configured plugins on it and disposes it at close().
   */
  registry?: PluginRegistry;
  /**
   * Plugins to expose, in order, with their config — the `plugins` map of `conch.config.json`
   * (`permission`, `cli`, `background`, `terminal`, `files`, `browser`, or any plugin the
   * registry knows or discovers). Default: `{ permission: {}, cli: {}, background: {} }`.
   */
  plugins?: Record<string, Record<string, unknown>>;
  /** Expose the file tools to models (`true` or the `files` plugin's config); `env.files` exists either way. */
  files?: boolean | FilesConfigInput;
  /**
   * The browser (the seed's `cdp_url`): 'auto' starts a private headless Chromium, a ws:// or
   * http:// URL uses an external browser, null/undefined means none (and no browser tools).
   * Shorthand for `plugins.browser.cdpUrl`; the browser starts last.
   */
  cdpUrl?: 'auto' | string | null;
  /** More browser plugin config (allowedUrls, screenshotDir, executablePath, evaluate …). */
  browser?: Omit<BrowserConfigInput, 'cdpUrl'>;
  /** Where commands run. Default `{ kind: 'local' }`. */
  executor?: ExecutorOption;
  /** Parent directory of the environment's temp dir. Default os.tmpdir(). */
  tmpRoot?: string;
  /** Also discover installed plugin packages (third-party plugins). Default false: the built-ins only. */
  discover?: boolean;
  /** Directories discovery searches besides node_modules. */
  pluginDirs?: readonly string[];
  /** Extra start points for discovery's node_modules walk. */
  searchPaths?: readonly string[];
  /** More plugin definitions to make known (exposed only when named in `plugins`). */
  extraPlugins?: readonly PluginDefinition[];
  logger?: Logger;
  /** Aborts start-up: whatever was started is undone before createEnvironment rejects. */
  signal?: AbortSignal;
}

/** A temporary browser for one piece of work (`await using session = await env.browserSession()`). */
export interface BrowserSession extends AsyncDisposable {
  /** The browser-level WebSocket endpoint, for any CDP client. */
  readonly cdpUrl: string;
  readonly httpUrl: string | undefined;
  /** True when this is the environment's running browser (closing the session leaves it running). */
  readonly shared: boolean;
  /** Stops a browser started for this session (kills it, removes its profile); a shared one is left alone. */
  close(): Promise<void>;
}

const BUILTIN_PLUGINS: readonly PluginDefinition[] = [
  executorPlugin,
  permissionPlugin,
  cliPlugin,
  backgroundPlugin,
  terminalPlugin,
  trashPlugin,
  filesPlugin,
  browserPlugin,
];

function checkOptions(options: EnvironmentOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidEnvironmentOptionError('(options)', 'an object', options);
  }
  const executor = options.executor as { kind?: unknown } | undefined;
  if (executor !== undefined) {
    if (typeof executor !== 'object' || executor === null)
      throw new InvalidEnvironmentOptionError('executor', "an object like { kind: 'local' }", executor);
    if (options.plugins?.executor !== undefined)
      throw new InvalidEnvironmentOptionError(
        'executor',
        'the executor configured once (either executor or plugins.executor)',
        executor,
      );
    try {
      parseExecutorConfig(executor);
    } catch (error) {
      if (!(error instanceof InvalidConfigError)) throw error;
      const issue = error.issues[0];
      const path = issue && issue.path !== '(root)' ? issue.path : undefined;
      // The value at the path, described once (the issue's `received` is already a description).
      const received = path
        ? path.split('.').reduce<unknown>((v, k) => (v as Record<string, unknown> | undefined)?.[k], executor)
        : executor;
      throw new InvalidEnvironmentOptionError(
        path ? `executor.${path}` : 'executor',
        issue?.expected ??
          "a valid executor config ({ kind: 'local' | 'bubblewrap' | 'ssh' | 'container' | 'kubernetes', ... })",
        received,
      );
    }
  }
  if (
    options.workingDir !== undefined &&
    (typeof options.workingDir !== 'string' || options.workingDir === '')
  ) {
    throw new InvalidEnvironmentOptionError('workingDir', 'a directory path', options.workingDir);
  }
  if (options.plugins !== undefined) {
    if (typeof options.plugins !== 'object' || options.plugins === null || Array.isArray(options.plugins))
      throw new InvalidEnvironmentOptionError(
        'plugins',
        'an object of plugin name -> config',
        options.plugins,
      );
    for (const [name, config] of Object.entries(options.plugins)) {
      if (typeof config !== 'object' || config === null || Array.isArray(config))
        throw new InvalidEnvironmentOptionError(
          `plugins.${name}`,
          'a config object ({} for the defaults)',
          config,
        );
    }
  }
  if (
    options.files !== undefined &&
    typeof options.files !== 'boolean' &&
    (typeof options.files !== 'object' || options.files === null)
  )
    throw new InvalidEnvironmentOptionError('files', 'true, false or the files plugin config', options.files);
  if (options.files && options.plugins?.files)
    throw new InvalidEnvironmentOptionError(
      'files',
      'files given once (either the files option or plugins.files)',
      options.files,
    );
  if (options.cdpUrl !== undefined && options.cdpUrl !== null && typeof options.cdpUrl !== 'string')
    throw new InvalidEnvironmentOptionError(
      'cdpUrl',
      "'auto', null, or a ws:// or http:// URL",
      options.cdpUrl,
    );
  if ((options.cdpUrl !== undefined || options.browser !== undefined) && options.plugins?.browser)
    throw new InvalidEnvironmentOptionError(
      'cdpUrl',
      'the browser configured once (either cdpUrl/browser or plugins.browser)',
      options.cdpUrl ?? options.browser,
    );
}

function directory(field: string, path: string): string {
  const abs = resolve(path);
  let ok = false;
  try {
    ok = safeStatSync(abs).isDirectory();
  } catch {
    ok = false;
  }
  if (!ok) throw new InvalidEnvironmentOptionError(field, 'an existing directory', path);
  return abs;
}

/**
 * One place where an agent works: a registry with the configured plugins, a file operator and a
 * shell rooted at the working dir, the registry's processes, an optional CDP browser, and one
 * lifecycle. Create it with `createEnvironment()`; end it with `await env.close()` or `await using`.
 *
 * Closing follows the seed's lifecycle: every process is killed (background tasks, terminal
 * sessions, command processes) → the browser is stopped (Playwright disconnected, a local
 * Chromium killed and its profile removed) → the registry is disposed and the temp dir removed.
 * Processes go before the browser because they may be its clients (a test runner driving it
 * over CDP): they end as killed, not with spurious "browser disconnected" failures.
 */
export class Environment implements AsyncDisposable {
  readonly registry: PluginRegistry;
  readonly workingDir: string;
  /** The environment's private temp dir (the registry's spill files, browser profiles); removed at close. */
  readonly tmpDir: string;
  readonly events: EventBus;
  readonly logger: Logger;
  /** File operations where the files are: this machine's, or the executor's target's. */
  readonly files: EnvironmentFiles;
  readonly shell: EnvironmentShell;
  readonly processes: EnvironmentProcesses;
  readonly executor: ExecutorOption;
  /** The executor plugin's target (`target.target` names it: 'ssh:me@dev:22'), when an executor is configured. */
  readonly target: ExecutionTarget | undefined;

  private browserService: BrowserService | undefined;
  private readonly sessions = new Set<ChromeInstance>();
  private readonly closingController: AbortController;
  private readonly browserConfig: Omit<BrowserConfigInput, 'cdpUrl'>;
  private closing: Promise<void> | undefined;
  private readonly removeExitHook: (() => void) | undefined;

  /** @internal built by createEnvironment */
  constructor(init: {
    registry: PluginRegistry;
    workingDir: string;
    tmpDir: string;
    logger: Logger;
    files: EnvironmentFiles;
    shell: EnvironmentShell;
    manager: ProcessManager;
    layer: ProcessLayer;
    executor: ExecutorOption;
    target: ExecutionTarget | undefined;
    closing: AbortController;
    browserConfig: Omit<BrowserConfigInput, 'cdpUrl'>;
    removeExitHook?: () => void;
  }) {
    this.removeExitHook = init.removeExitHook;
    this.registry = init.registry;
    this.workingDir = init.workingDir;
    this.tmpDir = init.tmpDir;
    this.events = init.registry.events;
    this.logger = init.logger;
    this.files = init.files;
    this.shell = init.shell;
    this.processes = createProcesses(init.manager, init.layer);
    this.executor = init.executor;
    this.target = init.target;
    this.closingController = init.closing;
    this.browserConfig = init.browserConfig;
  }

  /** The running browser (`cdpUrl`, a shared Playwright connection), or undefined without one. */
  get browser(): BrowserService | undefined {
    return this.browserService;
  }

  /** The browser's WebSocket endpoint, or undefined. */
  get cdpUrl(): string | undefined {
    return this.browserService?.cdpUrl;
  }

  get closed(): boolean {
    return this.closing !== undefined;
  }

  /** @internal */
  attachBrowser(service: BrowserService | undefined): void {
    this.browserService = service;
  }

  /** What the registry's plugins report (processes, sandbox, browser …). */
  status(): Promise<RegistryStatus> {
    return this.registry.status();
  }

  /**
   * A browser for one piece of work: the environment's running browser when it has one (closing
   * the session leaves it running), else a private headless Chromium started now through the
   * process manager and stopped when the session closes (or with the environment).
   */
  async browserSession(options: { signal?: AbortSignal } = {}): Promise<BrowserSession> {
    if (this.closing) throw new EnvironmentClosedError('open a browser session');
    const running = this.browserService;
    if (running) {
      const noop = () => Promise.resolve();
      return {
        cdpUrl: running.cdpUrl,
        httpUrl: running.httpUrl,
        shared: true,
        close: noop,
        [Symbol.asyncDispose]: noop,
      };
    }
    const signal = options.signal
      ? AbortSignal.any([options.signal, this.closingController.signal])
      : this.closingController.signal;
    const chrome = await launchChrome({
      manager: this.processes.manager,
      tempDir: this.tmpDir,
      ...(this.browserConfig.executablePath ? { executablePath: this.browserConfig.executablePath } : {}),
      ...(this.browserConfig.startTimeoutMs ? { startTimeoutMs: this.browserConfig.startTimeoutMs } : {}),
      ...(this.browserConfig.extraArgs ? { extraArgs: this.browserConfig.extraArgs } : {}),
      signal,
      logger: this.logger,
    });
    this.sessions.add(chrome);
    const close = async () => {
      this.sessions.delete(chrome);
      await chrome.close();
    };
    return {
      cdpUrl: chrome.wsUrl,
      httpUrl: chrome.httpUrl,
      shared: false,
      close,
      [Symbol.asyncDispose]: close,
    };
  }

  /**
   * Kills every process, stops the browser, disposes the registry and removes the temp dir, in
   * that order; every step runs even when an earlier one failed (then it rejects with
   * EnvironmentCloseError listing them). Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= this.teardown();
    return this.closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** @internal the ordered teardown, also used to undo a failed start. */
  async teardown(): Promise<void> {
    this.closingController.abort(new AbortedError('The environment is closing'));
    const failures: { step: string; error: unknown }[] = [];
    const step = async (name: string, fn: () => Promise<void> | void) => {
      try {
        await fn();
      } catch (error) {
        failures.push({ step: name, error });
        this.logger.error({ err: error, step: name }, 'environment: close step failed; continuing');
      }
    };
    const registry = this.registry;
    const browserIds = new Set<string>();
    if (this.browserService?.processId) browserIds.add(this.browserService.processId);
    for (const s of this.sessions) browserIds.add(s.process.id);

    // 1. Every process but the browsers.
    await step('kill processes', async () => {
      if (registry.disposed) return;
      const background = registry.resolveOptional(BACKGROUND_SERVICE);
      const terminal = registry.resolveOptional<TerminalService>(TERMINAL_SERVICE);
      await Promise.all([
        background?.killAll(),
        ...(terminal ? terminal.list().map((s) => terminal.kill(s.id)) : []),
        ...this.processes
          .list()
          .filter((p) => p.isRunning && !browserIds.has(p.id))
          .map((p) => this.processes.kill(p.id)),
      ]);
    });
    // 2. The browsers: the tools' connection and a local Chromium with its profile.
    await step('stop the browser', async () => {
      await Promise.all([this.browserService?.close(), ...[...this.sessions].map((s) => s.close())]);
      this.sessions.clear();
    });
    // 3. The registry (plugins' own dispose, the process manager's final sweep by cookie), then the temp dir.
    await step('dispose the registry', () => registry.dispose());
    await step('remove the temp dir', () => {
      removeSync(this.tmpDir, { recursive: true, force: true, maxRetries: 3 });
      this.removeExitHook?.();
    });
    if (failures.length > 0) throw new EnvironmentCloseError(failures);
  }
}

/**
 * Creates an environment: validates the options, creates (or takes) the registry and its process
 * manager, exposes the configured plugins in order and starts the browser last. If a step fails (or `signal` aborts), what was started is undone — processes killed,
 * browser stopped, temp dir removed — and the error is rethrown.
 *
 * ```ts
 * await using env = await createEnvironment({ cdpUrl: 'auto', files: true });
 * ```
 */
export async function createEnvironment(options: EnvironmentOptions = {}): Promise<Environment> {
  checkOptions(options);
  if (options.signal?.aborted) throw new AbortedError('Creating the environment', options.signal.reason);
  const executorConfig = options.executor ?? (options.plugins?.executor as ExecutorOption | undefined);
  const executor: ExecutorOption = executorConfig ?? { kind: 'local' };
  const logger = options.logger ?? options.registry?.logger ?? createDefaultLogger();
  if (
    options.registry &&
    options.workingDir !== undefined &&
    resolve(options.workingDir) !== options.registry.cwd
  ) {
    throw new InvalidEnvironmentOptionError(
      'workingDir',
      `the given registry's cwd (${options.registry.cwd}) or nothing`,
      options.workingDir,
    );
  }
  const workingDir = directory('workingDir', options.registry?.cwd ?? options.workingDir ?? process.cwd());
  const tmpRoot = options.tmpRoot === undefined ? tmpdir() : directory('tmpRoot', options.tmpRoot);
  const filesConfig = filesConfigSchema.safeParse(
    typeof options.files === 'object' ? options.files : (options.plugins?.files ?? {}),
  );
  if (!filesConfig.success) {
    const issue = filesConfig.error.issues[0]!;
    throw new InvalidEnvironmentOptionError(`files.${issue.path.join('.')}`, issue.message, options.files);
  }

  // The plugins map, in order; the files and browser shorthands after it (the browser last).
  // The executor is exposed first, on its own (below): the rest find its target at call time.
  const plugins: [string, Record<string, unknown>][] = Object.entries(
    options.plugins ?? DEFAULT_CONCH_CONFIG.plugins ?? {},
  ).filter(([name]) => name !== 'executor');
  if (options.files) plugins.push(['files', typeof options.files === 'object' ? options.files : {}]);
  if (options.cdpUrl !== undefined && options.cdpUrl !== null) {
    plugins.push(['browser', { ...options.browser, cdpUrl: options.cdpUrl }]);
  }
  const browserConfig: Omit<BrowserConfigInput, 'cdpUrl'> = {
    ...(options.browser ?? {}),
    ...((options.plugins?.browser ?? {}) as Omit<BrowserConfigInput, 'cdpUrl'>),
  };

  const tmpDir = makeTempDir('conch-env-', { root: tmpRoot });
  // A host that dies without close() (an unhandled SIGTERM) leaves no temp dir or browser profile:
  // removed after every process manager has killed its trees (Chromium among them).
  const removeExitHook = onHostExit(() => removeSync(tmpDir, { recursive: true, force: true }), 'clean');
  const registry =
    options.registry ??
    new PluginRegistry({
      cwd: workingDir,
      tempRoot: tmpDir,
      logger,
      ...(options.pluginDirs ? { pluginDirs: options.pluginDirs } : {}),
      ...(options.searchPaths ? { searchPaths: options.searchPaths } : {}),
    });
  const closing = new AbortController();
  let env: Environment | undefined;
  try {
    const known = new Set(registry.plugins().map((p) => p.name));
    for (const plugin of [...BUILTIN_PLUGINS, ...(options.extraPlugins ?? [])]) {
      if (!known.has(plugin.name)) registry.register(plugin, 'environment');
    }
    if (options.discover) await registry.discover();

    // The environment's own plugin: the registry's ProcessManager and the scope the host shell
    // runs in. (Not `manager.warmUp()`: a supervisor disposed while it is still booting misses
    // the disconnect and outlives the environment — see @conch/process; it starts on first spawn.)
    let scope: PluginContext | undefined;
    const environmentPlugin = definePlugin({
      name: 'environment',
      version: '0.0.0',
      description: 'createEnvironment(): the process manager, file operator and shell of an environment',
      configSchema: z.strictObject({}),
      setup(ctx) {
        scope = ctx;
        const processes = ensureProcessManager(ctx);
        // A page the browser tools open may be served from inside the sandbox (a dev server a
        // terminal session started): the process manager forwards its port to the host's loopback
        // from a poll. Scanning again as each browser tool starts makes a server that came up since
        // the last poll reachable before Chromium connects: the scan and the host's bind calls run
        // in this (synchronous) listener and the sockets listen a tick later, while the tool's first
        // message to Chromium waits at least a turn of the event loop (Playwright's in-process hop).
        ctx.events.on('tool.start', (event) => {
          if (event.tool.startsWith('browser_')) void processes.refreshForwardedPorts();
        });
        return { tools: [] };
      },
    });
    registry.register(environmentPlugin, 'environment');
    // Where commands run: the executor plugin's target (remote kinds connect on first use).
    if (executorConfig !== undefined)
      await registry.expose('executor', executorConfig as Record<string, unknown>);
    await registry.expose('environment', {});
    const manager = ensureProcessManager(scope!);
    const target = registry.resolveOptional(EXECUTION_TARGET);
    const remote = target?.remote && target.client ? target : undefined;

    env = new Environment({
      removeExitHook,
      registry,
      workingDir,
      tmpDir,
      logger,
      // Where the files plugin's tools work too: the executor's target (the files config's roots
      // and limits, the host's protected-path rule on the target's paths), else this machine.
      files: remote
        ? remoteFileOperator(remote.client!, fileOperationsRequest(registry, filesConfig.data))
        : createFileOperator(registry, workingDir, filesConfig.data),
      shell: createShell({
        scope: scope!,
        manager,
        cliConfig: options.plugins?.cli,
        closing: closing.signal,
      }),
      manager,
      layer: target && target.kind !== 'local' ? target.processes : manager,
      executor,
      target,
      closing,
      browserConfig,
    });

    const names = plugins.map(([name]) => name);
    for (const [name, config] of plugins) {
      if (options.signal?.aborted) throw new AbortedError('Creating the environment', options.signal.reason);
      await registry.expose(name, config, { deferPartners: names });
      if (name === 'browser') env.attachBrowser(registry.resolveOptional(BROWSER_SERVICE));
    }
    if (options.signal?.aborted) throw new AbortedError('Creating the environment', options.signal.reason);
    logger.debug({ workingDir, tmpDir, plugins: names, browser: env.cdpUrl }, 'environment ready');
    return env;
  } catch (error) {
    // Undo in the closing order; the start-up error is what the caller needs to see.
    try {
      if (env) await env.close();
      else {
        closing.abort();
        await registry.dispose();
        removeSync(tmpDir, { recursive: true, force: true });
        removeExitHook();
      }
    } catch (undoError) {
      logger.error({ err: undoError }, 'environment: undoing a failed start left something behind');
    }
    // A plugin's own error (CDP_UNREACHABLE …) is the caller's: the registry's wrapper only adds
    // the plugin's name, which the environment's errors already carry.
    throw error instanceof PluginSetupError && ConchError.isInstance(error.cause) ? error.cause : error;
  }
}
