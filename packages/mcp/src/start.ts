import { existsSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  checkConfigFile,
  type CheckedConfigFile,
  type ConchConfig,
  ConchError,
  createRegistryFromConfig,
  DEFAULT_CONCH_CONFIG,
  loadConchConfig,
  parseConchConfig,
  pinConfigFile,
  type PluginRegistry,
  TrustStore,
} from '@conch/core';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { PACKAGE_REGISTRIES } from '@conch/permission';
import { BUILTIN_PLUGINS } from './builtin-plugins.js';

import type { ConfigSource } from './cli-args.js';
import { createConchMcpServer, type ConchMcpServerOptions } from './server.js';
import { ConchStdioTransport, type ConchStdioTransportOptions } from './stdio-transport.js';

/**
 * What conch-mcp serves without a config file: the permission gate, cli, background and files
 * (read_file, write_file, edit_file, ...: the model reads a long command's `output_file` back with
 * read_file). The gate's sandbox lets commands reach the common package registries and code hosts
 * (npm, PyPI, crates.io, Go modules, RubyGems, Maven Central, GitHub, GitLab) through its proxy,
 * and nothing else; the host's container engine (podman or docker) answers inside through conch's
 * policy socket (the session's and the workspace compose project's containers, binds only inside
 * the workspace; no privileged, host namespaces, devices or engine socket). The library's default
 * stays closed (permission config `engine: false`).
 */
export const MCP_DEFAULT_CONFIG: ConchConfig = {
  ...DEFAULT_CONCH_CONFIG,
  plugins: {
    ...DEFAULT_CONCH_CONFIG.plugins,
    permission: { network: { allow: [...PACKAGE_REGISTRIES] }, engine: true },
    files: {},
  },
};

export interface StartOptions extends Omit<ConchMcpServerOptions, 'configHint' | 'configFile'> {
  /** Config file; default `<cwd>/conch.config.json` if it exists, else MCP_DEFAULT_CONFIG. */
  config?: string;
  /** Where `config` came from (named in the start-up log line). Default `--config`. */
  configSource?: ConfigSource;
  /** Default process.cwd(). */
  cwd?: string;
  /**
   * The human accepts the config file and the plugin packages found as they are now (`--trust`):
   * they load and are pinned. Without it, a config file that is new, changed or removed since
   * conch-mcp last ran in the workspace holding it makes the start fail (`CONFIG_UNTRUSTED`), and
   * such plugin packages are not loaded.
   */
  trust?: boolean;
  /**
   * Host loopback ports sandboxed commands reach at their own address (`--allow-port`): added to
   * the permission plugin's `network.allow` as `localhost:<port>`.
   */
  allowPorts?: readonly number[];
  /** The trust store's file. Default `$XDG_STATE_HOME/conch/trust.json` (else `~/.local/state/...`). */
  trustStore?: string;
  /** The stdio transport's bounds and liveness checks (see ConchStdioTransport). */
  transport?: Pick<ConchStdioTransportOptions, 'maxMessageBytes' | 'probeIntervalMs' | 'watchReader'>;
}

export interface RunningServer {
  server: Server;
  registry: PluginRegistry;
  /** The config file used, or undefined for the built-in default. */
  configFile: string | undefined;
  /** How the config was chosen: the flag, the environment variable, ./conch.config.json, or the built-in default. */
  configSource: ConfigSource | 'cwd' | 'default';
  /** The stdio transport: `closeReason` says why it closed (stdin closed, stdout broken, …). */
  transport: ConchStdioTransport;
  /** Disposes the registry (killing every process it started) and closes the server. Idempotent. */
  close(): Promise<void>;
}

const PACKAGE_DIR = dirname(dirname(fileURLToPath(import.meta.url)));

