// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { readFileSync } from 'node:fs';
import type { SandboxProfile } from '@conch/sandbox';
import { InvalidSpawnOptionError } from './errors.js';
import type { Executor } from './executor.js';

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
  /**
   * Bytes this process's spill files may take in all (its streams together); past it the files
   * stop growing and the result's `spill` report says how much was kept. Default: the manager's
   * `spillLimits.perProcess` (1 GiB). The manager's `spillLimits.total` caps all its files too.
   */
  maxFileBytes?: number;
  /**
   * What happens when a spill limit is reached: 'continue' (default) lets the command run on, its
   * output counted and its head and tail kept in memory but no longer written; 'stop' kills it
   * (the report says `stopped`).
   */
  onFileLimit?: 'continue' | 'stop';
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
  /**
   * The process's id (pai's `process_id`: "Custom process ID (auto-generated if None)"): what
   * `get()`, `kill()`, `list()` and the process events name it by. A non-empty string without NUL
   * bytes, at most 200 characters, that no process the manager lists (running or finished, until
   * its history drops it) has; otherwise spawn throws (DuplicateProcessIdError for a taken id).
   * Default (undefined or null): `p1`, `p2`, … Only the local ProcessManager honours it.
   */
  process_id?: string | null;
  /** Same as `process_id` (give one of them, or the same value in both). */
  processId?: string | null;
}

/** The longest `process_id` spawn takes. */
export const MAX_PROCESS_ID_LENGTH = 200;

/**
 * The caller's process id (`process_id` or `processId`), checked: undefined when neither is given
 * (null counts as not given, as pai's None). Throws InvalidSpawnOptionError naming the field for a
 * value that is not a non-empty string without NUL bytes (at most MAX_PROCESS_ID_LENGTH
 * characters), or when the two fields disagree.
 */
export function requestedProcessId(options: SpawnOptions): string | undefined {
  const snake = options.process_id;
  const camel = options.processId;
  for (const [field, value] of [
    ['process_id', snake],
    ['processId', camel],
  ] as const) {
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string' || value.trim().length === 0) {
      throw new InvalidSpawnOptionError(
        field,
        'a non-empty string (or leave it out for an automatic id)',
        value,
      );
    }
    if (hasNul(value) || value.length > MAX_PROCESS_ID_LENGTH) {
      throw new InvalidSpawnOptionError(
        field,
        `a string without NUL bytes, at most ${MAX_PROCESS_ID_LENGTH} characters`,
        value,
      );
    }
  }
  if (snake !== undefined && snake !== null && camel !== undefined && camel !== null && snake !== camel) {
    throw new InvalidSpawnOptionError(
      'processId',
      `the same id as process_id (${JSON.stringify(snake)}), or only one of the two`,
      camel,
    );
  }
  return snake ?? camel ?? undefined;
}

const hasNul = (value: string) => value.includes('\0');

/** The longest delay node's timers take (2^31 - 1 ms, ~24.8 days): a larger one fires at once. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** Bytes one argument or environment string may have on Linux, its NUL included (MAX_ARG_STRLEN: 32 pages). */
export const MAX_ARG_STRLEN = 131_072;

let argMaxCache: number | undefined;

/**
 * Bytes the kernel takes for a command's arguments and environment together (strings with their
 * NULs, plus a pointer each): a quarter of the stack limit, at least 128 KiB and at most 6 MiB
 * (Linux's bprm_stack_limits; `getconf ARG_MAX` says the same). 2 MiB with the usual 8 MiB stack.
 */
export function argMax(): number {
  if (argMaxCache !== undefined) return argMaxCache;
  let stack = 8 * 1024 * 1024;
  try {
    const line = /^Max stack size\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'latin1'));
    if (line) stack = line[1] === 'unlimited' ? Infinity : Number(line[1]) || stack;
  } catch {
    // not Linux: the usual value
  }
  argMaxCache = Math.max(128 * 1024, Math.min(6 * 1024 * 1024, Math.floor(stack / 4)));
  return argMaxCache;
}

