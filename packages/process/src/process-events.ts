import type { EventBus } from '@conch/core';
import './events.js';
import { seedExitCode, type ManagedProcessInfo } from './pai-api.js';
import type { ProcessResult } from './process-result.js';

/** What the process events say about a process: the fields both managers' processes have. */
export interface ProcessEventSource {
  readonly id: string;
  readonly pid: number | undefined;
  readonly label: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly shell: boolean;
  readonly startedAt: number;
  readonly isRunning: boolean;
}

/**
 * The one place a process manager (local or remote) reports a start and an end on the bus and
 * keeps its finished history bounded: `history` keeps at most `limit` entries, oldest finished
 * first, never one that `keep` holds on to (leftovers still owned).
 */
export const processEvents = {
  started(events: EventBus | undefined, proc: ProcessEventSource): void {
    if (!events || events.listenerCount('process.started') === 0) return;
    events.emit('process.started', {
      id: proc.id,
      pid: proc.pid,
      command: proc.label,
      args: proc.args,
      cwd: proc.cwd,
      shell: proc.shell,
      startedAt: proc.startedAt,
    });
  },
  exited(
    events: EventBus | undefined,
    proc: ProcessEventSource,
    result: Pick<ProcessResult, 'exitCode' | 'signal' | 'durationMs' | 'reason'>,
  ): void {
    if (!events || events.listenerCount('process.exited') === 0) return;
    events.emit('process.exited', {
      id: proc.id,
      exitCode: result.exitCode,
      signal: result.signal,
      durationMs: result.durationMs,
      reason: result.reason,
    });
  },
  trimHistory(history: Map<string, ProcessEventSource>, limit: number, keep?: (id: string) => boolean): void {
    for (const [id, p] of history) {
      if (history.size <= limit) return;
      if (!p.isRunning && !keep?.(id)) history.delete(id);
    }
  },
};

/**
 * A process as `list()` reports it, for the local and the remote manager alike: core's fields and
 * pai's names of them (`process_id`, `started_at` as a Date, `is_running`, `exit_code` — minus the
 * signal's number for a process a signal ended, when the source knows the signal).
 */
export function toProcessInfo(
  p: ProcessEventSource & { readonly exitCode: number | null; readonly exitSignal?: string | null },
): ManagedProcessInfo {
  return {
    id: p.id,
    command: p.label,
    args: p.args,
    pid: p.pid,
    startedAt: p.startedAt,
    isRunning: p.isRunning,
    exitCode: p.exitCode,
    process_id: p.id,
    started_at: new Date(p.startedAt),
    is_running: p.isRunning,
    exit_code: seedExitCode(p.exitCode, p.exitSignal),
  };
}
