import { parseArgs } from 'node:util';

export interface DemoArgs {
  /** conch.config.json shared with conch-mcp; default: the demo's built-in config. */
  config?: string;
  /** Answer every approval prompt with "yes, once" (non-interactive runs only). */
  yes: boolean;
  /** Plain lines instead of the full-screen UI, even on a TTY. */
  plain: boolean;
  /** Use the scripted demo model even when a provider is configured. */
  scripted: boolean;
  /** Do not start the scripted walkthrough automatically. */
  noWalkthrough: boolean;
  /** A first message to send (then read more from stdin). */
  prompt?: string;
  /** Accept the --config file as it is now, if it changed since conch last ran with it there. */
  trust: boolean;
  help: boolean;
}

export const USAGE = `conch demo agent: a chat whose model runs shell commands through conch

usage: conch-demo [options]            (from the repo root: pnpm demo -- [options])

options
  --config <file>    conch.config.json to use (the same file conch-mcp reads)
  --trust            accept that config file as it is now when it changed since conch last ran
                     with it (a sandboxed command may have written it: review it first)
  --plain            plain lines instead of the terminal UI (automatic when stdin/stdout is not a TTY)
  --yes, -y          answer approval prompts "yes, once" without asking (plain mode only)
  --scripted         use the offline scripted demo model even if a provider is configured
  --no-walkthrough   do not start the scripted walkthrough at launch
  --prompt <text>    send this message first
  --help, -h         show this help

providers (first match wins)
  OPENAI_BASE_URL / OPENAI_API_KEY / CONCH_MODEL   any OpenAI-compatible server (OpenAI, Ollama, vLLM, LM Studio)
  ANTHROPIC_API_KEY / CONCH_MODEL                  Anthropic
  (none)                                           the offline scripted demo model
`;

/** Parses the command line; a bad option throws an Error whose message says what is wrong. */
export function parseDemoArgs(argv: readonly string[]): DemoArgs {
  // pnpm 10 passes the `--` of `pnpm demo -- --config x.json` on to the script: skip a leading one.
  const args = argv[0] === '--' ? argv.slice(1) : argv;
  const { values } = parseArgs({
    args: [...args],
    options: {
      config: { type: 'string' },
      yes: { type: 'boolean', short: 'y', default: false },
      plain: { type: 'boolean', default: false },
      scripted: { type: 'boolean', default: false },
      'no-walkthrough': { type: 'boolean', default: false },
      prompt: { type: 'string' },
      trust: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    allowPositionals: false,
    strict: true,
  });
  return {
    ...(values.config === undefined ? {} : { config: values.config }),
    ...(values.prompt === undefined ? {} : { prompt: values.prompt }),
    yes: values.yes,
    plain: values.plain,
    scripted: values.scripted,
    noWalkthrough: values['no-walkthrough'],
    trust: values.trust,
    help: values.help,
  };
}
