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
  kill(id: string): Promise<void>;
  killAll(): Promise<void>;
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
