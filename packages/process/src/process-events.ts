import type { EventBus, ProcessInfo } from '@conch/core';
import './events.js';
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

/** A process as `list()` reports it, for the local and the remote manager alike. */
export function toProcessInfo(p: ProcessEventSource & { readonly exitCode: number | null }): ProcessInfo {
  return {
    id: p.id,
    command: p.label,
    args: p.args,
    pid: p.pid,
    startedAt: p.startedAt,
    isRunning: p.isRunning,
    exitCode: p.exitCode,
  };
}
