import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { AbortedError } from '@conch/core';
import { CdpUnreachableError } from './errors/cdp-unreachable-error.js';
import { InvalidBrowserOptionError } from './errors/invalid-browser-option-error.js';

/** A browser's DevTools endpoint, as found by probing it. */
export interface CdpEndpoint {
  /** The browser-level WebSocket URL (what Playwright's connectOverCDP, Puppeteer or browser-use take). */
  wsUrl: string;
  /** The HTTP side (`/json/version`, `/json/list`), when the endpoint has one. */
  httpUrl: string | undefined;
  /** e.g. `Chrome/156.0.8078.79`, when `/json/version` answered. */
  browser: string | undefined;
  protocolVersion: string | undefined;
}

interface JsonVersion {
  Browser?: string;
  'Protocol-Version'?: string;
  webSocketDebuggerUrl?: string;
}

const CDP_URL_EXPECTED = "a ws://, wss://, http:// or https:// URL of a browser's DevTools endpoint";

/** Parses a cdpUrl (ws/wss/http/https); throws InvalidBrowserOptionError naming the field. */
export function parseCdpUrl(url: string, field = 'cdpUrl'): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new InvalidBrowserOptionError(field, CDP_URL_EXPECTED, url);
  }
  if (!['ws:', 'wss:', 'http:', 'https:'].includes(parsed.protocol) || !parsed.hostname) {
    throw new InvalidBrowserOptionError(field, CDP_URL_EXPECTED, url);
  }
  return parsed;
}

/** Whether a string is a cdpUrl `parseCdpUrl` accepts (for config schemas). */
export function isCdpUrl(url: string): boolean {
  try {
    parseCdpUrl(url);
    return true;
  } catch {
    return false;
  }
}

/** `http(s)://host:port` of a ws/http URL. */
function httpBase(url: URL): string {
  const scheme = url.protocol === 'wss:' || url.protocol === 'https:' ? 'https:' : 'http:';
  return `${scheme}//${url.host}`;
}

/** GET `<base>/json/version` with a deadline; resolves with the parsed JSON or rejects with why not. */
export async function fetchJsonVersion(
  base: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<JsonVersion> {
  const signals = [AbortSignal.timeout(timeoutMs), ...(signal ? [signal] : [])];
  const response = await fetch(`${base}/json/version`, { signal: AbortSignal.any(signals) });
  if (!response.ok) throw new Error(`it answered HTTP ${response.status} ${response.statusText}`.trim());
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`it answered something that is not JSON (${JSON.stringify(text.slice(0, 60))})`);
  }
  if (
    typeof json !== 'object' ||
    json === null ||
    typeof (json as JsonVersion).webSocketDebuggerUrl !== 'string'
  )
    throw new Error('it answered JSON without a webSocketDebuggerUrl, so it is not a DevTools endpoint');
  return json as JsonVersion;
}

/**
 * A WebSocket opening handshake on `url` (HTTP Upgrade, expecting 101), then the socket is
 * closed: for endpoints that serve CDP only over a WebSocket with a path (no `/json/version`),
 * e.g. hosted browsers. Node 20 has no WebSocket client without a flag, and one handshake is
 * all a probe needs.
 */
function websocketHandshake(url: URL, timeoutMs: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const secure = url.protocol === 'wss:';
    const req = (secure ? httpsRequest : httpRequest)({
      protocol: secure ? 'https:' : 'http:',
      hostname: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port || (secure ? 443 : 80),
      path: `${url.pathname}${url.search}`,
      headers: {
        Connection: 'Upgrade',
        Upgrade: 'websocket',
        'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Key': randomBytes(16).toString('base64'),
      },
      timeout: timeoutMs,
      ...(signal ? { signal } : {}),
    });
    req.once('upgrade', (_res, socket) => {
      socket.destroy();
      resolve();
    });
    req.once('response', (res) => {
      res.resume();
      reject(new Error(`it answered HTTP ${res.statusCode} instead of accepting a WebSocket`));
    });
    req.once('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.once('error', reject);
    req.end();
  });
}

function reasonOf(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as Error & { cause?: unknown }).cause;
    if (error.name === 'TimeoutError') return 'no answer in time';
    if (cause instanceof Error && error.message === 'fetch failed') return cause.message;
    return error.message;
  }
  return String(error);
}

/**
 * Checks that `url` answers the Chrome DevTools Protocol and returns its browser WebSocket URL.
 *
 * - `http(s)://host:port`: `GET /json/version` must answer with a `webSocketDebuggerUrl`.
 * - `ws(s)://host:port/devtools/browser/<id>`: the same `/json/version` on that host:port confirms
 *   it; where there is none, a WebSocket handshake on the URL itself must succeed.
 * - `ws(s)://host:port` (no path): resolved through `/json/version`.
 *
 * The WebSocket URL Chrome reports names the host it bound (`127.0.0.1`); it is rewritten to the
 * host:port the caller used, so forwarded ports and container hostnames keep working.
 * Throws CdpUnreachableError (what was tried and why it failed) or InvalidBrowserOptionError.
 */
export async function probeCdp(
  url: string,
  options: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<CdpEndpoint> {
  const parsed = parseCdpUrl(url);
  const timeoutMs = options.timeoutMs ?? 5000;
  const base = httpBase(parsed);
  const probed = [`GET ${base}/json/version`];
  const isWs = parsed.protocol === 'ws:' || parsed.protocol === 'wss:';
  const hasPath = parsed.pathname !== '/' && parsed.pathname !== '';
  try {
    const version = await fetchJsonVersion(base, timeoutMs, options.signal);
    const reported = new URL(version.webSocketDebuggerUrl!);
    const wsScheme = parsed.protocol === 'https:' || parsed.protocol === 'wss:' ? 'wss:' : 'ws:';
    const wsUrl = isWs && hasPath ? parsed.href : `${wsScheme}//${parsed.host}${reported.pathname}`;
    return {
      wsUrl,
      httpUrl: base,
      browser: version.Browser,
      protocolVersion: version['Protocol-Version'],
    };
  } catch (error) {
    if (options.signal?.aborted) throw new AbortedError('Probing the browser', options.signal.reason);
    if (!(isWs && hasPath))
      throw new CdpUnreachableError(url, probed, `it did not answer: ${reasonOf(error)}`, error);
    probed.push(`a WebSocket handshake on ${parsed.href}`);
    try {
      await websocketHandshake(parsed, timeoutMs, options.signal);
      return { wsUrl: parsed.href, httpUrl: undefined, browser: undefined, protocolVersion: undefined };
    } catch (wsError) {
      if (options.signal?.aborted) throw new AbortedError('Probing the browser', options.signal.reason);
      throw new CdpUnreachableError(
        url,
        probed,
        `it did not answer: ${reasonOf(error)}; ${reasonOf(wsError)}`,
        wsError,
      );
    }
  }
}