/** Loads the config, builds the registry and serves it on the process's stdio. */
export async function startStdioServer(options: StartOptions = {}): Promise<RunningServer> {
  const cwd = resolve(options.cwd ?? process.cwd());
  const defaultFile = resolve(cwd, 'conch.config.json');
  const configFile = options.config
    ? resolve(cwd, options.config)
    : existsSync(defaultFile)
      ? defaultFile
      : undefined;
  const configSource: RunningServer['configSource'] = options.config
    ? (options.configSource ?? '--config')
    : configFile
      ? 'cwd'
      : 'default';
  // The config file is checked before it is read: a sandboxed command can write the workspace, so a
  // config there that conch did not load last time (new, changed, removed) is not run with.
  const trustStore = new TrustStore({
    ...(options.trustStore === undefined ? {} : { file: options.trustStore }),
    ...(options.logger ? { logger: options.logger } : {}),
  });
  const checked = await checkConfigFile(configFile ?? defaultFile, {
    store: trustStore,
    accept: options.trust === true,
  });
  if (checked.accepted) {
    options.logger?.warn(
      { path: checked.path, reason: checked.accepted.reason },
      `conch-mcp --trust: the config file ${checked.path} was ${checked.accepted.reason}; accepted and pinned as it is now`,
    );
  }
  let config: ConchConfig = MCP_DEFAULT_CONFIG;
  let baseDir = cwd;
  if (configFile) {
    const { baseDir: dir, ...rest } = await readCheckedConfig(configFile, checked);
    config = rest;
    baseDir = dir;
  }
  config = withOutputFilesReadable(config, resolve(baseDir, config.cwd ?? '.'));
  if (options.allowPorts?.length) {
    const opened = withHostPorts(config, options.allowPorts);
    if (opened === config)
      options.logger?.warn(
        { ports: options.allowPorts },
        'conch-mcp --allow-port: the config has no permission plugin (an object), so there is no sandbox network to open ports in; ignored',
      );
    config = opened;
  }
  let registry: PluginRegistry;
  try {
    registry = await createRegistryFromConfig(config, {
      baseDir,
      // executor, permission, cli, background, terminal, trash and files are bundled in: known without discovery
      plugins: BUILTIN_PLUGINS,
      // plugin packages installed beside conch-mcp (e.g. in the same global node_modules) are found from here
      searchPaths: [PACKAGE_DIR],
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.trustStore === undefined ? {} : { trustStore: options.trustStore }),
      ...(options.trust ? { trust: 'all' as const } : {}),
    });
  } finally {
    // Discovery has recorded the workspace by now: the config served in it is pinned there, even if
    // a named plugin then failed (the next start with the same file is not refused as new).
    await pinConfigFile(checked, { store: trustStore, accept: options.trust === true });
  }
  // Denials name this file (and say to create it when conch-mcp runs on its built-in default).
  const { transport: transportOptions, ...serverOptions } = options;
  const server = createConchMcpServer(registry, {
    ...serverOptions,
    configFile: configFile ? { path: configFile, exists: true } : { path: defaultFile, exists: false },
  });
  const transport = new ConchStdioTransport({
    ...transportOptions,
    ...(options.maxAnswerBytes ? { maxAnswerBytes: options.maxAnswerBytes } : {}),
    logger: registry.logger.child({ plugin: 'mcp' }),
  });
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      try {
        await registry.dispose();
      } finally {
        await server.close();
      }
    })());
  try {
    await server.connect(transport);
  } catch (error) {
    await registry.dispose();
    throw error;
  }
  const tools = registry.tools().map((t) => t.name);
  // One line at start-up, whatever CONCH_LOG_LEVEL says (unless it is 'silent'): which config
  // is served and how it was chosen — the first thing to check when a client shows other tools.
  const startup =
    registry.logger.level === 'silent' ? registry.logger : registry.logger.child({}, { level: 'info' });
  const untrusted = registry.untrusted().map((item) => item.path);
  startup.info(
    {
      config: configFile ?? 'built-in default',
      configSource,
      cwd: registry.cwd,
      tools,
      ...(untrusted.length > 0 ? { untrusted } : {}),
    },
    `conch-mcp: serving ${tools.length} tools on stdio with ${
      configFile
        ? `config ${configFile} (from ${CONFIG_SOURCE_TEXT[configSource]})`
        : 'the built-in default config (no --config, CONCH_CONFIG or ./conch.config.json)'
    }`,
  );
  return { server, registry, configFile, configSource, transport, close };
}

/**
 * The config as checked: the bytes checkConfigFile() hashed are the ones parsed (a second read could
 * meet a file swapped in between). A FIFO or an oversized file is refused without being read.
 */
