import { dirname, resolve } from 'node:path';
import { z } from 'zod';
import { ConchError } from './errors/conch-error.js';
import { InvalidConfigError } from './errors/invalid-config-error.js';
import type { NoSuchPluginError } from './errors/no-such-plugin-error.js';
import { UntrustedPluginError } from './errors/untrusted-plugin-error.js';
import type { TrustAcceptance } from './plugin-trust.js';
import { toValidationIssues } from './errors/validation-issue.js';
import type { Logger } from './logger.js';
import { PluginRegistry, type PluginRegistryOptions } from './registry.js';
import { readRegularFileSync } from './regular-file.js';

/**
 * `conch.config.json`, shared by hosts, conch-mcp and the demo agent. Each key of `plugins` is
 * exposed in order with its value as config (validated by that plugin's own schema).
 */
export const conchConfigSchema = z.strictObject({
  $schema: z.string().optional(),
  cwd: z.string().optional().describe('working directory of the tools, relative to the config file'),
  plugins: z
    .record(z.string(), z.record(z.string(), z.unknown()))
    .optional()
    .describe('plugin name -> config, exposed in this order'),
  pluginDirs: z.array(z.string()).optional().describe('extra directories to discover plugins in'),
  keepTempFiles: z.boolean().optional(),
});

export type ConchConfig = z.infer<typeof conchConfigSchema>;

/** The config used when no file is given: cli + background + permission in default mode. */
export const DEFAULT_CONCH_CONFIG: ConchConfig = {
  plugins: { permission: {}, cli: {}, background: {} },
};

/** Reads and validates a conch.config.json; relative paths in it resolve against its directory. */
export async function loadConchConfig(file: string): Promise<ConchConfig & { baseDir: string }> {
  const path = resolve(file);
  let text: string;
  try {
    // A workspace's config is a file an agent could have left: read only as a regular file.
    text = readRegularFileSync(path, { maxBytes: 16 * 1024 * 1024, encoding: 'utf8' });
  } catch (error) {
    throw unreadable(path, error);
  }
  return parseConchConfig(text, path);
}

function unreadable(path: string, error: unknown): ConchError {
  return new ConchError({
    code: 'CONFIG_FILE_UNREADABLE',
    message: `Cannot read config file ${path}: ${(error as Error).message}`,
    cause: error,
  });
}

/**
 * Validates the text of a conch.config.json read from `file` (e.g. the bytes checkConfigFile()
 * hashed, so that what is parsed is what was checked); relative paths resolve against its directory.
 */
export function parseConchConfig(text: string, file: string): ConchConfig & { baseDir: string } {
  const path = resolve(file);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw unreadable(path, error);
  }
  const parsed = conchConfigSchema.safeParse(raw);
  if (!parsed.success) {
    throw new InvalidConfigError(
      `config file ${path}`,
      toValidationIssues(parsed.error, raw, { schema: conchConfigSchema }),
      parsed.error,
    );
  }
  return { ...parsed.data, baseDir: dirname(path) };
}

export interface RegistryFromConfigOptions extends Omit<PluginRegistryOptions, 'cwd'> {
  /** Base directory for relative paths in the config; default process.cwd(). */
  baseDir?: string;
  /** Per-plugin config merged over the file's (e.g. a host's `approve` callback for permission). */
  overrides?: Record<string, Record<string, unknown>>;
  logger?: Logger;
  /** discover()'s `trust`: `'all'` accepts the plugin packages found now (the human said so). */
  trust?: TrustAcceptance;
}

/**
 * Creates a registry, discovers plugins and exposes those the config names, in order (a plugin
 * after the plugins of the config that provide what it `needs`), awaiting each setup.
 */
export async function createRegistryFromConfig(
  config: ConchConfig = DEFAULT_CONCH_CONFIG,
  options: RegistryFromConfigOptions = {},
): Promise<PluginRegistry> {
  const baseDir = options.baseDir ?? process.cwd();
  const registry = new PluginRegistry({
    ...options,
    cwd: resolve(baseDir, config.cwd ?? '.'),
    pluginDirs: [...(options.pluginDirs ?? []), ...(config.pluginDirs ?? []).map((d) => resolve(baseDir, d))],
    ...(config.keepTempFiles === undefined ? {} : { keepTempFiles: config.keepTempFiles }),
  });
  try {
    await registry.discover(options.trust === undefined ? {} : { trust: options.trust });
    const plugins = config.plugins ?? DEFAULT_CONCH_CONFIG.plugins ?? {};
    const names = Object.keys(plugins);
    // Providers of what a plugin `needs` go before it; otherwise the file's order.
    for (const name of registry.dependencyOrder(names)) {
      await registry.expose(
        name,
        { ...plugins[name], ...options.overrides?.[name] },
        { deferPartners: names },
      );
    }
    return registry;
  } catch (error) {
    await registry.dispose();
    // A named plugin that is unknown because its package was not trusted: say that, not "install it".
    if (ConchError.isInstance(error) && error.code === 'NO_SUCH_PLUGIN' && registry.untrusted().length > 0) {
      throw new UntrustedPluginError((error as NoSuchPluginError).pluginName, registry.untrusted(), error);
    }
    throw error;
  }
}
