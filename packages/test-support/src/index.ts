// The one copy of conch's test helpers. Tests poll for what they wait for (no fixed sleeps, so a
// loaded CI machine is slower, not red) and read /proc to prove nothing they started survives.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onExit } from 'signal-exit';

/** This checkout of conch: the repository root (test-support's dist/ is two levels below it). */
export const CHECKOUT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export interface WaitOptions {
  /** Named in the timeout error: `timed out after 20000 ms waiting for <what>`. */
  what?: string;
  /** Default 20 s. */
  timeoutMs?: number;
  /** Default 25 ms. */
  intervalMs?: number;
}

/**
 * Polls `check` until it returns a truthy value and returns that value; throws after the timeout
 * naming `what`. `check` may be async; one that throws fails the wait at once.
 */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  options: WaitOptions | string = {},
): Promise<NonNullable<T>> {
  const {
    what = 'condition',
    timeoutMs = 20_000,
    intervalMs = 25,
  } = typeof options === 'string' ? { what: options } : options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** The state letter of /proc/<pid>/stat (R, S, D, Z, X, T …), or undefined when there is no such process. */
function procState(pid: number): { state: string; ppid: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0] ?? '', ppid: Number(rest[1]) };
  } catch {
    return undefined;
  }
}

/** Whether a process is running: a zombie (exited, not yet reaped) counts as gone. */
export function isAlive(pid: number): boolean {
  const state = procState(pid)?.state;
  return state !== undefined && state !== 'Z' && state !== 'X';
}

function pids(): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number);
}

/**
 * Live processes (this one excluded) whose command line contains `needle`: a unique tag a test put
 * in what it started (`sleep 1234.5`, a temp dir, a profile dir) finds every copy that survived.
 */
export function processesMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const pid of pids()) {
    if (pid === process.pid || !isAlive(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'latin1').replace(/\0/g, ' ').includes(needle)) out.push(pid);
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/**
 * Live processes (this one excluded) whose environment carries `NAME=value`: a cookie a test put in
 * the environment of what it started finds every process that inherited it, wherever it moved to.
 */
export function processesWithEnv(name: string, value: string): number[] {
  const needle = `${name}=${value}`;
  const out: number[] = [];
  for (const pid of pids()) {
    if (pid === process.pid || !isAlive(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(needle)) out.push(pid);
    } catch {
      // exited meanwhile, or not ours to read
    }
  }
  return out;
}

/** Live descendants of `root`, by parent links (a process re-parented away is no longer one). */
export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const pid of pids()) {
    const info = procState(pid);
    if (!info || info.state === 'Z' || info.state === 'X') continue;
    const list = children.get(info.ppid);
    if (list) list.push(pid);
    else children.set(info.ppid, [pid]);
  }
  const out: number[] = [];
  const stack = [root];
  while (stack.length > 0) {
    for (const child of children.get(stack.pop()!) ?? []) {
      out.push(child);
      stack.push(child);
    }
  }
  return out;
}

/** The pid written in `file` (a test's `echo $$ > file`), once it is there. */
export function readPid(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Directories made in this process and not yet removed, one list per kind and process (a test
 * worker evaluates this module again for each file): emptied when the process exits, or when it
 * is sent SIGTERM — how vitest stops its fork workers, which ends a process without 'exit'.
 * Through signal-exit, as conch's own `onHostExit` is: a listener of our own beside it made each
 * wait for the other (signal-exit runs its hooks and re-raises only when no other listener is
 * left), so a worker that had started a registry first outlived SIGTERM and its trees were not
 * killed. A process with a SIGTERM handler of its own (vitest's main process) is left to it.
 */
function madeHere(kind: 'tempDirs' | 'scratchDirs'): string[] {
  const key = Symbol.for(`conch.test-support.${kind}`);
  const slot = globalThis as { [key]?: string[] };
  if (!slot[key]) {
    const list: string[] = [];
    slot[key] = list;
    // alwaysLast: after ordinary exit hooks. conch's onHostExit (which kills what might still write
    // here) is alwaysLast too; between the two, the one registered first runs first.
    onExit(() => removeEach(list.splice(0)), { alwaysLast: true });
  }
  return slot[key];
}

function removeEach(dirs: string[]): void {
  for (const dir of dirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // a read-only tree a toolchain made: left in the temp dir, the test's outcome unchanged
    }
  }
}

/**
 * A fresh directory under the OS temp dir, removed by `removeTempDirs()` (in afterAll) or, at the
 * latest, when the test worker's process exits or vitest stops it (SIGTERM).
 */
export function tempDir(prefix = 'conch-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  madeHere('tempDirs').push(dir);
  return dir;
}

export function removeTempDirs(): void {
  removeEach(madeHere('tempDirs').splice(0));
}

/**
 * A fresh directory under the OS temp dir kept for the life of this process and removed, with
 * everything in it, when the process exits: the scratch a vitest config gives all its tests (their
 * HOME, XDG dirs, conch's state). removeTempDirs() leaves it.
 */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  madeHere('scratchDirs').push(dir);
  return dir;
}

