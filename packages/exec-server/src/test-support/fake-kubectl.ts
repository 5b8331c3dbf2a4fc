// Test helper: a stand-in `kubectl` on disk. The transport is a command line, so the boundary a
// test can fake is that command: it logs its arguments and runs what follows `--` on this machine,
// in its own mount + pid namespaces with a private /tmp and ~/.cache when it can (a "pod").
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

export interface FakeCommand {
  /** The script's path (pass it as the transport's command). */
  path: string;
  /** Argument lines it was called with, one per call. */
  calls(): string[];
  /** The working directory the "pod" starts in. */
  workdir: string;
  isolated: boolean;
  remove(): void;
}

function canUnshare(): boolean {
  if (process.getuid?.() !== 0) return false;
  return (
    spawnSync('unshare', ['--mount', '--pid', '--fork', '--mount-proc', 'true'], { stdio: 'ignore' })
      .status === 0
  );
}

/** A fake `name` that runs its argv after the first `--` (kubectl exec style). */
export function fakeExecCommand(name: string): FakeCommand {
  const dir = mkdtempSync(join(tmpdir(), `conch-fake-${name}-`));
  const log = join(dir, 'calls.log');
  const isolated = canUnshare();
  const workdir = isolated ? '/tmp/pod-workdir' : join(dir, 'pod-workdir');
  const cache = join(homedir(), '.cache');
  // The pod's ~/.cache persists across execs (as a real pod's does), apart from this host's.
  const podCache = join(dir, 'pod-cache');
  const inner = isolated
    ? // The pod's cache is its ~/.cache (whatever XDG dir the test runner set lives in this host's /tmp).
      `mkdir -p ${cache} ${podCache} && mount --bind ${podCache} ${cache} && mount -t tmpfs -o mode=1777 pod-tmp /tmp && mkdir -p ${workdir} && cd ${workdir} && unset XDG_CACHE_HOME XDG_DATA_HOME && exec "$@"`
    : // Not isolated, the "pod" shares this host's HOME: its cache is its own all the same (the boot
      // script's XDG_CACHE_HOME), never this host's ~/.cache, which an earlier run may hold.
      `mkdir -p ${workdir} ${podCache} && cd ${workdir} && export XDG_CACHE_HOME=${podCache} && exec "$@"`;
  const script = [
    '#!/bin/bash',
    // One line per call (the boot script's newlines folded).
    'args="$*"',
    `printf '%s\\n' "\${args//$'\\n'/ }" >> ${JSON.stringify(log)}`,
    'while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done',
    'shift',
    isolated
      ? `exec unshare --mount --propagation private --pid --fork --kill-child --mount-proc sh -c '${inner}' sh "$@"`
      : `exec sh -c '${inner}' sh "$@"`,
  ].join('\n');
  const path = join(dir, name);
  writeFileSync(path, `${script}\n`);
  chmodSync(path, 0o755);
  return {
    path,
    workdir,
    isolated,
    calls: () => {
      try {
        return readFileSync(log, 'utf8').split('\n').filter(Boolean);
      } catch {
        return [];
      }
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
