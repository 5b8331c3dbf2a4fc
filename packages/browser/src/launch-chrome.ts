import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AbortedError,
  onHostExit,
  readRegularFileSync,
  removeChromiumSingleton,
  type Logger,
  removeSync,
} from '@conch/core';
import type { ManagedProcess, ProcessManager, ProcessResult } from '@conch/process';
import { fetchJsonVersion } from './cdp-endpoint.js';
import { BROWSER_LABEL, chromeArgs, readyLabel } from './chrome-flags.js';
import { BrowserStartError } from './errors/browser-start-error.js';
import { InvalidBrowserOptionError } from './errors/invalid-browser-option-error.js';
import { findChrome } from './find-chrome.js';

export interface LaunchChromeOptions {
  /** The process manager that owns the browser (a registry's: `ensureProcessManager(ctx)`). */
  manager: ProcessManager;
  /** Where the private profile directory is created; close() removes the profile. */
  tempDir: string;
  /** Default: CHROME_PATH, else chromium / google-chrome / … found on PATH. */
  executablePath?: string;
  /** How long Chromium may take to answer `/json/version`. Default 30 000 ms. */
  startTimeoutMs?: number;
  /** Flags appended after conch's own (CHROME_FLAGS). */
  extraArgs?: readonly string[];
  /** Aborts the start-up (the half-started browser is killed and its profile removed). */
  signal?: AbortSignal;
  logger?: Logger;
}

/** A local headless Chromium owned by a process manager. */
export interface ChromeInstance extends AsyncDisposable {
  /** The browser WebSocket endpoint, `ws://127.0.0.1:<port>/devtools/browser/<id>`. */
  readonly wsUrl: string;
  /** `http://127.0.0.1:<port>` (`/json/version`, `/json/list`). */
  readonly httpUrl: string;
  readonly port: number;
  /** e.g. `Chrome/156.0.8078.79`. */
  readonly version: string;
  readonly executablePath: string;
  /** The private profile (`--user-data-dir`), removed by close(). */
  readonly profileDir: string;
  /** Its process in the manager (`manager.list()`, `!ps`): labelled `[browser] Chrome Headless  CDP Ready ws://…`. */
  readonly process: ManagedProcess;
  readonly closed: boolean;
  /** Kills the browser's whole process tree and removes its profile. Idempotent. */
  close(): Promise<void>;
}

/** Reads `<profile>/DevToolsActivePort` (`<port>\n<path>`), or undefined while it is missing or partial. */
function readActivePort(profileDir: string): number | undefined {
  let text: string;
  try {
    text = readRegularFileSync(join(profileDir, 'DevToolsActivePort'), {
      maxBytes: 64 * 1024,
      encoding: 'utf8',
    });
  } catch {
    return undefined;
  }
  // Chromium writes the file non-atomically: wait until both lines are there.
  const [portLine, pathLine] = text.split('\n');
  const port = Number(portLine);
  if (!Number.isInteger(port) || port <= 0 || !pathLine?.startsWith('/devtools/')) return undefined;
  return port;
}

