import { InvalidSpawnOptionError } from './errors.js';
import type { Executor } from './executor.js';
import type { SandboxProfile } from './sandbox-profile.js';

export interface CaptureOptions {
  /** Bytes of each stream's start kept in memory. Default 64 KiB. */
  headBytes?: number;
  /** Bytes of each stream's end kept in memory. Default 64 KiB. */
  tailBytes?: number;
  /**
   * Where the full raw output goes once it outgrows memory: one file per stream ('separate',
   * default), one file with stdout and stderr interleaved in arrival order ('combined'), or
   * nowhere ('none': the middle of a huge output is dropped).
   */
  spill?: 'separate' | 'combined' | 'none';
  /**
   * 'auto' (default): a spill file exists only once the output outgrew head + tail. 'always': the
   * spill file is written whatever the size (`result.outputFile` / `spillPath` always set), for a
   * caller that cuts the text further and must point at every byte.
   */
  spillFile?: 'auto' | 'always';
  /**
   * Where the spill files go: the manager's temp dir (default; removed by dispose), or, for output
   * handed to a model (`output_file`), a directory that outlives the registry: `true` for the
   * manager's `outputDir()` (default `$XDG_CACHE_HOME/conch/output`), or a path. Spill files are
   * lazy, so only output that outgrew memory (or was materialized) lands there; files older than 7
   * days are pruned when a new one is written.
   */
  outputDir?: true | string;
}

export interface SpawnOptions {
  /** Working directory. Default: the manager's cwd. */
  cwd?: string;
  /** Variables added to (or, with `undefined`, removed from) the environment. */
  env?: Record<string, string | undefined>;
  /** Start from the host's environment (default true) or from `env` alone. */
  extendEnv?: boolean;
  /** Run `command` as a script: true for /bin/sh, or a shell path. `args` become $1.. */
  shell?: boolean | string;
  /** Kill the tree after this many ms (result.timedOut). */
  timeoutMs?: number;
  /** Kill the tree when aborted (result.aborted). */
  signal?: AbortSignal;
  /** Output capture; `false` sends stdout/stderr to /dev/null. */
  capture?: CaptureOptions | false;
  /** stdin: /dev/null (default) or a pipe (`proc.stdin`). */
  stdin?: 'ignore' | 'pipe';
  /** SIGTERM -> SIGKILL grace. Default: the manager's (2000 ms). */
  killGraceMs?: number;
  /** How long after exit to wait for stdout/stderr to close (grandchildren holding them). */
  drainMs?: number;
  /**
   * When the process exits while processes it started still hold stdout/stderr open (`server &`):
   * false (default) closes the pipes after `drainMs`; true keeps draining them into the same
   * capture sinks after the result resolved, so `manager.adoptLeftovers(proc)` can take the
   * leftovers over with every byte they write (or `proc.kill()` ends them).
   */
  keepLeftoverOutput?: boolean;
  /** The kernel wall (bubblewrap) around the command. Default `{ kind: 'none' }`. */
  sandbox?: SandboxProfile;
  /** How list() and events show the command (default: command + args). */
  label?: string;
  /** Runs this spawn with another executor (e.g. a BubblewrapExecutor) than the manager's. */
  executor?: Executor;
}

const hasNul = (value: string) => value.includes('\0');

/**
 * The checks every process layer (local, remote) makes before a spawn, synchronously, so a runner
 * sees the same errors wherever it runs: a non-empty command, a positive timeout, and no NUL byte in
 * the command, an argument, the env or the cwd (the OS cannot take one; node would refuse it later).
 * Throws InvalidSpawnOptionError naming the field.
 */
export function validateSpawnArguments(
  command: unknown,
  args: readonly unknown[],
  options: SpawnOptions,
): void {
  if (typeof command !== 'string' || command.length === 0) {
    throw new InvalidSpawnOptionError('command', 'a non-empty string', command);
  }
  if (options.timeoutMs !== undefined && !(options.timeoutMs > 0)) {
    throw new InvalidSpawnOptionError('timeoutMs', 'a positive number of milliseconds', options.timeoutMs);
  }
  if (hasNul(command)) throw new InvalidSpawnOptionError('command', 'a string without NUL bytes', command);
  for (const arg of args) {
    if (typeof arg !== 'string' || hasNul(arg)) {
      throw new InvalidSpawnOptionError('args', 'strings without NUL bytes', arg);
    }
  }
  for (const [key, value] of Object.entries(options.env ?? {})) {
    if (hasNul(key) || (value !== undefined && hasNul(value))) {
      throw new InvalidSpawnOptionError(`env.${key}`, 'a string without NUL bytes', value);
    }
  }
  if (options.cwd !== undefined && hasNul(options.cwd)) {
    throw new InvalidSpawnOptionError('cwd', 'a path without NUL bytes', options.cwd);
  }
}
