import { compactText } from '@conch/core';

/** The arguments `describeTerminalCall` reads (those of the terminal tool). */
export interface TerminalCallArgs {
  command?: string | undefined;
  session_id?: number | undefined;
  input?: string | undefined;
  kill?: boolean | undefined;
  background?: boolean | undefined;
}

/** Longest command shown; longer ones end in an ellipsis. */
const COMMAND_MAX = 60;
/** Longest input preview shown (the seed's 30 characters, then "..."). */
const INPUT_MAX = 30;

/**
 * One line for a UI saying what a terminal call does, in the seed's shapes: `terminal(npm test)`,
 * `terminal(npm run dev, background)`, `terminal(send "y")`, `terminal(check output)`,
 * `terminal(stop)` (and `terminal(?)` for a call with neither a command nor a session).
 */
export function describeTerminalCall(args: TerminalCallArgs): string {
  const { command, session_id: sessionId, input, kill, background } = args;
  if (kill && sessionId !== undefined) return 'terminal(stop)';
  if (sessionId !== undefined) {
    if (!input) return 'terminal(check output)';
    const trimmed = input.trim();
    const preview = trimmed.length > INPUT_MAX ? `${trimmed.slice(0, INPUT_MAX)}...` : trimmed;
    return `terminal(send ${JSON.stringify(preview)})`;
  }
  if (command !== undefined) {
    const shown = compactText(command, COMMAND_MAX);
    return background ? `terminal(${shown}, background)` : `terminal(${shown})`;
  }
  return 'terminal(?)';
}
