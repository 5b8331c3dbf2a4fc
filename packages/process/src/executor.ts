import { spawn } from 'node:child_process';
import type { SpawnedChild } from './spawned-child.js';

/** One spawn, already resolved to a file and argv (shell wrapping is done by the caller). */
export interface ExecutorSpawnRequest {
  file: string;
  args: readonly string[];
  cwd: string;
  /** The environment (may inherit keys through its prototype; undefined values are unset). */
  env: Record<string, string | undefined>;
  stdin: 'ignore' | 'pipe';
  /** False when the caller does not capture output (stdout/stderr go to /dev/null). */
  capture: boolean;
}

/**
 * Where a process runs. The process manager owns everything else (capture, kill, events); an
 * executor only starts the child, which must lead its own process group (`detached: true`) so
 * that the manager can signal the whole tree.
 *
 * An executor that can say what to run as a plain command (`prepare`, e.g. wrapping it in bwrap)
 * has it started by the manager's supervisor, so the host does not fork; `spawn` is then only
 * used when there is no supervisor. An executor without `prepare` always spawns in the host.
 */
export interface Executor {
  readonly name: string;
  /** Rewrites a request into the command that really runs (default: unchanged). */
  prepare?(request: ExecutorSpawnRequest): ExecutorSpawnRequest;
  spawn(request: ExecutorSpawnRequest): SpawnedChild;
}

/** Starts a request as is, in this process: a new session and process group, pipes as asked. */
export function spawnDetached(request: ExecutorSpawnRequest): SpawnedChild {
  const out = request.capture ? 'pipe' : 'ignore';
  return spawn(request.file, request.args, {
    cwd: request.cwd,
    env: request.env,
    stdio: [request.stdin, out, out],
    detached: true,
    windowsHide: true,
  });
}

/** Runs processes on this machine, each in a new session and process group. */
export class LocalExecutor implements Executor {
  readonly name: string = 'local';

  prepare(request: ExecutorSpawnRequest): ExecutorSpawnRequest {
    return request;
  }

  spawn(request: ExecutorSpawnRequest): SpawnedChild {
    return spawnDetached(this.prepare(request));
  }
}
