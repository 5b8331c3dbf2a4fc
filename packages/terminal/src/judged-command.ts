import { shellQuote } from './shell-scripts.js';

/**
 * The command and its per-call `env` as one text: the `export` line the command file runs, then the
 * command. The terminal hands the gate `command` and `env` apart (PermissionRequest.env), and the
 * gate reads them as this text; kept for hosts that judge or show the pair as one line.
 */
export function judgedCommand(command: string, env: Readonly<Record<string, string>> | undefined): string {
  const entries = Object.entries(env ?? {});
  if (entries.length === 0) return command;
  return `export ${entries.map(([name, value]) => `${name}=${shellQuote(value)}`).join(' ')}\n${command}`;
}
