import WebSocket from 'ws';

export interface WebSocketHandlers {
  /** One whole text message. */
  onMessage(text: string): void;
  /** Once, when the connection is gone for whatever reason (close frame, socket error, `close()`). */
  onClose(reason: string): void;
}

/**
 * A text WebSocket (the `ws` library) with the two callbacks the request guard's CDP connection
 * needs: Node 20 has no WebSocket client without a flag, and playwright-core's is not public API.
 */
export class TextWebSocket {
  private closedReason: string | undefined;

  private constructor(
    private readonly socket: WebSocket,
    private readonly handlers: WebSocketHandlers,
  ) {
    socket.on('message', (data: WebSocket.RawData, isBinary: boolean) => {
      if (!isBinary) handlers.onMessage(rawText(data));
    });
    socket.on('error', (error) => this.finish(error.message));
    socket.on('close', () => this.finish('the connection closed'));
  }

  /** Opens `url` (ws: or wss:); rejects with what went wrong when the handshake fails or times out. */
  static open(
    url: string,
    handlers: WebSocketHandlers,
    options: { timeoutMs: number },
  ): Promise<TextWebSocket> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(url, { handshakeTimeout: options.timeoutMs, perMessageDeflate: false });
      const fail = (error: Error) => {
        socket.removeAllListeners();
        socket.on('error', () => {});
        socket.terminate();
        reject(new Error(error.message));
      };
      socket.once('error', fail);
      socket.once('unexpected-response', (_req, res) => {
        res.resume();
        fail(new Error(`it answered HTTP ${res.statusCode} instead of accepting a WebSocket`));
      });
      socket.once('open', () => {
        socket.off('error', fail);
        socket.removeAllListeners('unexpected-response');
        resolve(new TextWebSocket(socket, handlers));
      });
    });
  }

  get closed(): boolean {
    return this.closedReason !== undefined;
  }

  /** Sends one text message; ignored once closed (the close handler has been told). */
  send(text: string): void {
    if (this.closed) return;
    this.socket.send(text);
  }

  /** Sends a close frame and ends the connection; a server that never answers is cut off. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.socket.close(1000);
    const cutOff = setTimeout(() => this.socket.terminate(), 1000);
    cutOff.unref();
    this.finish('closed by conch');
  }

  private finish(reason: string): void {
    if (this.closedReason !== undefined) return;
    this.closedReason = reason;
    this.handlers.onClose(reason);
  }
}

function rawText(data: WebSocket.RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}
