import { ConchError, type Logger } from '@conch/core';
import { CdpConnection, type CdpEvent } from './cdp-connection.js';
import type { RequestPolicy } from './request-policy.js';

/** A request (or connection) the guard refused. */
export interface BlockedRequest {
  /** The URL as the browser asked for it; `host:port` for a connection the proxy refused. */
  url: string;
  /** CDP's resource type (Document, Script, Image, Stylesheet, XHR, Fetch, Other …) or 'Connection'. */
  resourceType: string;
  /** A navigation of a tab's main frame: the tab shows Chrome's error page instead. */
  mainFrame: boolean;
  /** The request was a redirect hop (HTTP 3xx) of one that was allowed. */
  redirect: boolean;
  reason: string;
  /** The CDP target (tab, frame, worker) that made it. */
  targetId?: string;
  /** Date.now() when it was refused. */
  at: number;
}

export interface RequestGuardOptions {
  policy: RequestPolicy;
  logger: Logger;
  /** How long one setup command may take (attaching, enabling interception). */
  timeoutMs: number;
  onBlocked?: (blocked: BlockedRequest) => void;
}

interface GuardedTarget {
  sessionId: string;
  targetId: string;
  type: string;
}

/** Targets whose own requests only the target itself can intercept: one that cannot is never resumed. */
const MUST_INTERCEPT = new Set(['page', 'iframe', 'service_worker', 'shared_worker']);
/** Dedicated workers have no Fetch domain: their requests pause in the frame that started them. */
const NO_FETCH = new Set(['worker']);
/** Targets that can start frames or workers of their own. */
const CAN_NEST = new Set(['page', 'iframe', 'worker', 'shared_worker']);

const INTERCEPT_ALL = { patterns: [{ urlPattern: '*', requestStage: 'Request' }] };
const AUTO_ATTACH = { autoAttach: true, waitForDebuggerOnStart: true, flatten: true };
const LOG_LIMIT = 200;

function originOf(url: string): string {
  try {
    const parsed = new URL(url);
    return parsed.origin === 'null' ? parsed.protocol : parsed.origin;
  } catch {
    return '(not a URL)';
  }
}

/**
 * Judges every request the browser tools' pages make, through CDP request interception on a
 * connection of its own:
 *
 * - the browser-level auto-attach (`Target.setAutoAttach` with `waitForDebuggerOnStart`) pauses
 *   every new target — tabs, popups, service and shared workers — until it is looked at; a target
 *   of a guarded browser context gets `Fetch.enable` for every request, and an auto-attach of its
 *   own for its out-of-process frames and workers, before it is resumed. Targets of other contexts
 *   (an external browser's own tabs, other CDP clients) are resumed and left at once;
 * - each paused request — the main frame's navigation, every redirect hop, frames, scripts,
 *   styles and their imports, images, fetch/XHR, workers' and service workers' requests — is
 *   judged by the policy: `Fetch.continueRequest`, or `Fetch.failRequest` with `BlockedByClient`,
 *   so a refused request never leaves the browser. A refused main-frame navigation leaves the tab
 *   on Chrome's error page and is remembered for it (`blockedNavigation`).
 *
 * A target the guard could not set up is never resumed (a tab is closed). When the guard's
 * connection is lost, `onLost` listeners hear it: the owner must stop using the pages.
 */
export class RequestGuard {
  private readonly contexts = new Set<string>();
  private readonly sessions = new Map<string, GuardedTarget>();
  /** Per target: its guarding (done or under way); one session per target intercepts. */
  private readonly targets = new Map<string, Promise<void>>();
  private readonly mainBlocked = new Map<string, BlockedRequest>();
  /** Targets we are attaching to ourselves: their `attachedToTarget` echo is that session. */
  private readonly attaching = new Set<string>();
  private readonly log: (BlockedRequest & { seq: number })[] = [];
  private seq = 0;
  private taken = 0;
  private readonly tasks = new Set<Promise<unknown>>();
  private readonly lostListeners = new Set<(reason: string) => void>();
  private lostReason: string | undefined;

  private constructor(
    private readonly connection: CdpConnection,
    private readonly options: RequestGuardOptions,
  ) {
    connection.onEvent((event) => this.onEvent(event));
    connection.onClose((reason) => {
      this.lostReason = reason;
      this.options.logger.warn({ reason }, 'browser: the request guard lost its CDP connection');
      for (const listener of this.lostListeners) listener(reason);
    });
  }

