// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { readdirSync, readFileSync } from 'node:fs';

/**
 * File descriptors a command can take in the host while it runs: its output pipes (up to three)
 * as they come over the fd channel, and its pidfd.
 */
export const FDS_PER_COMMAND = 4;

/** Kept free for everything else the host opens: spill files, sockets, the files tools read. */
const RESERVE = 48;

/** The open-file limit in force (`Max open files`, the soft one); Infinity when it cannot be read. */
function openFileLimit(): number {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
    return soft && /^\d+$/.test(soft) ? Number(soft) : Infinity;
  } catch {
    return Infinity;
  }
}

function openFileCount(): number | undefined {
  try {
    return readdirSync('/proc/self/fd').length - 1; // less the directory's own fd
  } catch {
    return undefined;
  }
}

/** Why a command was not started: the host's file descriptors were too few. */
export interface FdShortage {
  open: number;
  limit: number;
}

/**
 * Admission by the host's file descriptors. A command whose pipes the host cannot take would have
 * them dropped by the kernel on their way in (SCM_RIGHTS with MSG_CTRUNC): the command is then
 * killed alone (supervisor-client.ts pipesDropped), but better refused before it runs, with EMFILE,
 * while the fds open plus every running command's share plus a reserve would pass the limit.
 *
 * Own code because node has no getrlimit or fd count: the limit is read from /proc/self/limits
 * (node raises the soft limit to the hard one at start) and open fds are counted in /proc/self/fd
 * (~30 us) only when the last count plus the running commands' shares comes near the limit, or
 * every 32nd command under a limit below 4,096: never, in practice, under the usual limits of
 * 20,000 and more. Conservative: a command's pipes already here count twice (in the count and in
 * its share), so under a low limit fewer commands run than could.
 */
export class FdBudget {
  private limit: number | undefined;
  private counted: number | undefined;
  private sinceCount = 0;
  private sinceLimit = 0;
  private readonly running = new Set<object>();

  /**
   * Takes `command`'s share: undefined when it fits (call release(command) once it ended), else
   * what was found.
   */
  admit(command: object): FdShortage | undefined {
    if (this.currentLimit() === Infinity) return undefined;
    const shares = (this.running.size + 1) * FDS_PER_COMMAND;
    const stale = this.counted === undefined || (this.limit! < 4096 && this.sinceCount >= 32);
    if (stale || this.counted! + shares > this.limit! - RESERVE) {
      // Near the limit by the estimate: count (and read the limit again: a host may have raised it).
      this.limit = openFileLimit();
      this.counted = openFileCount();
      this.sinceCount = 0;
      if (this.counted === undefined || this.limit === Infinity) return undefined;
      if (this.counted + shares > this.limit - RESERVE) return { open: this.counted, limit: this.limit };
    }
    this.sinceCount++;
    this.running.add(command);
    return undefined;
  }

  /**
   * The open-file limit, read again every 64th time (a host may raise or lower its own with
   * prlimit while it runs): ~20 us each, so about 0.3 us a command.
   */
  currentLimit(): number {
    if (this.limit === undefined || ++this.sinceLimit >= 64) {
      this.limit = openFileLimit();
      this.sinceLimit = 0;
    }
    return this.limit;
  }

  /** `command` ended (or never started): its share is free. Idempotent. */
  release(command: object): void {
    this.running.delete(command);
  }

  /** Open fds and the limit now (a count; NaN where they cannot be read), for a report. */
  now(): FdShortage {
    this.limit = openFileLimit();
    return { open: openFileCount() ?? NaN, limit: this.limit === Infinity ? NaN : this.limit };
  }
}

/** Kept free in a supervisor for what it opens itself: node's own fds, its channels, the guard's. */
const SUPERVISOR_RESERVE = 64;

/**
 * How many commands one supervisor can hold at once under the open-file limit (the supervisor
 * inherits the host's): each holds up to FDS_PER_COMMAND of its fds (held output pipes, a pidfd,
 * its pipes while they are made). Infinity when the limit cannot be read. Counted from work, not
 * from /proc: the supervisor may run in a sandbox whose /proc the host does not read.
 */
export function commandsPerSupervisor(): number {
  const limit = hostFdBudget.currentLimit();
  return limit === Infinity
    ? Infinity
    : Math.max(1, Math.floor((limit - SUPERVISOR_RESERVE) / FDS_PER_COMMAND));
}

/** One per host process: every supervisor's commands take their pipes from the same limit. */
export const hostFdBudget = new FdBudget();

/**
 * The words of a refusal: what was short, what became of the command (`outcome`: 'Nothing was
 * started.' by default), and what the caller and the user can do.
 */
export function fdShortageMessage(
  shortage:
    | { where: 'host'; open: number; limit: number; running: number }
    | { where: 'supervisor'; limit: number; running: number },
  outcome = 'Nothing was started.',
): string {
  const what =
    shortage.where === 'host'
      ? `the host process has ${shortage.open} of its ${shortage.limit} file descriptors (ulimit -n) open with ` +
        `${shortage.running} commands running, too few left to take this command's output.`
      : `${shortage.running} commands are running on one process supervisor, as many as its ${shortage.limit} ` +
        `file descriptors (ulimit -n) allow: each holds up to ${FDS_PER_COMMAND} of them.`;
  return (
    `too many open files: ${what} ${outcome ? `${outcome} ` : ''}Wait for running commands or background ` +
    `tasks to end, or tell the user to raise the limit (ulimit -n) of the program that runs conch.`
  );
}
