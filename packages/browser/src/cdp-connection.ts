import { TextWebSocket } from './websocket-client.js';

/** An event from the browser: `sessionId` names the attached target it came from (none: the browser). */
export interface CdpEvent {
  method: string;
  params: Record<string, any>;
  sessionId?: string;
}

interface Pending {
  method: string;
  resolve(result: any): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout | undefined;
}

/**
 * A CDP client on a WebSocket of its own (flat sessions: one connection, every attached target
 * addressed by `sessionId`). The request guard needs one apart from Playwright's: Playwright's
 * `CDPSession` cannot address the targets an auto-attach of ours reports.
 */
export class CdpConnection {
  private nextId = 0;
  private readonly pending = new Map<number, Pending>();
  private readonly eventListeners = new Set<(event: CdpEvent) => void>();
  private readonly closeListeners = new Set<(reason: string) => void>();
  private closedReason: string | undefined;
  private ws!: TextWebSocket;

  private constructor() {}

  /** Connects to a browser-level endpoint (`ws://…/devtools/browser/<id>`). */
  static async open(wsUrl: string, options: { timeoutMs: number }): Promise<CdpConnection> {
    const connection = new CdpConnection();
    connection.ws = await TextWebSocket.open(
      wsUrl,
      {
        onMessage: (text) => connection.handleMessage(text),
        onClose: (reason) => connection.handleClose(reason),
      },
      options,
    );
    return connection;
  }

  get closed(): boolean {
    return this.closedReason !== undefined;
  }

  /**
   * Sends a command and resolves with its result; rejects with the browser's error, when the
   * connection closes first, or after `timeoutMs` when given.
   */
  send<T = any>(
    method: string,
    params: Record<string, unknown> = {},
    sessionId?: string,
    timeoutMs?: number,
  ): Promise<T> {
    if (this.closedReason !== undefined)
      return Promise.reject(new Error(`${method}: the CDP connection is closed (${this.closedReason})`));
    const id = ++this.nextId;
    return new Promise<T>((resolve, reject) => {
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              this.pending.delete(id);
              reject(new Error(`${method}: no answer within ${timeoutMs} ms`));
            }, timeoutMs);
      this.pending.set(id, { method, resolve, reject, timer });
      this.ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    });
  }

  /** Listens to every event; returns the function that stops listening. */
  onEvent(listener: (event: CdpEvent) => void): () => void {
    this.eventListeners.add(listener);
    return () => this.eventListeners.delete(listener);
  }

  /** Called once when the connection is gone (never after `close()` was called by us). */
  onClose(listener: (reason: string) => void): () => void {
    this.closeListeners.add(listener);
    return () => this.closeListeners.delete(listener);
  }

  /** Closes the connection; pending commands reject. Idempotent. */
  close(): void {
    this.closeListeners.clear();
    this.ws.close();
  }

  private handleMessage(text: string): void {
    let message: {
      id?: number;
      result?: unknown;
      error?: { message: string; data?: string };
      method?: string;
      params?: Record<string, any>;
      sessionId?: string;
    };
    try {
      message = JSON.parse(text) as typeof message;
    } catch {
      return;
    }
    if (message.id !== undefined) {
      const pending = this.pending.get(message.id);
      if (!pending) return;
      this.pending.delete(message.id);
      clearTimeout(pending.timer);
      if (message.error)
        pending.reject(
          new Error(
            `${pending.method}: ${message.error.message}${message.error.data ? ` (${message.error.data})` : ''}`,
          ),
        );
      else pending.resolve(message.result);
      return;
    }
    if (!message.method) return;
    const event: CdpEvent = {
      method: message.method,
      params: message.params ?? {},
      ...(message.sessionId ? { sessionId: message.sessionId } : {}),
    };
    for (const listener of this.eventListeners) listener(event);
  }

  private handleClose(reason: string): void {
    if (this.closedReason !== undefined) return;
    this.closedReason = reason;
    for (const [id, pending] of this.pending) {
      this.pending.delete(id);
      clearTimeout(pending.timer);
      pending.reject(new Error(`${pending.method}: the CDP connection closed (${reason})`));
    }
    for (const listener of this.closeListeners) listener(reason);
    this.closeListeners.clear();
    this.eventListeners.clear();
  }
}
