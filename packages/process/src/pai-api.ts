import { constants } from 'node:os';
import type { ProcessInfo } from '@conch/core';
import { InvalidProcessArgumentError } from './errors.js';
import { MAX_TIMEOUT_MS } from './spawn-options.js';

/**
 * pai's ProcessManager names (seed 002) on conch's process layer: what pai's `ProcessInfo`
 * dataclass holds, its exit code of a process ended by a signal, and its kill timeouts (seconds).
 */

/**
 * A process as `list()` / `list_processes()` report it: core's `ProcessInfo` (camelCase, `startedAt`
 * in ms since the epoch) plus pai's field names. `exit_code` is pai's (Python asyncio's
 * `returncode`): the exit status, or `-N` for a process ended by signal N (`-15` SIGTERM, `-9`
 * SIGKILL), where `exitCode` is node's (`null` for a signal; the result's `signal` says which).
 */
export interface ManagedProcessInfo extends ProcessInfo {
  /** pai's name of `id`. */
  process_id: string;
  /** pai's name of `startedAt`, as a Date. */
  started_at: Date;
  /** pai's name of `isRunning`. */
  is_running: boolean;
  /** The exit status, `-N` when signal N ended it (pai / asyncio), null while running. */
  exit_code: number | null;
}

/** pai's default `kill(process_id, timeout)` grace, in seconds. */
export const PAI_KILL_TIMEOUT_S = 5.0;
/** pai's default `kill_all(timeout)` grace, in seconds. */
export const PAI_KILL_ALL_TIMEOUT_S = 10.0;

/**
 * An exit as pai reports it (asyncio's `returncode`): the exit status, or minus the signal's number
 * when a signal ended the process (SIGTERM -15, SIGKILL -9). null: still running, or never started.
 */
export function seedExitCode(exitCode: number | null, signal: string | null | undefined): number | null {
  if (exitCode !== null) return exitCode;
  if (!signal) return null;
  const number = (constants.signals as Record<string, number | undefined>)[signal];
  return number === undefined ? null : -number;
}

/**
 * A kill timeout given in seconds (pai's `timeout: float`) as milliseconds of SIGTERM -> SIGKILL
 * grace; undefined when not given. Throws InvalidProcessArgumentError naming `timeout` for anything
 * but a finite number of seconds, 0 or more, that node's timers can wait.
 */
export function killGraceFromSeconds(method: string, timeout: unknown): number | undefined {
  if (timeout === undefined || timeout === null) return undefined;
  if (
    typeof timeout !== 'number' ||
    !Number.isFinite(timeout) ||
    timeout < 0 ||
    timeout * 1000 > MAX_TIMEOUT_MS
  ) {
    throw new InvalidProcessArgumentError(
      method,
      'timeout',
      `a number of seconds between SIGTERM and SIGKILL, 0 or more (at most ${Math.floor(MAX_TIMEOUT_MS / 1000)})`,
      timeout,
    );
  }
  return Math.round(timeout * 1000);
}