  /**
   * Connects to the browser's endpoint and starts pausing new targets. Throws a ConchError
   * `REQUEST_GUARD_FAILED` saying why when it cannot.
   */
  static async start(wsUrl: string, options: RequestGuardOptions): Promise<RequestGuard> {
    let connection: CdpConnection;
    try {
      connection = await CdpConnection.open(wsUrl, { timeoutMs: options.timeoutMs });
    } catch (error) {
      throw RequestGuard.failed(`connecting to ${wsUrl}`, error);
    }
    const guard = new RequestGuard(connection, options);
    try {
      await connection.send('Target.setAutoAttach', AUTO_ATTACH, undefined, options.timeoutMs);
    } catch (error) {
      await guard.close();
      throw RequestGuard.failed('attaching to new targets', error);
    }
    return guard;
  }

  private static failed(what: string, error: unknown): ConchError {
    const message = error instanceof Error ? error.message : String(error);
    return new ConchError({
      code: 'REQUEST_GUARD_FAILED',
      message: `the browser tools check every request their pages make, and ${what} for that failed: ${message}. They do not run unchecked.`,
      cause: error,
    });
  }

  /** Why the connection was lost, or undefined while it is up. */
  get lost(): string | undefined {
    return this.lostReason;
  }

  onLost(listener: (reason: string) => void): () => void {
    this.lostListeners.add(listener);
    return () => this.lostListeners.delete(listener);
  }

  /**
   * Guards the browser context `browserContextId` from now on (every target created in it), and
   * its existing tab `targetId` before this resolves.
   */
  async protect(targetId: string, browserContextId: string): Promise<void> {
    if (this.lostReason !== undefined)
      throw RequestGuard.failed('the connection', new Error(this.lostReason));
    this.contexts.add(browserContextId);
    let ready = this.targets.get(targetId);
    if (!ready) {
      ready = (async () => {
        this.attaching.add(targetId);
        let sessionId: string;
        try {
          ({ sessionId } = await this.connection.send<{ sessionId: string }>(
            'Target.attachToTarget',
            { targetId, flatten: true },
            undefined,
            this.options.timeoutMs,
          ));
        } finally {
          this.attaching.delete(targetId);
        }
        await this.guardSession({ sessionId, targetId, type: 'page' }, false);
      })();
      this.remember(targetId, ready);
    }
    try {
      await ready;
    } catch (error) {
      throw ConchError.isInstance(error) ? error : RequestGuard.failed('guarding the tab', error);
    }
  }

  /** The refused main-frame navigation tab `targetId` shows the error page of: its last main-frame request was refused. */
  blockedNavigation(targetId: string): BlockedRequest | undefined {
    return this.mainBlocked.get(targetId);
  }

  clearBlockedNavigation(targetId: string): void {
    this.mainBlocked.delete(targetId);
  }

  /** The requests refused since the last call (at most the last 200). */
  takeBlocked(): BlockedRequest[] {
    const out = this.log.filter((entry) => entry.seq > this.taken).map(({ seq: _seq, ...rest }) => rest);
    this.taken = this.seq;
    return out;
  }

  /** Records a refusal made elsewhere (the context's proxy), so the tools report it with the rest. */
  record(blocked: BlockedRequest): void {
    this.log.push({ ...blocked, seq: ++this.seq });
    if (this.log.length > LOG_LIMIT) this.log.splice(0, this.log.length - LOG_LIMIT);
    try {
      this.options.onBlocked?.(blocked);
    } catch (error) {
      this.options.logger.warn({ err: error }, 'browser: a blocked-request listener threw');
    }
  }

  /** Closes the guard's connection (the targets it guarded lose their interception). */
  async close(): Promise<void> {
    this.lostListeners.clear();
    this.connection.close();
    await Promise.allSettled([...this.tasks]);
  }

  private track(task: Promise<unknown>): void {
    const owned = task.catch((error: unknown) =>
      this.options.logger.debug({ err: error }, 'browser: a request guard command failed'),
    );
    this.tasks.add(owned);
    void owned.finally(() => this.tasks.delete(owned));
  }

  private remember(targetId: string, ready: Promise<void>): void {
    this.targets.set(targetId, ready);
    // A failed guarding is reported to whoever waits on it; the entry goes so a later attach retries.
    this.track(
      ready.catch(() => {
        if (this.targets.get(targetId) === ready) this.targets.delete(targetId);
      }),
    );
  }

  private onEvent(event: CdpEvent): void {
    switch (event.method) {
      case 'Fetch.requestPaused':
        this.onRequestPaused(event);
        return;
      case 'Target.attachedToTarget':
        this.onAttached(event);
        return;
      case 'Target.detachedFromTarget': {
        const guarded = this.sessions.get(String(event.params.sessionId));
        if (!guarded) return;
        this.sessions.delete(guarded.sessionId);
        this.targets.delete(guarded.targetId);
        this.mainBlocked.delete(guarded.targetId);
        return;
      }
    }
  }

