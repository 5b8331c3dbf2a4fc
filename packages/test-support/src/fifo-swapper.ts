import { spawn } from 'node:child_process';

/**
 * What a process the agent left running can do to a file the host reads: rename a fresh regular
 * file over `target`, then a FIFO, again and again. Each file holds `text` and a run of `#` of a
 * new length (below `padding`), so nothing keyed by size and mtime answers for it. The swapper has
 * its own process group: `stop()` SIGKILLs the group (the swapper and a `mkfifo` it may be running,
 * which would otherwise go on writing beside `target`) and resolves once the swapper has exited.
 */
export function startFifoSwapper(
  target: string,
  options: { text?: string; padding?: number } = {},
): { stop(): Promise<void> } {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `
      const { execFileSync } = require('node:child_process');
      const { renameSync, writeFileSync } = require('node:fs');
      const { dirname, join } = require('node:path');
      const [target, text, padding] = process.argv.slice(1);
      const dir = dirname(target);
      for (let round = 0; ; round++) {
        const fifos = Array.from({ length: 200 }, (_, i) => join(dir, '.f' + round + '-' + i));
        execFileSync('mkfifo', fifos);
        for (let i = 0; i < 200; i++) {
          const file = join(dir, '.r' + i);
          writeFileSync(file, text + '#'.repeat((round * 200 + i) % Number(padding)));
          renameSync(file, target);
          renameSync(fifos[i], target);
        }
      }`,
      target,
      options.text ?? '',
      String(options.padding ?? 997),
    ],
    { stdio: 'ignore', detached: true },
  );
  return {
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          child.kill('SIGKILL');
        }
      }),
  };
}
