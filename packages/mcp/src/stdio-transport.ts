import { fstatSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import type { Logger } from '@conch/core';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  JSONRPCMessageSchema,
  type JSONRPCMessage,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';

/**
 * The largest JSON-RPC message conch-mcp reads (one line). 32 MiB holds the largest argument a
 * tool takes (write_file's content, 4 MiB by default) however JSON escapes it; a longer line is
 * skipped as it streams in (never buffered whole) and answered with an error, and the server
 * keeps serving.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024;
/**
 * The largest message conch-mcp sends: well under the 10 MB an MCP SDK client reads in one
 * message (a longer one makes it close the connection). Tool results are cut to fit before they
 * get here (`toCallToolResult`); anything else longer is replaced by an error answer.
 */
export const DEFAULT_MAX_ANSWER_BYTES = 4 * 1024 * 1024;
/** The largest error answer conch-mcp sends (a JSON-RPC error, or a call the registry refused). */
export const MAX_ERROR_ANSWER_BYTES = 64 * 1024;
/** The longest request id echoed in an answer; a request with a longer one is refused with id null. */
export const MAX_ID_CHARS = 1024;
/** How often, while calls are unanswered, a pipe stdout is probed with a ping (see `probeIntervalMs`). */
export const DEFAULT_PROBE_INTERVAL_MS = 2000;

const PROBE_ID_PREFIX = 'conch-liveness-';
/** Bytes of an oversized line kept at each end to find its id in. */
const EDGE_BYTES = 512;

export interface ConchStdioTransportOptions {
  stdin?: Readable;
  stdout?: Writable;
  /** Default DEFAULT_MAX_MESSAGE_BYTES. */
  maxMessageBytes?: number;
  /** Default DEFAULT_MAX_ANSWER_BYTES. */
  maxAnswerBytes?: number;
  logger?: Logger;
  /**
   * Watch stdout for its reader going away while nothing is written (a socket, as Node and the MCP
   * SDK clients give a child: a worker thread reads it and sees the end), from the first
   * `tools/call` request on. Default: true when stdout is the process's fd 1 and a socket.
   */
  watchReader?: boolean;
  /**
   * A pipe's writer cannot see its reader go away without writing: while a call is unanswered and
   * nothing was written for this long, conch-mcp sends the client an MCP `ping` (a failed write
   * ends the session). Default DEFAULT_PROBE_INTERVAL_MS when stdout is the process's fd 1 and a
   * pipe; 0 turns it off.
   */
  probeIntervalMs?: number;
}

/**
 * conch-mcp's stdio transport (the SDK's `StdioServerTransport` protocol: one JSON-RPC message per
 * line), built so that nothing a client sends can end the server and the server's lifetime
 * follows its client:
 *
 * - a line longer than `maxMessageBytes` is skipped as it arrives and answered with an error (the
 *   SDK's transport closed itself at 10 MB, ending the server); a line that is not JSON, not
 *   JSON-RPC, or has an id longer than MAX_ID_CHARS is answered with an error, never echoed;
 * - no answer is longer than `maxAnswerBytes` (the SDK client closes the connection on a message
 *   over 10 MB: that, not the request, is what a 1.5 MB path did, its error echoing it 8 times);
 * - stdin's end, a write that fails (EPIPE: the client closed its read end), the reader of a
 *   socket stdout going away, or a pipe stdout found broken by a probe close the transport once,
 *   with `closeReason` saying which; nothing more is read after that.
 */
export class ConchStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  /** Why the transport closed (one sentence), once it has. */
  closeReason: string | undefined;

  private readonly stdin: Readable;
  private readonly stdout: Writable;
  private readonly maxMessageBytes: number;
  private readonly maxAnswerBytes: number;
  private readonly logger: Logger | undefined;
  private readonly options: ConchStdioTransportOptions;
  private chunks: Buffer[] = [];
  private buffered = 0;
  private skipping: { bytes: number; head: Buffer; tail: Buffer } | undefined;
  private started = false;
  private closed = false;
  private watcher: Worker | undefined;
  /** The stdout watcher is wanted and has not started yet. */
  private watchPending = false;
  private probe: NodeJS.Timeout | undefined;
  private probes = 0;
  private lastWrite = performance.now();
  /** Requests read and not yet answered (for the probe). */
  private readonly unanswered = new Set<RequestId>();

  constructor(options: ConchStdioTransportOptions = {}) {
    this.options = options;
    this.stdin = options.stdin ?? process.stdin;
    this.stdout = options.stdout ?? process.stdout;
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.maxAnswerBytes = options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES;
    this.logger = options.logger;
  }

  async start(): Promise<void> {
    if (this.started) throw new Error('ConchStdioTransport already started');
    this.started = true;
    this.stdin.on('data', this.onData);
    this.stdin.on('end', this.onStdinEnd);
    this.stdin.on('close', this.onStdinEnd);
    this.stdin.on('error', this.onStdinError);
    // Stays for the life of the process: a write failing after close is no uncaught exception.
    this.stdout.on('error', this.onStdoutError);
    this.stdout.on('close', this.onStdoutClose);
    const kind = this.stdout === process.stdout ? stdoutKind() : 'other';
    // Its worker thread (an isolate and a node of its own, ~15 ms of CPU beside the server's start
    // on a 2-core machine) starts at the first tools/call, not here (see handleLine).
    this.watchPending = this.options.watchReader ?? kind === 'socket';
    const probeMs = this.options.probeIntervalMs ?? (kind === 'pipe' ? DEFAULT_PROBE_INTERVAL_MS : 0);
    if (probeMs > 0) {
      this.probe = setInterval(() => this.probeReader(probeMs), Math.max(50, Math.floor(probeMs / 4)));
      this.probe.unref();
    }
  }

  async close(): Promise<void> {
    this.end('the server closed the transport');
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return Promise.reject(new Error('conch-mcp: the connection is closed'));
    if ('id' in message && message.id !== undefined && ('result' in message || 'error' in message))
      this.unanswered.delete(message.id);
    let line: string;
    try {
      line = this.bounded(message);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    return this.write(line);
  }

  /** The message as one line, within the answer bounds (an oversized answer becomes an error). */
  private bounded(message: JSONRPCMessage): string {
    const json = JSON.stringify(message);
    const isError = 'error' in message;
    const limit = isError ? MAX_ERROR_ANSWER_BYTES : this.maxAnswerBytes;
    const bytes = json.length * 3 <= limit ? json.length : Buffer.byteLength(json);
    if (bytes <= limit) return `${json}\n`;
    if ('id' in message && ('result' in message || isError)) {
      const original = isError ? message.error : undefined;
      this.logger?.warn(
        { id: message.id === undefined ? undefined : shortId(message.id), bytes, limit },
        `conch-mcp: an answer of ${bytes} bytes is more than the ${limit} it sends; answered with an error instead`,
      );
      return `${JSON.stringify({
        jsonrpc: '2.0',
        id: message.id ?? null,
        error: {
          code: original?.code ?? -32603,
          message: original
            ? `${original.message.slice(0, 8000)}… (the error was ${bytes} bytes; cut to fit)`
            : `the answer was ${bytes} bytes, more than the ${limit} conch-mcp sends in one message; it was not sent`,
        },
      })}\n`;
    }
    this.logger?.warn(
      { bytes, limit, method: 'method' in message ? message.method.slice(0, 100) : undefined },
      `conch-mcp: a message of ${bytes} bytes is more than the ${limit} it sends; not sent`,
    );
    throw new Error(`conch-mcp: a message of ${bytes} bytes is more than the ${limit} it sends`);
  }

  private write(line: string): Promise<void> {
    this.lastWrite = performance.now();
    return new Promise<void>((resolve, reject) => {
      try {
        this.stdout.write(line, (error) => {
          if (!error) return resolve();
          // The 'error' event ends the session; the sender learns it here.
          reject(error);
        });
      } catch (error) {
        this.end(`writing to stdout failed (${describe(error)})`);
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  }

  private readonly onData = (chunk: Buffer | string) => {
    if (this.closed) return;
    const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    let start = 0;
    while (start < data.length && !this.closed) {
      const newline = data.indexOf(0x0a, start);
      const end = newline === -1 ? data.length : newline;
      this.take(data.subarray(start, end));
      if (newline === -1) break;
      this.lineEnded();
      start = newline + 1;
    }
  };

  /** Part of the current line: kept while it fits, else only its two ends are kept. */
  private take(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.skipping) {
      this.skipping.bytes += piece.length;
      this.skipping.tail = lastBytes([this.skipping.tail, piece], EDGE_BYTES);
      return;
    }
    if (this.buffered + piece.length <= this.maxMessageBytes) {
      this.chunks.push(piece);
      this.buffered += piece.length;
      return;
    }
    const parts = [...this.chunks, piece];
    this.skipping = {
      bytes: this.buffered + piece.length,
      head: firstBytes(parts, EDGE_BYTES),
      tail: lastBytes(parts, EDGE_BYTES),
    };
    this.chunks = [];
    this.buffered = 0;
  }

  private lineEnded(): void {
    if (this.skipping) {
      const { bytes, head, tail } = this.skipping;
      this.skipping = undefined;
      const id = idOfOversized(head.toString('utf8'), tail.toString('utf8'));
      this.logger?.warn(
        { bytes, limit: this.maxMessageBytes, id: id === undefined ? undefined : shortId(id) },
        `conch-mcp: skipped a message of ${bytes} bytes, more than the ${this.maxMessageBytes} it reads; the server keeps serving`,
      );
      this.reply(
        id ?? null,
        -32600,
        `Invalid Request: the message is ${bytes} bytes, more than the ${this.maxMessageBytes} conch-mcp reads; it was skipped. Pass large data as a file.`,
      );
      return;
    }
    const line = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.buffered);
    this.chunks = [];
    this.buffered = 0;
    this.handleLine(line);
  }

  private handleLine(buffer: Buffer): void {
    let end = buffer.length;
    if (end > 0 && buffer[end - 1] === 0x0d) end -= 1;
    const text = buffer.toString('utf8', 0, end);
    if (text.trim() === '') return;
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      this.logger?.warn(
        { bytes: buffer.length },
        'conch-mcp: a line that is not JSON was answered with a parse error',
      );
      this.reply(null, -32700, `Parse error: the line (${buffer.length} bytes) is not JSON`);
      return;
    }
    const id = rawId(raw);
    if (typeof id === 'string' && id.length > MAX_ID_CHARS) {
      this.logger?.warn({ idChars: id.length }, 'conch-mcp: a message with an oversized id was refused');
      this.reply(
        null,
        -32600,
        `Invalid Request: the id is ${id.length} characters long; conch-mcp echoes ids of at most ${MAX_ID_CHARS}`,
      );
      return;
    }
    let parsed: ReturnType<typeof JSONRPCMessageSchema.safeParse> | undefined;
    try {
      parsed = JSONRPCMessageSchema.safeParse(raw);
    } catch {
      parsed = undefined;
    }
    if (!parsed?.success) {
      const usable = typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id));
      this.logger?.warn(
        { bytes: buffer.length },
        'conch-mcp: a message that is not JSON-RPC was answered with an error',
      );
      // A response of the client's that is not JSON-RPC is not answered (nothing waits for it).
      if (isObject(raw) && !('method' in raw) && ('result' in raw || 'error' in raw)) return;
      this.reply(
        usable ? id : null,
        -32600,
        'Invalid Request: not a JSON-RPC 2.0 request, notification or response',
      );
      return;
    }
    const message = parsed.data;
    // The client's answer to a liveness probe: nothing else waits for it.
    if (!('method' in message) && typeof message.id === 'string' && message.id.startsWith(PROBE_ID_PREFIX))
      return;
    if ('method' in message && 'id' in message) {
      this.unanswered.add(message.id);
      // The stdout watcher starts with the first tool call: before it, nothing runs that the
      // client's going away would have to stop.
      if (this.watchPending && message.method === 'tools/call') {
        this.watchPending = false;
        this.watchReader();
      }
    }
    if ('method' in message && message.method === 'notifications/cancelled') {
      // A cancelled request gets no answer: the probe stops waiting for it.
      const cancelled = (message.params as { requestId?: unknown } | undefined)?.requestId;
      if (typeof cancelled === 'string' || typeof cancelled === 'number') this.unanswered.delete(cancelled);
    }
    try {
      this.onmessage?.(message);
    } catch (error) {
      this.onerror?.(error instanceof Error ? error : new Error(String(error)));
    }
  }

  private reply(id: RequestId | null, code: number, message: string): void {
    if (this.closed) return;
    void this.write(`${JSON.stringify({ jsonrpc: '2.0', id, error: { code, message } })}\n`).catch(
      () => undefined,
    );
  }

  private readonly onStdinEnd = () => this.end('stdin closed (the client ended the session)');
  private readonly onStdinError = (error: unknown) => this.end(`stdin failed (${describe(error)})`);
  private readonly onStdoutError = (error: unknown) =>
    this.end(`stdout broken (${describe(error)}): the client no longer reads conch-mcp's answers`);
  private readonly onStdoutClose = () =>
    this.end("stdout closed: the client no longer reads conch-mcp's answers");

  /** Closes once: nothing more is read, the watcher and probe stop, onclose runs. */
  private end(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.closeReason = reason;
    this.stdin.off('data', this.onData);
    this.stdin.off('end', this.onStdinEnd);
    this.stdin.off('close', this.onStdinEnd);
    this.stdin.off('error', this.onStdinError);
    // Reading stops: no request that arrives now starts anything.
    if (this.stdin.listenerCount('data') === 0) this.stdin.pause();
    this.stdin.on('error', () => undefined);
    this.chunks = [];
    this.skipping = undefined;
    if (this.probe) clearInterval(this.probe);
    if (this.watcher) void this.watcher.terminate().catch(() => undefined);
    this.watcher = undefined;
    this.onclose?.();
  }

  /**
   * A worker thread (its own event loop: the main loop's stdout handle is left alone) reads the
   * socket fd 1 is; the client never writes there, so the read ends only when the client closes
   * its end, and says so at once, whatever the server is doing.
   */
  private watchReader(): void {
    let worker: Worker;
    try {
      worker = new Worker(READER_WATCH, { eval: true, stdout: true, stderr: true });
    } catch (error) {
      this.logger?.debug(
        { err: String(error) },
        'conch-mcp: cannot watch stdout; a failed write still ends the session',
      );
      return;
    }
    this.watcher = worker;
    worker.unref();
    worker.on('message', (what: unknown) => {
      if (typeof what === 'string')
        this.end(`stdout's reader went away (${what}): the client no longer reads conch-mcp's answers`);
    });
    worker.on('error', (error) =>
      this.logger?.debug(
        { err: String(error) },
        'conch-mcp: the stdout watcher failed; a failed write still ends the session',
      ),
    );
  }

  private probeReader(intervalMs: number): void {
    if (this.closed || this.unanswered.size === 0) return;
    if (performance.now() - this.lastWrite < intervalMs) return;
    this.probes += 1;
    void this.write(
      `${JSON.stringify({ jsonrpc: '2.0', id: `${PROBE_ID_PREFIX}${this.probes}`, method: 'ping' })}\n`,
    ).catch(() => undefined);
  }
}