  private onAttached(event: CdpEvent): void {
    const sessionId = String(event.params.sessionId);
    const info = event.params.targetInfo as { targetId: string; type: string; browserContextId?: string };
    const waiting = event.params.waitingForDebugger === true;
    if (this.attaching.has(info.targetId) && !waiting && event.sessionId === undefined) return; // our own attach
    const fromGuarded = event.sessionId !== undefined && this.sessions.has(event.sessionId);
    const ours =
      fromGuarded || (info.browserContextId !== undefined && this.contexts.has(info.browserContextId));
    if (!ours || this.targets.has(info.targetId)) {
      // Someone else's target, or one already guarded through another session: let it run, leave it.
      this.track(
        (async () => {
          if (waiting) await this.connection.send('Runtime.runIfWaitingForDebugger', {}, sessionId);
          await this.connection.send('Target.detachFromTarget', { sessionId });
        })(),
      );
      return;
    }
    this.remember(
      info.targetId,
      this.guardSession({ sessionId, targetId: info.targetId, type: info.type }, waiting),
    );
  }

  /** Interception on, nested targets paused too, then (and only then) the target may run. */
  private async guardSession(target: GuardedTarget, waiting: boolean): Promise<void> {
    const { sessionId, type } = target;
    this.sessions.set(sessionId, target);
    const timeout = this.options.timeoutMs;
    try {
      if (!NO_FETCH.has(type)) await this.connection.send('Fetch.enable', INTERCEPT_ALL, sessionId, timeout);
    } catch (error) {
      if (MUST_INTERCEPT.has(type)) {
        this.options.logger.error(
          { err: error, type },
          'browser: could not intercept the requests of a target; it is not resumed',
        );
        if (type === 'page')
          this.track(this.connection.send('Target.closeTarget', { targetId: target.targetId }));
        throw RequestGuard.failed(`intercepting the requests of a ${type}`, error);
      }
      this.options.logger.debug({ err: error, type }, 'browser: no Fetch domain on this target');
    }
    if (CAN_NEST.has(type)) {
      try {
        await this.connection.send('Target.setAutoAttach', AUTO_ATTACH, sessionId, timeout);
      } catch (error) {
        if (type === 'page' || type === 'iframe') {
          this.options.logger.error({ err: error, type }, 'browser: could not watch the frames of a target');
          if (type === 'page')
            this.track(this.connection.send('Target.closeTarget', { targetId: target.targetId }));
          throw RequestGuard.failed(`watching the frames and workers of a ${type}`, error);
        }
        this.options.logger.debug({ err: error, type }, 'browser: no auto-attach on this target');
      }
    }
    // The answer can wait until the target has started (a service worker's script): not awaited here.
    if (waiting) this.track(this.connection.send('Runtime.runIfWaitingForDebugger', {}, sessionId));
  }

  private onRequestPaused(event: CdpEvent): void {
    const sessionId = event.sessionId;
    const guarded = sessionId === undefined ? undefined : this.sessions.get(sessionId);
    const params = event.params as {
      requestId: string;
      request: { url: string };
      resourceType: string;
      frameId?: string;
      redirectedRequestId?: string;
    };
    if (!guarded || !sessionId) return;
    const verdict = this.options.policy.judge(params.request.url);
    const mainFrame =
      params.resourceType === 'Document' && guarded.type === 'page' && params.frameId === guarded.targetId;
    if (verdict.allowed) {
      if (mainFrame) this.mainBlocked.delete(guarded.targetId);
      this.track(this.connection.send('Fetch.continueRequest', { requestId: params.requestId }, sessionId));
      return;
    }
    this.track(
      this.connection.send(
        'Fetch.failRequest',
        { requestId: params.requestId, errorReason: 'BlockedByClient' },
        sessionId,
      ),
    );
    const blocked: BlockedRequest = {
      url: params.request.url,
      resourceType: params.resourceType,
      mainFrame,
      redirect: params.redirectedRequestId !== undefined,
      reason: verdict.reason,
      targetId: guarded.targetId,
      at: Date.now(),
    };
    if (mainFrame) this.mainBlocked.set(guarded.targetId, blocked);
    this.options.logger.debug(
      { origin: originOf(blocked.url), resourceType: blocked.resourceType, mainFrame },
      'browser: request blocked',
    );
    this.record(blocked);
  }
}
