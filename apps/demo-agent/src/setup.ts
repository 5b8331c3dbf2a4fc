import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createRegistryFromConfig,
  loadConchConfig,
  PluginRegistry,
  type ConchConfig,
  type Logger,
} from '@conch/core';

/** Where discovery starts besides the cwd: the app's own directory, so its node_modules are found. */
export const APP_DIR = dirname(fileURLToPath(import.meta.url));

/** Seconds before a still-running command is promoted to a background task, in the demo. */
export const DEMO_AUTO_BACKGROUND_THRESHOLD = 2;

/**
 * The demo's built-in config (used without --config): the shell tools with a short
 * auto-background threshold, background tasks, PTY sessions, and the permission gate in its
 * default mode (read-only commands allowed, safety rules deny, the rest asks you).
 */
export const DEMO_CONFIG: ConchConfig = {
  plugins: {
    permission: {
      // The walkthrough's REPL starts without a prompt; everything else follows the defaults.
      rules: {
        allow: [
          {
            regex: '^python3 -q$',
            examples: { match: ['python3 -q'], notMatch: ['python3 -q -c "import os"', 'python3'] },
          },
        ],
      },
    },
    cli: { autoBackgroundThreshold: DEMO_AUTO_BACKGROUND_THRESHOLD },
    background: {},
    terminal: {},
  },
};

export interface DemoRegistry {
  registry: PluginRegistry;
  /** Where the config came from, for the header. */
  source: string;
  /** Plugins of the built-in config that are not installed (skipped). */
  missing: string[];
  /** The cli plugin's threshold in seconds, if the config sets it. */
  autoBackgroundThreshold: number | undefined;
}

/**
 * Builds the registry the way conch-mcp does: `--config` through core's loadConchConfig and
 * createRegistryFromConfig; without it, the demo config restricted to the plugins installed.
 */
export async function createDemoRegistry(options: {
  configFile?: string;
  cwd: string;
  logger?: Logger;
}): Promise<DemoRegistry> {
  const common = { searchPaths: [APP_DIR], ...(options.logger ? { logger: options.logger } : {}) };
  if (options.configFile) {
    const config = await loadConchConfig(options.configFile);
    const registry = await createRegistryFromConfig(config, { ...common, baseDir: config.baseDir });
    return {
      registry,
      source: options.configFile,
      missing: [],
      autoBackgroundThreshold: thresholdOf(config),
    };
  }
  const installed = await installedPlugins(options.cwd, common);
  const plugins = Object.fromEntries(
    Object.entries(DEMO_CONFIG.plugins ?? {}).filter(([name]) => installed.has(name)),
  );
  const missing = Object.keys(DEMO_CONFIG.plugins ?? {}).filter((name) => !installed.has(name));
  const config: ConchConfig = { plugins };
  const registry = await createRegistryFromConfig(config, { ...common, baseDir: options.cwd });
  return { registry, source: 'built-in demo config', missing, autoBackgroundThreshold: thresholdOf(config) };
}

async function installedPlugins(
  cwd: string,
  options: { searchPaths: string[]; logger?: Logger },
): Promise<Set<string>> {
  const probe = new PluginRegistry({ cwd, ...options });
  try {
    await probe.discover();
    return new Set(probe.plugins().map((p) => p.name));
  } finally {
    await probe.dispose();
  }
}

function thresholdOf(config: ConchConfig): number | undefined {
  const cli = config.plugins?.cli as Record<string, unknown> | undefined;
  const value = cli?.autoBackgroundThreshold ?? cli?.auto_background_threshold;
  return typeof value === 'number' ? value : undefined;
}