/** Why a command line cannot be passed to exec (E2BIG), naming what is too long. */
export interface CommandLineProblem {
  /** 'command' (the program or, in shell mode, the script), 'args' (args[index]), 'env' (env[name]) or 'total'. */
  field: 'command' | 'args' | 'env' | 'total';
  index?: number;
  name?: string;
  /** Its size in bytes (with NULs and, for 'total', pointers). */
  bytes: number;
  /** The limit it is over. */
  limit: number;
}

/**
 * Whether `command` + `args` + `env` fit what exec takes (Linux: MAX_ARG_STRLEN per string, ARG_MAX
 * in all); the first thing over a limit when they do not. `shellScript`: `command` is a script
 * passed as one argument (`sh -c <script>`). Cheap when the line is small (a length sum).
 */
export function commandLineProblem(
  command: string,
  args: readonly string[],
  env: Record<string, string | undefined>,
): CommandLineProblem | undefined {
  let chars = command.length;
  for (const arg of args) chars += arg.length;
  let envChars = 0;
  for (const key in env) {
    const value = env[key];
    if (value !== undefined) envChars += key.length + value.length + 1;
  }
  // A UTF-16 unit is at most 3 bytes of UTF-8: far below both limits, nothing to measure.
  if ((chars + envChars) * 3 < MAX_ARG_STRLEN) return undefined;
  const size = (s: string) => Buffer.byteLength(s) + 1;
  const commandBytes = size(command);
  if (commandBytes > MAX_ARG_STRLEN) return { field: 'command', bytes: commandBytes, limit: MAX_ARG_STRLEN };
  let total = commandBytes + 8;
  for (let i = 0; i < args.length; i++) {
    const bytes = size(args[i]!);
    if (bytes > MAX_ARG_STRLEN) return { field: 'args', index: i, bytes, limit: MAX_ARG_STRLEN };
    total += bytes + 8;
  }
  for (const key in env) {
    const value = env[key];
    if (value === undefined) continue;
    const bytes = size(`${key}=${value}`);
    if (bytes > MAX_ARG_STRLEN) return { field: 'env', name: key, bytes, limit: MAX_ARG_STRLEN };
    total += bytes + 8;
  }
  const limit = argMax();
  return total > limit ? { field: 'total', bytes: total, limit } : undefined;
}

const fmtBytes = (n: number) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/** A CommandLineProblem in words, for an error message. */
export function describeCommandLineProblem(problem: CommandLineProblem, shellScript = false): string {
  const what =
    problem.field === 'command'
      ? shellScript
        ? 'the script (a shell gets it as one argument)'
        : 'the program name'
      : problem.field === 'args'
        ? `argument ${problem.index! + 1}`
        : problem.field === 'env'
          ? `the environment variable ${problem.name}`
          : 'the arguments and environment together';
  const rule =
    problem.field === 'total'
      ? `the system takes at most ${fmtBytes(problem.limit)} bytes for all of them (ARG_MAX)`
      : `Linux takes at most ${fmtBytes(problem.limit)} bytes in one argument or variable (MAX_ARG_STRLEN)`;
  return `${what} is ${fmtBytes(problem.bytes)} bytes; ${rule}`;
}

/**
 * The checks every process layer (local, remote) makes before a spawn, synchronously, so a runner
 * sees the same errors wherever it runs: a non-empty command, a positive timeout node's timers can
 * wait (at most MAX_TIMEOUT_MS), and no NUL byte in
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
  if (options.timeoutMs !== undefined && !(options.timeoutMs > 0 && options.timeoutMs <= MAX_TIMEOUT_MS)) {
    // Past node's timer limit a timeout would fire at once and kill a healthy command.
    throw new InvalidSpawnOptionError(
      'timeoutMs',
      `a positive number of milliseconds, at most ${MAX_TIMEOUT_MS} (node's timer limit, ~24.8 days; leave it out for no limit)`,
      options.timeoutMs,
    );
  }
  const capture = options.capture;
  if (capture && capture.maxFileBytes !== undefined && !(capture.maxFileBytes >= 0)) {
    throw new InvalidSpawnOptionError(
      'capture.maxFileBytes',
      'a number of bytes (0 or more)',
      capture.maxFileBytes,
    );
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