function removeProfile(profileDir: string, logger?: Logger): void {
  // Chromium's singleton dir is in its $TMPDIR (the host's), outside the profile.
  removeChromiumSingleton(profileDir);
  try {
    removeSync(profileDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  } catch (error) {
    logger?.warn({ err: error, profileDir }, 'could not remove the browser profile');
  }
}

/** The last lines Chromium wrote to stderr: from memory while it runs, from its result once it ended (the buffers are released then). */
function stderrTail(proc: ManagedProcess, result?: ProcessResult): string {
  const snapshot = result ? result.stderr : proc.stderr.snapshot();
  const text = snapshot.truncated ? snapshot.tail : snapshot.head;
  return text.trimEnd().split('\n').slice(-12).join('\n');
}

/**
 * Starts a private headless Chromium through `manager` (so it is listed with the other processes,
 * killed with them, and — through the manager's supervisor — dies with the host even on SIGKILL),
 * with a fresh profile and remote debugging on 127.0.0.1 at a free port, and resolves once
 * `/json/version` answers. On any failure (no executable, early exit, timeout, abort) the
 * half-started browser is killed and its profile removed before the error is thrown.
 */
export async function launchChrome(options: LaunchChromeOptions): Promise<ChromeInstance> {
  const { manager, logger } = options;
  const startTimeoutMs = options.startTimeoutMs ?? 30_000;
  if (!(Number.isFinite(startTimeoutMs) && startTimeoutMs > 0)) {
    throw new InvalidBrowserOptionError(
      'startTimeoutMs',
      'a positive number of milliseconds',
      startTimeoutMs,
    );
  }
  if (options.signal?.aborted) throw new AbortedError('Starting the browser', options.signal.reason);
  const executablePath = options.executablePath ?? findChrome();
  const profileDir = mkdtempSync(join(options.tempDir, 'chrome-profile-'));
  let proc: ManagedProcess;
  try {
    proc = manager.spawn(executablePath, chromeArgs(profileDir, options.extraArgs), {
      label: `${BROWSER_LABEL}  starting`,
      // Chromium's chatter (dbus, GPU) is for diagnosis only: keep its start and end in memory.
      capture: { headBytes: 16 * 1024, tailBytes: 16 * 1024, spill: 'none' },
      killGraceMs: 3000,
    });
  } catch (error) {
    removeProfile(profileDir, logger);
    throw error;
  }

  let exited = false;
  void proc.result.then(() => {
    exited = true;
  });
  const fail = async (error: Error): Promise<never> => {
    await proc.kill();
    removeProfile(profileDir, logger);
    throw error;
  };

  const started = performance.now();
  const deadline = started + startTimeoutMs;
  let lastError = 'DevToolsActivePort was not written';
  let port: number | undefined;
  let version: { Browser?: string; webSocketDebuggerUrl?: string } | undefined;
  while (version === undefined) {
    if (options.signal?.aborted) return fail(new AbortedError('Starting the browser', options.signal.reason));
    if (exited) {
      const result = await proc.result;
      const how = result.spawnError
        ? `it could not be started (${result.spawnError.code}: ${result.spawnError.message})`
        : `it exited (${result.signal ?? `code ${String(result.exitCode)}`}) before answering`;
      return fail(new BrowserStartError(executablePath, how, stderrTail(proc, result)));
    }
    if (performance.now() > deadline) {
      return fail(
        new BrowserStartError(
          executablePath,
          `it did not answer within ${startTimeoutMs} ms (${lastError})`,
          stderrTail(proc),
        ),
      );
    }
    port ??= readActivePort(profileDir);
    if (port !== undefined) {
      try {
        version = await fetchJsonVersion(`http://127.0.0.1:${port}`, 2000, options.signal);
        break;
      } catch (error) {
        lastError = `GET http://127.0.0.1:${port}/json/version: ${(error as Error).message}`;
      }
    }
    await sleep(20);
  }

  const httpUrl = `http://127.0.0.1:${port!}`;
  const wsUrl = version.webSocketDebuggerUrl!;
  proc.setLabel(readyLabel(wsUrl));
  logger?.info(
    { wsUrl, pid: proc.pid, ms: Math.round(performance.now() - started) },
    'browser: headless Chromium ready',
  );

  let closing: Promise<void> | undefined;
  // A host that dies without close(): after the process managers' kill hooks (registered before
  // this one, with the manager) have killed Chromium, and before the temp dir holding the profile
  // is removed (the `clean` phase), so the singleton link can still be read.
  const removeExitHook = onHostExit(() => removeProfile(profileDir), 'kill');
  const close = () =>
    (closing ??= (async () => {
      await proc.kill();
      // Only now: a dying Chromium still writes into its profile.
      removeProfile(profileDir, logger);
      removeExitHook();
      logger?.info({ wsUrl }, 'browser: headless Chromium stopped');
    })());
  return {
    wsUrl,
    httpUrl,
    port: port!,
    version: version.Browser ?? 'unknown',
    executablePath,
    profileDir,
    process: proc,
    get closed() {
      return closing !== undefined;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
