import { shellQuote } from './shell-scripts.js';

/**
 * What the gate judges for a new command: the command, preceded by the per-call `env` as the
 * `export` lines the command file runs (so an env entry is judged like the assignment it is).
 */
export function judgedCommand(command: string, env: Readonly<Record<string, string>> | undefined): string {
  const entries = Object.entries(env ?? {});
  if (entries.length === 0) return command;
  return `export ${entries.map(([name, value]) => `${name}=${shellQuote(value)}`).join(' ')}\n${command}`;
}