/**
 * Whether a system tool a suite needs (bubblewrap, Chromium, sshd …) is here. On a developer
 * machine a suite without it skips; under CI (`CI` set) a missing tool fails the run, so a
 * missing install step can never turn a suite green by skipping it.
 */
export function requireUnderCi(available: boolean, what: string, install: string): boolean {
  if (available) return true;
  if (process.env.CI) throw new Error(`${what} is required under CI: ${install}`);
  return false;
}

/** Whether `file args…` runs and exits 0 here (a system tool's `--version`, by default). */
export function programRuns(file: string, args: readonly string[] = ['--version']): boolean {
  return spawnSync(file, args, { stdio: 'ignore' }).status === 0;
}

export { startFifoSwapper } from './fifo-swapper.js';
export { SCREEN_CASES } from './screen.js';
export { canMount, fillToTheLastByte, mountTmpfs, unmountAll } from './tmpfs.js';

/**
 * Where node resolves a package reached through a symlink (laid out as pnpm does: node_modules/<name>
 * a link into a store) after `code` ran, in a real node process: it resolves a first package (the
 * loader caches the path's parts), makes `dir` with a FIFO (`dir/fifo`) and a listening unix socket
 * (`dir/sock`), runs `code` (an async function body; `fs`, `join` and `dir` are in scope, `imports`
 * its import lines), then prints where a second package resolves. On node 20 and 22 a stat of a
 * socket or FIFO left last makes it the link's path, not the package's (nodejs/node#51142).
 */
export function resolvedAfter(code: string, imports = ''): string {
  const root = realpathSync(tempDir('conch-stale-stat-'));
  mkdirSync(join(root, 'app', 'node_modules'), { recursive: true });
  for (const name of ['first', 'second']) {
    const store = join(root, 'store', name);
    mkdirSync(store, { recursive: true });
    writeFileSync(
      join(store, 'package.json'),
      JSON.stringify({ name, type: 'module', exports: './index.js' }),
    );
    writeFileSync(join(store, 'index.js'), 'export default 1;\n');
    symlinkSync(join('..', '..', 'store', name), join(root, 'app', 'node_modules', name));
  }
  const main = join(root, 'app', 'main.mjs');
  writeFileSync(
    main,
    [
      "import fs from 'node:fs';",
      "import { createServer } from 'node:net';",
      "import { join } from 'node:path';",
      "import { execFileSync } from 'node:child_process';",
      imports,
      "import.meta.resolve('first');",
      `const dir = ${JSON.stringify(join(root, 'made'))};`,
      'fs.mkdirSync(dir);',
      "execFileSync('mkfifo', [join(dir, 'fifo')]);",
      'const server = createServer();',
      "await new Promise((r) => server.listen(join(dir, 'sock'), r));",
      `await (async () => {\n${code}\n})();`,
      "console.log(import.meta.resolve('second'));",
      'server.close();',
    ].join('\n'),
  );
  return execFileSync(process.execPath, [main], { encoding: 'utf8' }).trim();
}
