import type { ProcessInfo } from '@conch/core';
import {
  killGraceFromSeconds,
  type CaptureSnapshot,
  type ManagedProcess,
  type ManagedProcessInfo,
  type ProcessHandle,
  type ProcessLayer,
  type ProcessManager,
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
  /**
   * Running and recently finished processes; `command` is the label (`[browser] Chrome Headless  CDP
   * Ready ws://…`). Each row has pai's field names too (`process_id`, `started_at` as a Date,
   * `is_running`, `exit_code`; see @conch/process's README, "pai's ProcessManager").
   */
  list(): ManagedProcessInfo[];
  get(id: string): ManagedProcess | ProcessHandle | undefined;
  /**
   * Kills one process's whole tree (SIGTERM, SIGKILL after `timeout` seconds — default the
   * process's grace; a remote layer uses its own); resolves true once it has ended, false for an
   * id neither layer knows (pai's `kill(process_id, timeout) -> bool`).
   */
  kill(id: string, timeout?: number): Promise<boolean>;
  /** Kills every process of the manager (the browser included) and of the remote layer. */
  killAll(): Promise<void>;
  /** Its output (undefined for an unknown id). */
  logs(id: string): Promise<ProcessLogs | undefined>;
}

/** A row with pai's field names (the local manager's rows have them; another layer's may not). */
function withPaiNames(info: ProcessInfo): ManagedProcessInfo {
  if ('process_id' in info) return info as ManagedProcessInfo;
  return {
    ...info,
    process_id: info.id,
    started_at: new Date(info.startedAt),
    is_running: info.isRunning,
    exit_code: info.exitCode,
  };
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
    list: () => layers.flatMap((l) => l.list().map(withPaiNames)),
    get: (id) => manager.get(id) ?? (layer === manager ? undefined : layer.get(id)),
    kill: async (id, timeout) => {
      if (manager.get(id) || layer === manager) return manager.kill(id, timeout);
      killGraceFromSeconds('kill()', timeout); // the same check for a remote id
      const remote = owner(id);
      if (!remote) return false;
      return (await remote.kill(id)) !== false;
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