async function readCheckedConfig(file: string, checked: CheckedConfigFile) {
  if (checked.bytes) return parseConchConfig(checked.bytes.toString('utf8'), file);
  if (checked.digest === 'not-a-file' || checked.digest === 'too-large') {
    throw new ConchError({
      code: 'CONFIG_FILE_UNREADABLE',
      message: `Cannot read config file ${resolve(file)}: ${
        checked.digest === 'not-a-file' ? 'it is not a regular file' : 'it is larger than 16 MB'
      }`,
    });
  }
  // Missing or unreadable: loadConchConfig's error names the file and the reason.
  return loadConchConfig(file);
}

const CONFIG_SOURCE_TEXT: Record<RunningServer['configSource'], string> = {
  '--config': '--config',
  CONCH_CONFIG: 'the CONCH_CONFIG environment variable',
  cwd: './conch.config.json in the working directory',
  default: 'nothing',
};

/**
 * Where the `output_file` of a long command can land on this machine: the cli and terminal
 * plugins' `outputDir` when configured, else the per-user default (`$XDG_CACHE_HOME/conch/output`,
 * else `~/.cache/conch/output`: @conch/process's defaultOutputDir), and the last-resort
 * `<tmpdir>/conch-output-<uid>` used when that cannot be made.
 */
export function outputDirs(
  config: ConchConfig,
  toolsCwd: string,
  env: NodeJS.ProcessEnv = process.env,
): string[] {
  const dirs = new Set<string>();
  for (const plugin of ['cli', 'terminal']) {
    const dir = config.plugins?.[plugin]?.outputDir;
    if (typeof dir === 'string' && dir !== '') dirs.add(resolve(toolsCwd, dir));
  }
  const xdg = env.XDG_CACHE_HOME;
  const cache = xdg && isAbsolute(xdg) ? xdg : join(env.HOME || homedir(), '.cache');
  dirs.add(join(cache, 'conch', 'output'));
  const uid = typeof process.getuid === 'function' ? process.getuid() : 'user';
  dirs.add(join(tmpdir(), `conch-output-${uid}`));
  return [...dirs];
}

/**
 * The config with host loopback `ports` added to the permission plugin's `network.allow` (as
 * `localhost:<port>`, which the gate reads as the host's 127.0.0.1 and ::1 at that port). Returned
 * as it is without a permission plugin configured as an object, or with a `network.allow` that is
 * not a list (the plugin's schema names that mistake).
 */
export function withHostPorts(config: ConchConfig, ports: readonly number[]): ConchConfig {
  const permission = config.plugins?.permission;
  if (!permission || typeof permission !== 'object' || Array.isArray(permission)) return config;
  const network = (permission as { network?: unknown }).network ?? {};
  if (typeof network !== 'object' || network === null || Array.isArray(network)) return config;
  const allow = (network as { allow?: unknown }).allow ?? [];
  if (!Array.isArray(allow)) return config;
  const extra = ports.map((port) => `localhost:${port}`).filter((entry) => !allow.includes(entry));
  return {
    ...config,
    plugins: {
      ...config.plugins,
      permission: { ...permission, network: { ...network, allow: [...allow, ...extra] } },
    },
  };
}

/**
 * The config with the output directories added to the files plugin's `allowedRoots`, so that the
 * `output_file` a command's result names can always be read back with `read_file` (without this
 * it lies outside the working directory and read_file refuses it). Writes there stay gated like
 * any write. A config without `files`, or with `allowOutsideWorkingDir`, is returned as it is.
 */
export function withOutputFilesReadable(config: ConchConfig, toolsCwd: string): ConchConfig {
  const files = config.plugins?.files;
  if (!files || files.allowOutsideWorkingDir === true) return config;
  // Not a list: left as written, for the files plugin's schema to name the mistake.
  if (files.allowedRoots !== undefined && !Array.isArray(files.allowedRoots)) return config;
  const own = (files.allowedRoots ?? []) as unknown[];
  const extra = outputDirs(config, toolsCwd).filter((dir) => !own.includes(dir));
  return {
    ...config,
    plugins: { ...config.plugins, files: { ...files, allowedRoots: [...own, ...extra] } },
  };
}
