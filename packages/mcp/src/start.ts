import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type ConchConfig,
  createRegistryFromConfig,
  DEFAULT_CONCH_CONFIG,
  loadConchConfig,
  type PluginRegistry,
} from '@conch/core';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { PACKAGE_REGISTRIES } from '@conch/permission';
import { BUILTIN_PLUGINS } from './builtin-plugins.js';

/**
 * What conch-mcp serves without a config file: cli, background and the permission gate, whose
 * sandbox lets commands reach the common package registries and code hosts (npm, PyPI, crates.io,
 * Go modules, RubyGems, Maven Central, GitHub, GitLab) through its proxy, and nothing else.
 */
export const MCP_DEFAULT_CONFIG: ConchConfig = {
  ...DEFAULT_CONCH_CONFIG,
  plugins: {
    ...DEFAULT_CONCH_CONFIG.plugins,
    permission: { network: { allow: [...PACKAGE_REGISTRIES] } },
  },
};
import { createConchMcpServer, type ConchMcpServerOptions } from './server.js';

export interface StartOptions extends Omit<ConchMcpServerOptions, 'configHint'> {
  /** Config file; default `<cwd>/conch.config.json` if it exists, else DEFAULT_CONCH_CONFIG. */
  config?: string;
  /** Default process.cwd(). */
  cwd?: string;
}

export interface RunningServer {
  server: Server;
  registry: PluginRegistry;
  /** The config file used, or undefined for the built-in default. */
  configFile: string | undefined;
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
  let config: ConchConfig = MCP_DEFAULT_CONFIG;
  let baseDir = cwd;
  if (configFile) {
    const loaded = await loadConchConfig(configFile);
    const { baseDir: dir, ...rest } = loaded;
    config = rest;
    baseDir = dir;
  }
  const registry = await createRegistryFromConfig(config, {
    baseDir,
    // executor, permission, cli, background, terminal, trash and files are bundled in: known without discovery
    plugins: BUILTIN_PLUGINS,
    // plugin packages installed beside conch-mcp (e.g. in the same global node_modules) are found from here
    searchPaths: [PACKAGE_DIR],
    ...(options.logger ? { logger: options.logger } : {}),
  });
  const configHint = configFile
    ? `To allow it without asking, add that rule to plugins.permission.rules.allow in ${configFile} and restart conch-mcp.`
    : `To allow it without asking, create ${defaultFile} with {"plugins":{"permission":{"rules":{"allow":["<rule>"]}},"cli":{},"background":{}}} and restart conch-mcp.`;
  const server = createConchMcpServer(registry, { ...options, configHint });
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
    await server.connect(new StdioServerTransport());
  } catch (error) {
    await registry.dispose();
    throw error;
  }
  return { server, registry, configFile, close };
}
