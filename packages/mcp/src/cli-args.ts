import { ConchError } from '@conch/core';

export interface McpCliArgs {
  config?: string;
  help: boolean;
  version: boolean;
}

export const USAGE = `Usage: conch-mcp [--config <conch.config.json>]

Starts an MCP server on stdio exposing the tools of a conch config.

Options:
  -c, --config <file>  config file (default: $CONCH_CONFIG if set, else ./conch.config.json if
                       present, else permission + cli + background + files in default mode,
                       rooted at the current directory)
  -h, --help           show this help
  -v, --version        show the version

Environment:
  CONCH_CONFIG         config file, used when --config is not given (for launchers whose own
                       --config would swallow conch-mcp's, e.g. the MCP Inspector:
                       npx @modelcontextprotocol/inspector --cli -e CONCH_CONFIG=/path/conch.json
                         node /path/to/conch-mcp/dist/bin.js --method tools/list)
  CONCH_LOG_LEVEL      log level (default warn)

Logs go to stderr; stdout carries only MCP messages.
`;

/** Parses conch-mcp's argv (without node and the script). Unknown options are an error naming them. */
export function parseCliArgs(argv: readonly string[]): McpCliArgs {
  const args: McpCliArgs = { help: false, version: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '-h' || arg === '--help') args.help = true;
    else if (arg === '-v' || arg === '--version') args.version = true;
    else if (arg === '-c' || arg === '--config') {
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
        message: `conch-mcp: unknown argument ${JSON.stringify(arg)}; expected --config <file>, --help or --version`,
      });
    }
  }
  return args;
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