/** The worker that reads fd 1 (a socket) until its peer closes. libuv never closes fds 0-2. */
const READER_WATCH = `
const net = require('node:net');
const { parentPort } = require('node:worker_threads');
let said = false;
const say = (what) => { if (!said) { said = true; parentPort.postMessage(what); } };
try {
  const socket = new net.Socket({ fd: 1, readable: true, writable: false });
  socket.on('data', () => {});
  socket.on('end', () => say('end of stream'));
  socket.on('error', (error) => say(error.code || 'error'));
} catch (error) {
  // Not readable here: the server relies on failed writes.
}
`;

function stdoutKind(): 'socket' | 'pipe' | 'other' {
  try {
    // BigInt stats: a numeric fstat of a socket leaves S_IFSOCK in node's shared stat array, which
    // fs.realpathSync reads for a cached path and then stops resolving early, so the next
    // `import()` of a pnpm-linked package loads it under its symlink path and its own imports fail
    // (ERR_MODULE_NOT_FOUND: execa's is-plain-obj, seen over an ssh executor).
    const stat = fstatSync(1, { bigint: true });
    if (stat.isSocket()) return 'socket';
    if (stat.isFIFO()) return 'pipe';
  } catch {
    // fd 1 closed: the first write fails and ends the session.
  }
  return 'other';
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function rawId(raw: unknown): unknown {
  return isObject(raw) ? raw.id : undefined;
}

function shortId(id: RequestId): string | number {
  return typeof id === 'string' && id.length > 100 ? `${id.slice(0, 100)}…` : id;
}

function describe(error: unknown): string {
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string') return code;
  return error instanceof Error ? error.message.slice(0, 200) : String(error).slice(0, 200);
}

function firstBytes(parts: readonly Buffer[], count: number): Buffer {
  const out: Buffer[] = [];
  let have = 0;
  for (const part of parts) {
    if (have >= count) break;
    const take = part.subarray(0, count - have);
    out.push(take);
    have += take.length;
  }
  return Buffer.concat(out);
}

function lastBytes(parts: readonly Buffer[], count: number): Buffer {
  const out: Buffer[] = [];
  let have = 0;
  for (let i = parts.length - 1; i >= 0 && have < count; i--) {
    const part = parts[i]!;
    const take = part.subarray(Math.max(0, part.length - (count - have)));
    out.unshift(take);
    have += take.length;
  }
  return Buffer.from(Buffer.concat(out));
}

const ID_VALUE = String.raw`("(?:[^"\\]|\\.){0,${MAX_ID_CHARS}}"|-?\d{1,16})`;
/** `{"jsonrpc":"2.0","id":…` at the start (Python and most clients write the id first). */
const ID_AT_START = new RegExp(
  String.raw`^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*${ID_VALUE}\s*,`,
);
/** `…,"id":…}` at the end: the last key of the outermost object (the MCP SDKs write it last). */
const ID_AT_END = new RegExp(String.raw`,\s*"id"\s*:\s*${ID_VALUE}\s*\}\s*$`);

/** The id of a request too long to parse, read from its two ends when it is plainly there. */
function idOfOversized(head: string, tail: string): RequestId | undefined {
  const match = ID_AT_START.exec(head) ?? ID_AT_END.exec(tail.replace(/\r$/, ''));
  if (!match) return undefined;
  try {
    const id = JSON.parse(match[1]!) as unknown;
    return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id)) ? id : undefined;
  } catch {
    return undefined;
  }
}
