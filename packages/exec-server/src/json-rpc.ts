import type { Readable, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { ConchError } from '@conch/core';

/** An error a peer answered a request with (JSON-RPC `error`), carrying the stable `data.code`. */
export class RpcError extends Error {
  readonly rpcCode: number;
  readonly data: { code: string; [key: string]: unknown };

  constructor(rpcCode: number, message: string, data: { code: string; [key: string]: unknown }) {
    super(message);
    this.name = 'RpcError';
    this.rpcCode = rpcCode;
    this.data = data;
  }
}

/** JSON-RPC error codes. */
export const RPC_METHOD_NOT_FOUND = -32601;
export const RPC_INVALID_PARAMS = -32602;
export const RPC_APPLICATION_ERROR = -32000;

interface Pending {
  method: string;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

type RequestHandler = (params: any) => unknown;
type NotificationHandler = (params: any) => void;

export interface RpcPeerOptions {
  input: Readable;
  output: Writable;
  /** A line that is not JSON-RPC (e.g. rc-file noise on a login shell's stdout). */
  onNoise?: (line: string) => void;
  /** The stream ended or failed: every pending request was rejected with `error`. Called once. */
  onClose?: (error: Error) => void;
  /** Makes the error pending requests are rejected with when the stream closes. */
  closeError?: (reason: string) => Error;
}

/** A ConchError (or any error) as a JSON-RPC error object. */
export function toRpcError(error: unknown): { code: number; message: string; data: Record<string, unknown> } {
  if (error instanceof RpcError) return { code: error.rpcCode, message: error.message, data: error.data };
  if (ConchError.isInstance(error)) {
    const extra: Record<string, unknown> = {};
    for (const key of ['operation', 'path', 'display', 'field'] as const) {
      const value = (error as unknown as Record<string, unknown>)[key];
      if (typeof value === 'string') extra[key] = value;
    }
    return { code: RPC_APPLICATION_ERROR, message: error.message, data: { code: error.code, ...extra } };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { code: RPC_APPLICATION_ERROR, message, data: { code: 'INTERNAL' } };
}

/**
 * One end of a JSON-RPC 2.0 connection over a byte stream, one message per line. Both ends can
 * send requests and notifications. Lines that are not JSON are handed to `onNoise`, never fatal:
 * a login shell may print before the server starts. Writes go through the stream's own buffer
 * (callers that stream bulk data keep their own window: see the server's output flow control).
 */
export class RpcPeer {
  private readonly options: RpcPeerOptions;
  private readonly decoder = new StringDecoder('utf8');
  private buffered = '';
  private readonly pending = new Map<number, Pending>();
  private readonly requestHandlers = new Map<string, RequestHandler>();
  private readonly notificationHandlers = new Map<string, NotificationHandler>();
  private nextId = 1;
  private closedWith: Error | undefined;
  private readonly onData = (chunk: Buffer | string) => this.push(chunk);
  private readonly onEnd = () => this.close('the stream ended');
  private readonly onError = (error: Error) => this.close(`the stream failed: ${error.message}`);

  constructor(options: RpcPeerOptions) {
    this.options = options;
    options.input.on('data', this.onData);
    options.input.once('end', this.onEnd);
    options.input.once('close', this.onEnd);
    options.input.on('error', this.onError);
    options.output.on('error', this.onError);
    // A stream paused by whoever read it before (the boot script, the client's handshake) flows again.
    options.input.resume();
  }

  get closed(): boolean {
    return this.closedWith !== undefined;
  }

  /** Requests sent and not answered yet. */
  get pendingCount(): number {
    return this.pending.size;
  }

  /** Bytes written and not yet taken by the stream (for callers that pace bulk sends). */
  get writableLength(): number {
    return this.options.output.writableLength;
  }

  /** Feeds text read before this peer took the stream over (the rest of a handshake buffer). */
  feed(text: string): void {
    this.buffered += text;
    this.drainLines();
  }

  handle(method: string, handler: RequestHandler): void {
    this.requestHandlers.set(method, handler);
  }

  onNotification(method: string, handler: NotificationHandler): void {
    this.notificationHandlers.set(method, handler);
  }

  request<T = unknown>(method: string, params: unknown): Promise<T> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { method, resolve: resolve as (v: unknown) => void, reject });
      this.send({ jsonrpc: '2.0', id, method, params });
    });
  }

  notify(method: string, params: unknown): void {
    if (this.closedWith) return;
    this.send({ jsonrpc: '2.0', method, params });
  }

  /** Closes the connection: pending requests are rejected; the output stream is ended. */
  close(reason: string): void {
    if (this.closedWith) return;
    const error = this.options.closeError?.(reason) ?? new Error(`connection closed: ${reason}`);
    this.closedWith = error;
    const { input, output } = this.options;
    input.off('data', this.onData);
    input.off('end', this.onEnd);
    input.off('close', this.onEnd);
    // Errors after the close (EPIPE on a dead transport) are expected: keep them handled.
    input.on('error', () => {});
    output.on('error', () => {});
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const p of pending) p.reject(error);
    try {
      output.end();
    } catch {
      // already destroyed
    }
    this.options.onClose?.(error);
  }

  private send(message: unknown): void {
    try {
      this.options.output.write(`${JSON.stringify(message)}\n`);
    } catch (error) {
      this.close(`write failed: ${(error as Error).message}`);
    }
  }

  private push(chunk: Buffer | string): void {
    this.buffered += typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    this.drainLines();
  }

  private drainLines(): void {
    let nl = this.buffered.indexOf('\n');
    while (nl !== -1 && !this.closedWith) {
      const line = this.buffered.slice(0, nl);
      this.buffered = this.buffered.slice(nl + 1);
      this.onLine(line);
      nl = this.buffered.indexOf('\n');
    }
  }

  private onLine(raw: string): void {
    const line = raw.trim();
    if (line.length === 0) return;
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(line) as Record<string, unknown>;
    } catch {
      this.options.onNoise?.(raw);
      return;
    }
    if (typeof message !== 'object' || message === null || message.jsonrpc !== '2.0') {
      this.options.onNoise?.(raw);
      return;
    }
    const { id, method } = message;
    if (typeof method === 'string') {
      if (id === undefined) this.onNotificationMessage(method, message.params);
      else this.onRequest(id as number | string, method, message.params);
      return;
    }
    if (typeof id === 'number') this.onResponse(id, message);
  }

  private onNotificationMessage(method: string, params: unknown): void {
    const handler = this.notificationHandlers.get(method);
    if (!handler) return; // unknown notifications are ignored (a newer peer may send more)
    try {
      handler(params);
    } catch (error) {
      this.options.onNoise?.(`notification ${method} handler failed: ${(error as Error).message}`);
    }
  }

  private onRequest(id: number | string, method: string, params: unknown): void {
    const handler = this.requestHandlers.get(method);
    if (!handler) {
      this.send({
        jsonrpc: '2.0',
        id,
        error: {
          code: RPC_METHOD_NOT_FOUND,
          message: `unknown method '${method}'`,
          data: { code: 'UNKNOWN_METHOD', method },
        },
      });
      return;
    }
    let result: unknown;
    try {
      result = handler(params);
    } catch (error) {
      this.send({ jsonrpc: '2.0', id, error: toRpcError(error) });
      return;
    }
    Promise.resolve(result).then(
      (value) => {
        if (!this.closedWith) this.send({ jsonrpc: '2.0', id, result: value ?? {} });
      },
      (error: unknown) => {
        if (!this.closedWith) this.send({ jsonrpc: '2.0', id, error: toRpcError(error) });
      },
    );
  }

  private onResponse(id: number, message: Record<string, unknown>): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    this.pending.delete(id);
    const error = message.error as
      { code?: number; message?: string; data?: Record<string, unknown> } | undefined;
    if (error) {
      const data = { code: 'INTERNAL', ...(error.data ?? {}) } as { code: string; [key: string]: unknown };
      pending.reject(
        new RpcError(error.code ?? RPC_APPLICATION_ERROR, error.message ?? 'remote error', data),
      );
    } else {
      pending.resolve(message.result);
    }
  }
}
