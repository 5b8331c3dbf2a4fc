import { ConchError } from '@conch/core';

export interface McpCliArgs {
  config?: string;
  help: boolean;
  version: boolean;
}

export const USAGE = `Usage: conch-mcp [--config <conch.config.json>]

Starts an MCP server on stdio exposing the tools of a conch config.

Options:
  -c, --config <file>  config file (default: ./conch.config.json if present, else cli + background +
                       permission in default mode, rooted at the current directory)
  -h, --help           show this help
  -v, --version        show the version

Logs go to stderr (level from CONCH_LOG_LEVEL, default warn); stdout carries only MCP messages.
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
