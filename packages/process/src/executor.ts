import { spawn, type ChildProcess } from 'node:child_process';

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
 * executor only starts the child. The child must lead its own process group (`detached: true`)
 * so that the manager can signal the whole tree.
 */
export interface Executor {
  readonly name: string;
  spawn(request: ExecutorSpawnRequest): ChildProcess;
}

/** Runs processes on this machine, each in a new session and process group. */
export class LocalExecutor implements Executor {
  readonly name: string = 'local';

  spawn(request: ExecutorSpawnRequest): ChildProcess {
    const out = request.capture ? 'pipe' : 'ignore';
    return spawn(request.file, request.args, {
      cwd: request.cwd,
      env: request.env,
      stdio: [request.stdin, out, out],
      detached: true,
      windowsHide: true,
    });
  }
}
