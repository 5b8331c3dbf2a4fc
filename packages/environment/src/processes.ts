import type { ProcessInfo } from '@conch/core';
import type {
  CaptureSnapshot,
  ManagedProcess,
  ProcessHandle,
  ProcessLayer,
  ProcessManager,
} from '@conch/process';

/** A process's output as far as it is kept in memory (head and tail), with true sizes. */
export interface ProcessLogs {
  id: string;
  label: string;
  running: boolean;
  exitCode: number | null;
  stdout: CaptureSnapshot;
  stderr: CaptureSnapshot;
}

/**
 * The environment's processes: the registry's ProcessManager (this machine: the browser, and
 * every command when the executor is local) and, with a remote executor, the target's process
 * layer where commands run — with list / kill / logs over both for a host's process panel.
 */
export interface EnvironmentProcesses {
  /** The registry's ProcessManager itself (spawn, adoptLeftovers, status …), on this machine. */
  readonly manager: ProcessManager;
  /** Where commands run: `manager`, or the executor's remote process layer (ids of both are distinct). */
  readonly layer: ProcessLayer;
  /** Running and recently finished processes; `command` is the label (`[browser] Chrome Headless  CDP Ready ws://…`). */
  list(): ProcessInfo[];
  get(id: string): ManagedProcess | ProcessHandle | undefined;
  /** Kills one process's whole tree. */
  kill(id: string): Promise<void>;
  /** Kills every process of the manager (the browser included) and of the remote layer. */
  killAll(): Promise<void>;
  /** Its output (undefined for an unknown id). */
  logs(id: string): Promise<ProcessLogs | undefined>;
}

/** How much of a running remote process's output `logs` shows (its end, read from the target). */
const REMOTE_TAIL_BYTES = 64 * 1024;

function snapshotOf(text: string, totalBytes: number, spillPath: string | undefined): CaptureSnapshot {
  const shown = Buffer.byteLength(text);
  const lines = text === '' ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  return {
    totalBytes,
    lines,
    binary: false,
    truncated: shown < totalBytes,
    omittedBytes: totalBytes - shown,
    head: text,
    tail: '',
    ...(spillPath ? { spillPath } : {}),
  };
}

const EMPTY_SNAPSHOT = snapshotOf('', 0, undefined);

export function createProcesses(
  manager: ProcessManager,
  layer: ProcessLayer = manager,
): EnvironmentProcesses {
  const layers: ProcessLayer[] = layer === manager ? [manager] : [manager, layer];
  const owner = (id: string) => layers.find((l) => l.get(id) !== undefined);
  return {
    manager,
    layer,
    list: () => layers.flatMap((l) => l.list()),
    get: (id) => manager.get(id) ?? (layer === manager ? undefined : layer.get(id)),
    kill: async (id) => {
      await owner(id)?.kill(id);
    },
    killAll: async () => {
      await Promise.all(layers.map((l) => l.killAll()));
    },
    async logs(id) {
      const local = manager.get(id);
      const proc: ManagedProcess | ProcessHandle | undefined = local ?? layer.get(id);
      if (!proc) return undefined;
      const base = { id, label: proc.label };
      if (proc.isRunning) {
        if (local) {
          return {
            ...base,
            running: true,
            exitCode: null,
            stdout: local.stdout.snapshot(),
            stderr: local.stderr.snapshot(),
          };
        }
        // A remote process's streams are captured in the target: the end of its combined output.
        const combined = proc.combined;
        if (!combined)
          return { ...base, running: true, exitCode: null, stdout: EMPTY_SNAPSHOT, stderr: EMPTY_SNAPSHOT };
        const total = combined.totalBytes;
        const from = Math.max(0, total - REMOTE_TAIL_BYTES);
        const bytes = await combined.read(from, total - from).catch(() => new Uint8Array());
        return {
          ...base,
          running: true,
          exitCode: null,
          stdout: snapshotOf(Buffer.from(bytes).toString('utf8'), total, combined.path),
          stderr: EMPTY_SNAPSHOT,
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
