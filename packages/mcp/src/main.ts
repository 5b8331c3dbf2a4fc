import 'reflect-metadata';
// First: zod's schemas are built interpreted (see the module).
import './zod-interpreted.js';
// eslint-disable-next-line no-restricted-imports -- reads conch's own package.json
import { readFileSync } from 'node:fs';
import { createDefaultLogger, type Logger, type PluginRegistry } from '@conch/core';
import { permissionReady } from '@conch/permission';
// Imported here, not required by @conch/core at run time: the published server bundles it.
import * as pinoModule from 'pino';
import { chooseAllowPorts, chooseConfig, chooseTrust, parseCliArgs, USAGE } from './cli-args.js';
import { startStdioServer } from './start.js';

// Most children die in dispose(); this bounds how long a stuck dispose can hold the exit.
const EXIT_GRACE_MS = 10_000;

// What escapes the registry is logged like the registry logs (pino on stderr; stdout is the
// protocol): with the default logger until the registry exists, then with the registry's.
let logger: Logger = createDefaultLogger(pinoModule);
let registry: PluginRegistry | undefined;

/**
 * A third-party plugin's own timer, or a promise nobody awaits, can throw where no conch code is on
 * the stack (conch catches what it calls itself: tools, listeners, setup). Node would end the
 * server with every process it runs; conch-mcp logs the error instead — naming the plugin when its
 * stack runs through a discovered plugin's package — and keeps serving.
 */
function keepServing(kind: string): (error: unknown) => void {
  return (error) => {
    const plugin = registry?.pluginOfError(error);
    logger.error(
      { err: error, ...(plugin === undefined ? {} : { plugin }) },
      `conch-mcp: ${kind}${plugin === undefined ? '' : ` from plugin '${plugin}'`}; logged, the server keeps serving`,
    );
  };
}
process.on('uncaughtException', keepServing('uncaught exception'));
process.on('unhandledRejection', keepServing('unhandled promise rejection'));

async function main(): Promise<void> {
  const args = parseCliArgs(process.argv.slice(2));
  if (args.help) {
    process.stdout.write(USAGE);
    return;
  }
  if (args.version) {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    process.stdout.write(`${pkg.version}\n`);
    return;
  }
  // The bash parser starts loading now, and the sandbox probe (bwrap, in a child) starts, while the
  // config is read and the registry built (their file reads leave the thread idle): the permission
  // gate's first exposure waits for both (~40 ms of a start on the 2-core VM). A config without
  // the gate (rare; the default has it) or without a local sandbox spends them for nothing. A
  // failed load is the exposure's to report (it loads again there).
  permissionReady({ probeSandbox: true }).catch(() => {});
  // --config, else CONCH_CONFIG (launchers such as the MCP Inspector take --config for themselves).
  const chosen = chooseConfig(args);
  // --trust, else CONCH_TRUST: the human accepts the cwd's config and plugin packages as they are now.
  const { trust } = chooseTrust(args);
  // --allow-port and CONCH_ALLOW_PORTS: host loopback services the sandbox reaches.
  const allowPorts = chooseAllowPorts(args);
  const running = await startStdioServer({
    ...(chosen === undefined ? {} : { config: chosen.config, configSource: chosen.source }),
    ...(trust ? { trust } : {}),
    ...(allowPorts.length ? { allowPorts } : {}),
    logger,
  });
  registry = running.registry;
  logger = running.registry.logger;
  let exiting = false;
  const shutdown = (why: string, code = 0) => {
    if (exiting) return;
    exiting = true;
    // One line, whatever CONCH_LOG_LEVEL says (unless 'silent'): why the session ended.
    const log = running.registry.logger;
    (log.level === 'silent' ? log : log.child({}, { level: 'info' })).info(
      { why },
      `conch-mcp shutting down: ${why}; stopping everything it started`,
    );
    const force = setTimeout(() => process.exit(code), EXIT_GRACE_MS);
    force.unref();
    running.close().then(
      () => process.exit(code),
      (error: unknown) => {
        process.stderr.write(`conch-mcp: shutdown failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGHUP', () => shutdown('SIGHUP'));
  // The session follows its client: stdin's end, a broken stdout (EPIPE), stdout's reader gone —
  // the transport closes once and says why; everything the registry started is killed.
  running.server.onclose = () => shutdown(running.transport.closeReason ?? 'transport closed');
  // A client gone before the server connected (stdin already at its end) is noticed now.
  if (running.transport.closeReason) shutdown(running.transport.closeReason);
}

/** The command line that accepts what this start refused: the same arguments with --trust. */
function withTrust(argv: readonly string[]): string {
  const quoted = argv.map((arg) => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`));
  return ['conch-mcp', '--trust', ...quoted].join(' ');
}

main().catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown }).code;
  const hint =
    code === 'NO_SUCH_PLUGIN'
      ? '\nInstall the plugin package where conch-mcp can find it (node_modules next to the config) or list its folder in "pluginDirs".'
      : code === 'CONFIG_UNTRUSTED' || code === 'PLUGIN_UNTRUSTED'
        ? `\nIf you wrote it (or have reviewed it), accept it once, as it is now: ${withTrust(process.argv.slice(2))}` +
          '\n(or set CONCH_TRUST=1 for that one start). conch-mcp then pins it and starts without the flag.'
        : '';
  process.stderr.write(`conch-mcp: ${message}${hint}\n`);
  process.exit(1);
});
