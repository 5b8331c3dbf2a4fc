/**
 * The minimal shapes core knows of the services plugins provide. Each providing package exports a
 * richer type; core only needs what the registry and other plugins call through the tokens.
 */

export interface ProcessInfo {
  id: string;
  command: string;
  args: readonly string[];
  pid: number | undefined;
  startedAt: number;
  isRunning: boolean;
  exitCode: number | null;
}

export interface ProcessManagerService {
  list(): ProcessInfo[];
  /** Ends the process's tree; resolves whether the id was known (pai's `kill` -> bool). */
  kill(id: string, timeout?: number): Promise<boolean | void>;
  killAll(timeout?: number): Promise<void>;
  dispose(): Promise<void>;
}

export type BackgroundTaskStatus = 'queued' | 'running' | 'completed' | 'failed' | 'cancelled';

export interface BackgroundTaskInfo {
  id: string;
  command: string;
  tool: string;
  status: BackgroundTaskStatus;
  pid?: number;
  createdAt: number;
  startedAt?: number;
  endedAt?: number;
  /** How long it has run (or ran), on the monotonic clock: a stepped wall clock does not move it. */
  elapsedMs?: number;
  lastLine?: string;
  /** The finished task's result (same shape as the submitting tool's result). */
  result?: Record<string, unknown>;
  /** Bytes of output so far. */
  outputBytes?: number;
  /** The file holding the full output, once it outgrew memory. */
  outputFile?: string;
}

/** How a background run ended: its status and a result shaped like the submitting tool's. */
export interface BackgroundRunOutcome {
  status: 'completed' | 'failed' | 'cancelled';
  result: Record<string, unknown>;
}

/** A piece of running work the background service tracks (e.g. a command's process). */
export interface BackgroundRun {
  readonly pid?: number;
  /** Settles when the work ends (never rejects). */
  readonly done: Promise<BackgroundRunOutcome>;
  /** Stops the work (a command: kills its whole process tree). Resolves when it has ended. */
  cancel(): Promise<void>;
  /** Raw output bytes at `offset` (stdout and stderr interleaved), at most `limit`. */
  readOutput(offset: number, limit: number): Promise<Uint8Array>;
  /** Output bytes so far. */
  outputBytes(): number;
  /** The file holding the full output, if it spilled. */
  outputFile?(): string | undefined;
  /** The last non-empty output line so far (for UIs). */
  lastLine?(): string | undefined;
}

export interface BackgroundTaskSpec {
  /** The command as a human reads it. */
  command: string;
  /** The tool that created the task (e.g. 'cli_based_tool'). */
  tool: string;
  /** Task ids look like `<prefix>_<random>`; default 'task'. */
  idPrefix?: string;
}

export interface BackgroundLogs {
  text: string;
  offset: number;
  nextOffset: number;
  totalBytes: number;
  /** Whether the task is finished and nextOffset is the end. */
  complete: boolean;
  outputFile?: string;
  /**
   * Output from `offset` on exists (it was counted) but cannot be read: it was never saved (the disk
   * filled up, a write failed). Paging on from here would read nothing, so the reader stops.
   */
  unavailable?: true;
}

/** A background task runner as the cli plugin sees it (provided by @conch/background). */
export interface BackgroundService {
  list(): BackgroundTaskInfo[];
  kill(id: string): Promise<void>;
  killAll(): Promise<void>;
  /** Queues work; `start` runs when a worker slot is free (status 'queued' until then). */
  submit(spec: BackgroundTaskSpec & { start: () => BackgroundRun }): BackgroundTaskInfo;
  /** Takes over work that is already running (promotion): never restarted, never queued. */
  adopt(spec: BackgroundTaskSpec & { run: BackgroundRun }): BackgroundTaskInfo;
  get(id: string): BackgroundTaskInfo | undefined;
  /** Output of a task, paged by byte offset (nothing lost: from the spill file once large). */
  logs(id: string, options?: { offset?: number; limit?: number }): Promise<BackgroundLogs>;
  /** Resolves with the task once it has ended (at once if it has); undefined for an unknown id. */
  whenFinished(id: string): Promise<BackgroundTaskInfo | undefined>;
}

/** How a shell reads the safe-rm function (`TrashService.shellFunction`). */
export type TrashDialect = 'bash' | 'zsh' | 'sh';

/** One entry of a project's trash: what `rm` (or `TrashService.put`) moved there. */
export interface TrashEntryInfo {
  /** Stable id (`<epoch seconds>-<pid>-<n>`): what `restore` takes. */
  id: string;
  /** Where it was, absolute (normalised for display; restore goes back to the path as removed). */
  originalPath: string;
  /** When it was moved to the trash (ms since the epoch). */
  deletedAt: number;
  kind: 'file' | 'directory' | 'symlink' | 'other';
  /** Bytes of a file or symlink (directories: undefined). */
  sizeBytes?: number;
}

/**
 * A per-project trash (provided by @conch/trash): the terminal's and the cli's `rm` move operands
 * here instead of deleting them, and the model's `trash` tool lists, restores and empties it.
 */
export interface TrashService {
  /** The directory entries live in (absolute). */
  readonly dir: string;
  /**
   * Shell code defining an `rm` function that moves its operands into this trash, for bash, zsh or
   * POSIX sh. Meant to be written to a file and sourced (never typed into a line editor).
   */
  shellFunction(dialect: TrashDialect): string;
  /** Entries, newest first. */
  list(): Promise<TrashEntryInfo[]>;
  /**
   * Moves an entry back to where it was (or to `to`), creating missing parent directories. Throws
   * a ConchError: `UNKNOWN_TRASH_ENTRY`, `TRASH_RESTORE_CONFLICT` (something exists there now),
   * `TRASH_RESTORE_FAILED`.
   */
  restore(id: string, options?: { to?: string }): Promise<TrashEntryInfo>;
  /** Deletes entries for good: all, or those deleted more than `olderThanDays` days ago. */
  empty(options?: { olderThanDays?: number }): Promise<{ removed: number }>;
  /** Moves a path into the trash (what the `rm` function does, from node). */
  put(path: string): Promise<TrashEntryInfo>;
}
