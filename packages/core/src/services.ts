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
}

/** A background task runner as the cli plugin sees it (provided by @conch/background). */
export interface BackgroundService {
  list(): BackgroundTaskInfo[];
  kill(id: string): Promise<void>;
  killAll(): Promise<void>;
}
