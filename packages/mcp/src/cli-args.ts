import { ConchError } from '@conch/core';

export interface McpCliArgs {
  config?: string;
  /** `--trust`: accept the config and plugin packages of the working directory as they are now. */
  trust: boolean;
  /** `--allow-port`: host loopback ports sandboxed commands reach at their own address. */
  allowPorts: number[];
  help: boolean;
  version: boolean;
}

export const USAGE = `Usage: conch-mcp [--config <conch.config.json>] [--trust] [--allow-port <port>]...

Starts an MCP server on stdio exposing the tools of a conch config.

Options:
  -c, --config <file>  config file (default: $CONCH_CONFIG if set, else ./conch.config.json if
                       present, else permission + cli + background + files in default mode,
                       rooted at the current directory)
      --trust          accept the config file and the plugin packages in the working directory as
                       they are now. conch-mcp refuses to start with a conch.config.json that is
                       new or changed since it last ran there (a sandboxed command may have written
                       it) and does not load such plugin packages; review them, then start once
                       with --trust, which pins them
      --allow-port <port>
                       a service on this machine's loopback (a database, a dev server run
                       outside) that sandboxed commands reach at 127.0.0.1:<port> /
                       localhost:<port>; repeat it or give several: --allow-port 5432,8080.
                       Other ports of the host's loopback stay unreachable
  -h, --help           show this help
  -v, --version        show the version

Environment:
  CONCH_CONFIG         config file, used when --config is not given (for launchers whose own
                       --config would swallow conch-mcp's, e.g. the MCP Inspector:
                       npx @modelcontextprotocol/inspector --cli -e CONCH_CONFIG=/path/conch.json
                         node /path/to/conch-mcp/dist/bin.js --method tools/list)
  CONCH_TRUST          1 or true: the same as --trust (unset it after that start: left set, it
                       accepts whatever a sandboxed command writes)
  CONCH_ALLOW_PORTS    ports, comma-separated: the same as --allow-port (added to it)
  CONCH_LOG_LEVEL      log level (default warn)

Logs go to stderr; stdout carries only MCP messages. What conch-mcp last loaded in each
working directory is kept in $XDG_STATE_HOME/conch/trust.json (default ~/.local/state).
`;

/** Parses conch-mcp's argv (without node and the script). Unknown options are an error naming them. */
export function parseCliArgs(argv: readonly string[]): McpCliArgs {
  const args: McpCliArgs = { trust: false, allowPorts: [], help: false, version: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '-h' || arg === '--help') args.help = true;
    else if (arg === '-v' || arg === '--version') args.version = true;
    else if (arg === '--trust') args.trust = true;
    else if (arg === '--allow-port' || arg.startsWith('--allow-port=')) {
      const value = arg === '--allow-port' ? argv[++i] : arg.slice('--allow-port='.length);
      args.allowPorts.push(...parsePorts(value, '--allow-port'));
    } else if (arg === '-c' || arg === '--config') {
      const value = argv[++i];
      if (value === undefined || value.startsWith('-')) {
        throw new ConchError({
          code: 'INVALID_ARGUMENTS',
          message: `conch-mcp: ${arg} expects a file path; received ${value === undefined ? 'nothing' : JSON.stringify(value)}`,
        });
      }
      args.config = value;
    } else if (arg.startsWith('--config=')) {
      args.config = arg.slice('--config='.length);
    } else {
      throw new ConchError({
        code: 'INVALID_ARGUMENTS',
        message: `conch-mcp: unknown argument ${JSON.stringify(arg)}; expected --config <file>, --trust, --allow-port <port>, --help or --version`,
      });
    }
  }
  return args;
}

/**
 * Ports from `--allow-port`'s value or CONCH_ALLOW_PORTS: comma-separated integers 1–65535. An
 * INVALID_ARGUMENTS error names the source and the part that is not a port.
 */
export function parsePorts(value: string | undefined, source: string): number[] {
  if (value === undefined || value.trim() === '' || value.startsWith('-'))
    throw new ConchError({
      code: 'INVALID_ARGUMENTS',
      message: `conch-mcp: ${source} expects a port (1-65535) or several, comma-separated; received ${value === undefined ? 'nothing' : JSON.stringify(value)}`,
    });
  return value.split(',').map((part) => {
    const text = part.trim();
    const port = Number(text);
    if (!/^\d{1,5}$/.test(text) || port < 1 || port > 65535)
      throw new ConchError({
        code: 'INVALID_ARGUMENTS',
        message: `conch-mcp: ${source} expects ports from 1 to 65535; ${JSON.stringify(part)} is not one`,
      });
    return port;
  });
}

/** The ports of `--allow-port` and CONCH_ALLOW_PORTS together, each once, in order. */
export function chooseAllowPorts(
  args: Pick<McpCliArgs, 'allowPorts'>,
  env: NodeJS.ProcessEnv = process.env,
): number[] {
  const fromEnv = env.CONCH_ALLOW_PORTS?.trim() ? parsePorts(env.CONCH_ALLOW_PORTS, 'CONCH_ALLOW_PORTS') : [];
  return [...new Set([...args.allowPorts, ...fromEnv])];
}

/** Where the config file came from: the flag, the environment variable, or neither. */
export type ConfigSource = '--config' | 'CONCH_CONFIG';

/**
 * The config file to use: `--config` wins over `CONCH_CONFIG` (an empty variable counts as unset);
 * `undefined` when neither names one (then ./conch.config.json or the built-in default applies).
 */
export function chooseConfig(
  args: Pick<McpCliArgs, 'config'>,
  env: NodeJS.ProcessEnv = process.env,
): { config: string; source: ConfigSource } | undefined {
  if (args.config !== undefined) return { config: args.config, source: '--config' };
  const fromEnv = env.CONCH_CONFIG;
  if (fromEnv !== undefined && fromEnv.trim() !== '') return { config: fromEnv, source: 'CONCH_CONFIG' };
  return undefined;
}

/**
 * Whether the human accepts the working directory's config and plugin packages as they are now:
 * `--trust`, or `CONCH_TRUST` set to `1` or `true` (`0`, `false` or empty: no). Another value is an
 * error naming it, rather than a guess either way.
 */
export function chooseTrust(
  args: Pick<McpCliArgs, 'trust'>,
  env: NodeJS.ProcessEnv = process.env,
): { trust: boolean; source?: '--trust' | 'CONCH_TRUST' } {
  if (args.trust) return { trust: true, source: '--trust' };
  const value = (env.CONCH_TRUST ?? '').trim().toLowerCase();
  if (value === '' || value === '0' || value === 'false') return { trust: false };
  if (value === '1' || value === 'true') return { trust: true, source: 'CONCH_TRUST' };
  throw new ConchError({
    code: 'INVALID_ARGUMENTS',
    message: `conch-mcp: CONCH_TRUST must be 1 or true (or 0, false, empty); received ${JSON.stringify(env.CONCH_TRUST)}`,
  });
}
