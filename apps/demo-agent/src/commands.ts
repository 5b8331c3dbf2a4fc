import { formatDuration, type ProcessRow, type ProcessTracker } from './processes.js';

export const HELP_TEXT = [
  'process commands',
  '  !ps              list the browser, background tasks, terminal sessions and recent processes',
  '  !kill <id>       end one of them (its whole process tree)',
  '  !kill-all        end everything that is running',
  '  !logs <id>       full output, paged (space/b/g/G/q)',
  '  !help            this help',
  '  !exit            dispose the registry (nothing is left running) and quit',
  'anything else is sent to the model; Ctrl+C cancels the running turn, a second Ctrl+C exits',
].join('\n');

export type CommandOutcome =
  | { kind: 'text'; text: string; isError?: boolean }
  | { kind: 'logs'; id: string; text: string }
  | { kind: 'exit' };

/** Whether a line typed by the user is a `!` process command. */
export function isCommand(line: string): boolean {
  return line.trimStart().startsWith('!');
}

/** Runs a `!` command against the host APIs. Unknown commands and bad ids come back as errors. */
export async function runCommand(
  line: string,
  tracker: ProcessTracker,
  now = Date.now(),
): Promise<CommandOutcome> {
  const [name = '', ...rest] = line.trim().slice(1).trim().split(/\s+/);
  const arg = rest.join(' ');
  try {
    switch (name.toLowerCase()) {
      case 'ps':
        return { kind: 'text', text: formatPs(tracker.rows(), now) };
      case 'kill':
        if (!arg) return { kind: 'text', text: 'usage: !kill <id>   (ids are in !ps)', isError: true };
        return { kind: 'text', text: await tracker.kill(arg) };
      case 'kill-all':
      case 'killall':
        return { kind: 'text', text: await tracker.killAll() };
      case 'logs':
      case 'log':
        if (!arg) return { kind: 'text', text: 'usage: !logs <id>   (ids are in !ps)', isError: true };
        return { kind: 'logs', id: arg, text: await tracker.logs(arg) };
      case 'help':
      case '?':
        return { kind: 'text', text: HELP_TEXT };
      case 'exit':
      case 'quit':
        return { kind: 'exit' };
      default:
        return { kind: 'text', text: `unknown command '!${name}'\n${HELP_TEXT}`, isError: true };
    }
  } catch (error) {
    return { kind: 'text', text: (error as Error).message, isError: true };
  }
}

/** The `!ps` table. */
export function formatPs(rows: readonly ProcessRow[], now = Date.now()): string {
  if (rows.length === 0) return 'no processes, background tasks or terminal sessions';
  const table = rows.map((r) => [
    r.id,
    r.kind,
    r.state,
    r.pid === undefined ? '-' : String(r.pid),
    r.startedAt === undefined ? '-' : formatDuration((r.endedAt ?? now) - r.startedAt),
    truncate(r.command, 40),
    // A browser's last line is its CDP address: shown whole, so it can be copied into a client.
    r.kind === 'browser' ? r.lastLine : truncate(r.lastLine, 40),
  ]);
  const header = ['ID', 'KIND', 'STATE', 'PID', 'TIME', 'COMMAND', 'LAST OUTPUT'];
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i]!.length)));
  return [header, ...table]
    .map((row) =>
      row
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function truncate(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}
