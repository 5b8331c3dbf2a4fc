// Drives the real conch-mcp bin over stdio byte by byte, without the SDK client: what a broken or
// hostile client sends (lines that are not JSON, huge ids, 40 MB lines) and what a client with a
// plain pipe for the server's stdout sees (Python's subprocess gives one; Node gives a socket).
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { tempDir, waitFor } from '@conch/test-support';
import { BIN, withoutConchConfig } from './harness.js';

export interface RawAnswer {
  message: Record<string, any>;
  /** Bytes of the line, newline excluded. */
  bytes: number;
}

export interface RawServer {
  child: ChildProcess;
  cwd: string;
  stderr(): string;
  /** Every line the server wrote, parsed (a line that is not JSON is kept as `{ unparsed }`). */
  answers: RawAnswer[];
  /** Writes `text` to the server's stdin; resolves once written (or rejects when stdin is gone). */
  send(text: string | Buffer): Promise<void>;
  /** Sends a request with a fresh numeric id and waits for the answer with that id. */
  request(method: string, params?: Record<string, unknown>, timeoutMs?: number): Promise<RawAnswer>;
  /** The first answer (from `from` on) with this id (null: an error answered without one). */
  answer(id: string | number | null, from?: number, timeoutMs?: number): Promise<RawAnswer>;
  /** Resolves with the exit code once the server process has exited. */
  exited: Promise<number | null>;
}

export interface RawServerOptions {
  config?: Record<string, unknown>;
  cwd?: string;
  /** A file descriptor for the server's stdout (a FIFO's write end) and the stream to read it from. */
  stdout?: { fd: number; reader: Readable };
  env?: Record<string, string>;
}

/** Starts conch-mcp and completes the MCP handshake by hand. */
export async function startRawServer(options: RawServerOptions = {}): Promise<RawServer> {
  const cwd = options.cwd ?? tempDir('conch-mcp-raw-');
  const args = [BIN];
  if (options.config) {
    writeFileSync(join(cwd, 'test.config.json'), JSON.stringify(options.config));
    args.push('--config', 'test.config.json');
  }
  const child = spawn(process.execPath, args, {
    cwd,
    env: { ...withoutConchConfig(), CONCH_LOG_LEVEL: 'warn', ...options.env },
    stdio: ['pipe', options.stdout ? options.stdout.fd : 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const answers: RawAnswer[] = [];
  const reader = options.stdout?.reader ?? child.stdout!;
  let pending: Buffer[] = [];
  reader.on('data', (chunk: Buffer) => {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(0x0a, start);
      if (newline === -1) {
        pending.push(chunk.subarray(start));
        break;
      }
      const line = Buffer.concat([...pending, chunk.subarray(start, newline)]);
      pending = [];
      start = newline + 1;
      let message: Record<string, any>;
      try {
        message = JSON.parse(line.toString('utf8')) as Record<string, any>;
      } catch {
        message = { unparsed: line.toString('utf8', 0, Math.min(line.length, 200)) };
      }
      answers.push({ message, bytes: line.length });
    }
  });
  child.stdin!.on('error', () => undefined);
  const send = (text: string | Buffer) =>
    new Promise<void>((resolve, reject) => {
      child.stdin!.write(text, (error) => (error ? reject(error) : resolve()));
    });
  const answer = async (id: string | number | null, from = 0, timeoutMs = 60_000) =>
    waitFor(() => answers.slice(from).find((a) => a.message.id === id), {
      what: `the answer to ${JSON.stringify(id)}\n${stderr.slice(-2000)}`,
      timeoutMs,
    });
  let next = 1;
  const request = async (method: string, params?: Record<string, unknown>, timeoutMs?: number) => {
    const id = next++;
    await send(`${JSON.stringify({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) })}\n`);
    return answer(id, 0, timeoutMs);
  };
  const init = await request('initialize', {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'conch-raw-test', version: '0.0.0' },
  });
  if (!init.message.result) throw new Error(`initialize failed: ${JSON.stringify(init.message)}\n${stderr}`);
  await send(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
  return { child, cwd, stderr: () => stderr, answers, send, request, answer, exited };
}

/** A reader for a FIFO's read end opened non-blocking (so the writer's open does not wait). */
export function fifoReader(fd: number): Readable {
  return new Socket({ fd, readable: true, writable: false });
}
