import { PACKAGE_REGISTRIES } from '@conch/permission';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findChrome } from '@conch/browser';
import {
  checkConfigFile,
  loadConchConfig,
  parseConchConfig,
  pinConfigFile,
  TrustStore,
  type ConchConfig,
  type Logger,
  type PluginRegistry,
} from '@conch/core';
import { createEnvironment, type Environment } from '@conch/environment';
import { PROCESS_MANAGER } from '@conch/process';
import { serveCommand, SITE_DIR } from './demo-site.js';

export { SITE_DIR } from './demo-site.js';

/** Where discovery starts besides the cwd: the app's own directory, so its node_modules are found. */
export const APP_DIR = dirname(fileURLToPath(import.meta.url));

/** Seconds before a still-running command is promoted to a background task, in the demo. */
export const DEMO_AUTO_BACKGROUND_THRESHOLD = 2;

function regexEscape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * The demo's built-in config (used without --config): the shell tools with a short
 * auto-background threshold, background tasks, PTY sessions and the trash their rm moves files
 * into, and the permission gate in its default mode (read-only commands allowed, safety rules
 * deny, the rest asks you). The browser ('auto') is added by createDemoEnvironment when a
 * Chromium is installed.
 */
export function demoConfig(siteDir: string = SITE_DIR, demoDir?: string): ConchConfig {
  const serve = serveCommand(siteDir);
  return {
    plugins: {
      permission: {
        // The sandbox reaches the common package registries and code hosts through its proxy.
        network: { allow: [...PACKAGE_REGISTRIES] },
        // Commands write in the sandbox: the workspace, and the walkthrough's own directory.
        ...(demoDir ? { writableRoots: [demoDir] } : {}),
        // The walkthrough's REPL and its static server start without a prompt; everything else
        // follows the defaults.
        rules: {
          allow: [
            {
              regex: '^python3 -q$',
              examples: { match: ['python3 -q'], notMatch: ['python3 -q -c "import os"', 'python3'] },
            },
            {
              regex: `^${regexEscape(serve)}$`,
              examples: { match: [serve], notMatch: [`${serve} --cgi`, 'python3 -u -m http.server 0'] },
            },
          ],
        },
      },
      cli: { autoBackgroundThreshold: DEMO_AUTO_BACKGROUND_THRESHOLD },
      background: {},
      terminal: {},
      // The trash the terminal's rm moves files into, and the model's tool to list and restore.
      trash: {},
    },
  };
}

export const DEMO_CONFIG: ConchConfig = demoConfig();

export interface DemoEnvironment {
  /** The environment: registry, processes, browser; `env.close()` ends everything. */
  env: Environment;
  registry: PluginRegistry;
  /** Where the config came from, for the header. */
  source: string;
  /** Parts of the built-in config that are not available here (skipped), with why. */
  missing: string[];
  /** The cli plugin's threshold in seconds, if the config sets it. */
  autoBackgroundThreshold: number | undefined;
}

/**
 * Builds the demo's environment with `createEnvironment` (@conch/environment): `--config` read
 * with core's loadConchConfig (its `plugins` map, exactly as conch-mcp exposes it); without it,
 * the demo config plus a local headless Chromium when one is installed (`CONCH_DEMO_BROWSER=0`
 * turns it off). Installed third-party plugins are discovered either way.
 */
export async function createDemoEnvironment(options: {
  configFile?: string;
  /** Accept the config file as it is now (the demo's --trust). */
  trust?: boolean;
  cwd: string;
  logger?: Logger;
  /** Where the walkthrough saves its screenshot. */
  screenshotDir?: string;
  siteDir?: string;
}): Promise<DemoEnvironment> {
  const common = {
    discover: true,
    searchPaths: [APP_DIR],
    ...(options.logger ? { logger: options.logger } : {}),
  };
  if (options.configFile) {
    // Checked before it is read, as conch-mcp does: a config in a workspace that changed since conch
    // last ran with it there may have been written by a sandboxed command (UntrustedConfigError).
    const store = new TrustStore(options.logger ? { logger: options.logger } : {});
    const checked = await checkConfigFile(options.configFile, { store, accept: options.trust === true });
    const config = checked.bytes
      ? parseConchConfig(checked.bytes.toString('utf8'), options.configFile)
      : await loadConchConfig(options.configFile);
    const env = await createEnvironment({
      ...common,
      workingDir: resolve(config.baseDir, config.cwd ?? '.'),
      plugins: config.plugins ?? {},
      pluginDirs: (config.pluginDirs ?? []).map((d) => resolve(config.baseDir, d)),
    });
    await pinConfigFile(checked, { store, accept: options.trust === true });
    return {
      env,
      registry: env.registry,
      source: options.configFile,
      missing: [],
      autoBackgroundThreshold: thresholdOf(config),
    };
  }
  const config = demoConfig(options.siteDir, options.screenshotDir);
  const missing: string[] = [];
  let browser = process.env.CONCH_DEMO_BROWSER !== '0';
  if (browser) {
    try {
      findChrome();
    } catch {
      browser = false;
      missing.push('browser (no Chrome or Chromium found: apt-get install -y chromium, or set CHROME_PATH)');
    }
  }
  const env = await createEnvironment({
    ...common,
    workingDir: options.cwd,
    plugins: config.plugins ?? {},
    ...(browser
      ? {
          cdpUrl: 'auto',
          browser: options.screenshotDir ? { screenshotDir: options.screenshotDir } : {},
        }
      : {}),
  });
  // The static site the walkthrough serves from the sandbox: visible there wherever the app is
  // installed (under /tmp, which the sandbox replaces with its own, it would not be).
  env.registry.resolveOptional(PROCESS_MANAGER)?.shareWithSandbox({ visible: [options.siteDir ?? SITE_DIR] });
  return {
    env,
    registry: env.registry,
    source: 'built-in demo config',
    missing,
    autoBackgroundThreshold: thresholdOf(config),
  };
}

function thresholdOf(config: ConchConfig): number | undefined {
  const cli = config.plugins?.cli as Record<string, unknown> | undefined;
  const value = cli?.autoBackgroundThreshold ?? cli?.auto_background_threshold;
  return typeof value === 'number' ? value : undefined;
}
