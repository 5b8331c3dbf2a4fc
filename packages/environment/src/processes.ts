import type { ProcessInfo } from '@conch/core';
import type { CaptureSnapshot, ManagedProcess, ProcessManager } from '@conch/process';

/** A process's output as far as it is kept in memory (head and tail), with true sizes. */
export interface ProcessLogs {
  id: string;
  label: string;
  running: boolean;
  exitCode: number | null;
  stdout: CaptureSnapshot;
  stderr: CaptureSnapshot;
}

/** The environment's processes: the registry's ProcessManager, with list / kill / logs for a host's process panel. */
export interface EnvironmentProcesses {
  /** The registry's ProcessManager itself (spawn, adoptLeftovers, status …). */
  readonly manager: ProcessManager;
  /** Running and recently finished processes; `command` is the label (`[browser] Chrome Headless  CDP Ready ws://…`). */
  list(): ProcessInfo[];
  get(id: string): ManagedProcess | undefined;
  /** Kills one process's whole tree. */
  kill(id: string): Promise<void>;
  /** Kills every process of the manager, the browser included. */
  killAll(): Promise<void>;
  /** Its output (undefined for an unknown id). */
  logs(id: string): Promise<ProcessLogs | undefined>;
}

export function createProcesses(manager: ProcessManager): EnvironmentProcesses {
  return {
    manager,
    list: () => manager.list(),
    get: (id) => manager.get(id),
    kill: (id) => manager.kill(id),
    killAll: () => manager.killAll(),
    async logs(id) {
      const proc = manager.get(id);
      if (!proc) return undefined;
      const base = { id, label: proc.label };
      if (proc.isRunning) {
        return {
          ...base,
          running: true,
          exitCode: null,
          stdout: proc.stdout.snapshot(),
          stderr: proc.stderr.snapshot(),
        };
      }
      // A finished process released its buffers into its result.
      const result = await proc.result;
      return {
        ...base,
        running: false,
        exitCode: result.exitCode,
        stdout: result.stdout,
        stderr: result.stderr,
      };
    },
  };
}
