// A process of a real ProcessManager as a background task sees it: the one copy for this package's tests.
import type { BackgroundRun } from '@conch/core';
import type { ManagedProcess, ProcessManager } from '@conch/process';

export function toRun(proc: ManagedProcess): BackgroundRun {
  return {
    // Through the supervisor the pid arrives a moment after spawn (as cli's runs read it).
    get pid() {
      return proc.pid;
    },
    done: proc.result.then((r) => ({
      status: r.killed ? 'cancelled' : r.exitCode === 0 ? 'completed' : 'failed',
      result: { stdout: r.stdout.head, stderr: r.stderr.head, returncode: r.exitCode },
    })),
    cancel: async () => {
      await proc.kill();
    },
    readOutput: (offset, limit) => proc.combined!.read(offset, limit),
    outputBytes: () => proc.combined!.totalBytes,
    outputFile: () => proc.combined!.path,
  };
}

/** A start function for `submit` running `script` in a shell of `manager`. */
export const shellRun = (manager: () => ProcessManager, script: string) => () =>
  toRun(manager().spawn(script, [], { shell: true, capture: { spill: 'combined' } }));
