// conch-mcp's session follows its client: when the client closes its read end (stdout), its write end (stdin), both, or either mid-answer, the server ends at once — every process it started killed, its temp dir removed — with one log line saying why, and starts nothing after; never an uncaught EPIPE and serving on.
import { type ChildProcess, execFileSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { closeSync, constants, existsSync, openSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isAlive, processesMentioning, tempDir, waitFor } from '@conch/test-support';
import { afterEach, describe, expect, test } from 'vitest';
import { type Harness, startServer } from './test-support/harness.js';
import { fifoReader, type RawServer, startRawServer } from './test-support/raw-client.js';

let harness: Harness | undefined;
let raw: RawServer | undefined;
afterEach(async () => {
  await harness?.close().catch(() => undefined);
  harness = undefined;
  if (raw && raw.child.exitCode === null) raw.child.kill('SIGKILL');
  raw = undefined;
});

/**
 * A command that proves it started (a file) and, if anything left it running, proves that too (a
 * file written after `seconds`); its sleep has a unique duration to find it among processes.
 */
function markedCommand(cwd: string, seconds = 4) {
  const sleep = `sleep ${seconds}.${randomInt(1e9)}`;
  return {
    command: `echo started > started.marker; ${sleep}; echo survived > survived.marker`,
    started: () => existsSync(join(cwd, 'started.marker')),
    survived: () => existsSync(join(cwd, 'survived.marker')),
    running: () => processesMentioning(sleep).length > 0,
    seconds,
  };
}

/** A private TMPDIR for one server: the registry's temp dir (`conch-XXXXXX`) is made there. */
function privateTmp(): { env: Record<string, string>; leftover: () => string[] } {
  const dir = tempDir('conch-mcp-tmp-');
  return {
    env: { TMPDIR: dir },
    leftover: () => readdirSync(dir).filter((name) => /^conch-[A-Za-z0-9]{6}$/.test(name)),
  };
}

/** The shutdown lines in a server's log. */
function shutdownLines(stderr: string): string[] {
  return stderr.split('\n').filter((line) => line.includes('conch-mcp shutting down'));
}

/** After the server is gone: nothing it ran survives, even past the sleep, and the log says why once. */
async function expectCleanEnd(
  stderr: () => string,
  command: ReturnType<typeof markedCommand>,
  why: RegExp,
  tmp: ReturnType<typeof privateTmp>,
) {
  await waitFor(() => !command.running(), { what: 'the command to be killed', timeoutMs: 10_000 });
  // Past the command's own sleep: a process tree left running would have written this by now.
  await new Promise((resolve) => setTimeout(resolve, (command.seconds + 1) * 1000));
  expect(command.survived()).toBe(false);
  const lines = shutdownLines(stderr());
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(why);
  expect(stderr()).not.toMatch(/uncaught exception|EPIPE.*keeps serving/);
  expect(tmp.leftover()).toEqual([]);
}

/** The SDK transport's child process (its stdio is what a client holds). */
const childOf = (h: Harness) => (h.transport as unknown as { _process: ChildProcess })._process;

describe('the session follows its client (the SDK client: stdout is a socket)', () => {
  test('the client closes its read end while a long command runs: the server ends, kills it, and starts nothing after', async () => {
    const tmp = privateTmp();
    harness = await startServer({ env: tmp.env });
    const { cwd, serverPid } = harness;
    const long = markedCommand(cwd);
    const pending = harness.client
      .callTool({ name: 'cli_based_tool', arguments: { command: long.command, background: false } })
      .catch((error: unknown) => error);
    await waitFor(long.started, { what: 'the command to start', timeoutMs: 30_000 });
    const child = childOf(harness);
    child.stdout!.destroy();
    await waitFor(() => shutdownLines(harness!.stderr()).length > 0, {
      what: 'the server to notice',
      timeoutMs: 10_000,
    });
    // The session is over: a request written now is never read.
    const late = join(cwd, 'late.marker');
    child.stdin!.on('error', () => undefined);
    child.stdin!.write(
      `${JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'tools/call', params: { name: 'cli_based_tool', arguments: { command: `touch ${late}` } } })}\n`,
    );
    await waitFor(() => !isAlive(serverPid), { what: 'the server to exit', timeoutMs: 15_000 });
    await expectCleanEnd(harness.stderr, long, /stdout's reader went away|stdout broken|stdout closed/, tmp);
    expect(existsSync(late)).toBe(false);
    await pending;
  });

  test('the client closes stdin while a long command runs: the server ends and kills it', async () => {
    const tmp = privateTmp();
    harness = await startServer({ env: tmp.env });
    const { cwd, serverPid } = harness;
    const long = markedCommand(cwd);
    const pending = harness.client
      .callTool({ name: 'cli_based_tool', arguments: { command: long.command, background: false } })
      .catch((error: unknown) => error);
    await waitFor(long.started, { what: 'the command to start', timeoutMs: 30_000 });
    childOf(harness).stdin!.end();
    await waitFor(() => !isAlive(serverPid), { what: 'the server to exit', timeoutMs: 15_000 });
    await expectCleanEnd(harness.stderr, long, /stdin closed/, tmp);
    await pending;
  });

  test('the client closes both ends at once: one clean end, one line saying why', async () => {
    const tmp = privateTmp();
    harness = await startServer({ env: tmp.env });
    const { cwd, serverPid } = harness;
    const long = markedCommand(cwd);
    const started = (await harness.client.callTool({
      name: 'cli_based_tool',
      arguments: { command: long.command, background: true },
    })) as { structuredContent?: Record<string, unknown> };
    expect(started.structuredContent?.background_task_id).toEqual(expect.any(String));
    await waitFor(long.started, { what: 'the background command to start', timeoutMs: 30_000 });
    const child = childOf(harness);
    child.stdin!.end();
    child.stdout!.destroy();
    await waitFor(() => !isAlive(serverPid), { what: 'the server to exit', timeoutMs: 15_000 });
    await expectCleanEnd(harness.stderr, long, /stdin closed|stdout/, tmp);
  });

  test('the client stops reading mid-answer and closes its read end: the blocked write ends the session', async () => {
    const tmp = privateTmp();
    const cwd = tempDir('conch-mcp-');
    // 256 KiB of quotes: an answer of about 1.5 MB, more than the socket buffers hold.
    writeFileSync(join(cwd, 'quotes.txt'), `${'"'.repeat(1023)}\n`.repeat(256));
    harness = await startServer({ cwd, env: tmp.env });
    const { serverPid } = harness;
    const child = childOf(harness);
    child.stdout!.pause();
    const big = harness.client
      .callTool({ name: 'read_file', arguments: { path: 'quotes.txt' } })
      .catch((error: unknown) => error);
    const long = markedCommand(cwd);
    const pending = harness.client
      .callTool({ name: 'cli_based_tool', arguments: { command: long.command, background: false } })
      .catch((error: unknown) => error);
    // Requests are handled in order: read_file (milliseconds) is answering by the time this runs.
    await waitFor(long.started, { what: 'the command to start', timeoutMs: 30_000 });
    expect(isAlive(serverPid)).toBe(true);
    child.stdout!.destroy();
    await waitFor(() => !isAlive(serverPid), { what: 'the server to exit', timeoutMs: 15_000 });
    await expectCleanEnd(harness.stderr, long, /stdout/, tmp);
    await Promise.all([big, pending]);
  });
});

describe('the session follows its client (a plain pipe for stdout, as Python gives)', () => {
  test('the reader of a pipe stdout goes away while nothing is written: a ping finds it and the server ends', async () => {
    const tmp = privateTmp();
    const dir = tempDir('conch-mcp-fifo-');
    const fifo = join(dir, 'stdout');
    execFileSync('mkfifo', [fifo]);
    // The reader first (non-blocking, so opening the writer does not wait), then the writer.
    const readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const writeFd = openSync(fifo, constants.O_WRONLY);
    const reader = fifoReader(readFd);
    const cwd = tempDir('conch-mcp-');
    try {
      raw = await startRawServer({ cwd, stdout: { fd: writeFd, reader }, env: tmp.env });
    } finally {
      // Only the server holds the writer now.
      closeSync(writeFd);
    }
    const long = markedCommand(cwd);
    await raw.send(
      `${JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'cli_based_tool', arguments: { command: long.command, background: false } } })}\n`,
    );
    await waitFor(long.started, { what: 'the command to start', timeoutMs: 30_000 });
    reader.destroy();
    const code = await Promise.race([
      raw.exited,
      new Promise((resolve) => setTimeout(() => resolve('still running'), 15_000)),
    ]);
    expect(code).not.toBe('still running');
    await expectCleanEnd(raw.stderr, long, /stdout broken \(EPIPE\)/, tmp);
  });
});
