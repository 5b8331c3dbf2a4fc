import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { PermissionDecision, PermissionRequest } from './permission.js';
import type { UntrustedItem } from './trust-store.js';

/**
 * The events of core itself (plugins, tool calls, the registry). Each package declares its own with
 * declaration merging — `declare module '@conch/core' { interface ConchEvents { 'my.event': {...} } }`
 * — in a module its index imports: `process.*` in @conch/process, `permission.decision` in
 * @conch/permission, `background.task.*` in @conch/background, `terminal.*` in @conch/terminal.
 */
export interface ConchEvents {
  'plugin.exposed': { plugin: string; tools: string[] };
  'plugin.load-error': { source: string; code: string; message: string };
  /** A plugin package discovery did not load: new or changed since conch last ran in the workspace. */
  'plugin.untrusted': UntrustedItem & { workspace: string };
  'tool.call': { callId: string; tool: string; plugin: string; args: unknown };
  'tool.validated': { callId: string; tool: string; args: unknown };
  'tool.permission': {
    callId: string;
    tool: string;
    request: PermissionRequest;
    decision: PermissionDecision;
  };
  'tool.start': { callId: string; tool: string };
  'tool.result': { callId: string; tool: string; result: unknown; durationMs: number };
  'tool.error': {
    callId: string;
    tool: string;
    error: { code: string; message: string };
    durationMs: number;
  };
  'registry.disposed': Record<string, never>;
}

export type ConchEventName = keyof ConchEvents;
export type ConchListener<K extends ConchEventName> = (payload: ConchEvents[K]) => void;

interface SharedBus {
  emitter: EventEmitter;
  /** Which plugin registered a listener (through its `ctx.events`), for the log of a listener that throws. */
  owners: WeakMap<object, string>;
  logger: Logger | undefined;
}

/**
 * A typed event bus, one per registry. A throwing listener (or one whose promise rejects) is logged
 * — with the plugin's name when a plugin registered it through `ctx.events` — and never breaks the
 * emitter, the other listeners or the host.
 */
export class EventBus {
  private readonly shared: SharedBus;
  private readonly owner: string | undefined;

  constructor(logger?: Logger, view?: { shared: SharedBus; owner: string }) {
    if (view) {
      this.shared = view.shared;
      this.owner = view.owner;
      return;
    }
    const emitter = new EventEmitter();
    emitter.setMaxListeners(0);
    this.shared = { emitter, owners: new WeakMap(), logger };
    this.owner = undefined;
  }

  /** The same bus, with the listeners registered through it attributed to `plugin` in logs. */
  forPlugin(plugin: string): EventBus {
    return new EventBus(undefined, { shared: this.shared, owner: plugin });
  }

  on<K extends ConchEventName>(event: K, listener: ConchListener<K>): () => void {
    this.own(listener);
    this.shared.emitter.on(event, listener as (payload: unknown) => void);
    return () => this.off(event, listener);
  }

  once<K extends ConchEventName>(event: K, listener: ConchListener<K>): () => void {
    this.own(listener);
    this.shared.emitter.once(event, listener as (payload: unknown) => void);
    return () => this.off(event, listener);
  }

  off<K extends ConchEventName>(event: K, listener: ConchListener<K>): void {
    this.shared.emitter.off(event, listener as (payload: unknown) => void);
  }

  emit<K extends ConchEventName>(event: K, payload: ConchEvents[K]): void {
    const { emitter } = this.shared;
    for (const listener of emitter.rawListeners(event)) {
      // rawListeners keeps once-wrappers; calling one removes it, as emit() would.
      const fn = listener as ((payload: unknown) => unknown) & { listener?: object };
      try {
        const returned = fn(payload);
        if (isPromiseLike(returned)) {
          returned.then(undefined, (error: unknown) => this.listenerFailed(event, fn, error));
        }
      } catch (error) {
        this.listenerFailed(event, fn, error);
      }
    }
  }

  listenerCount(event: ConchEventName): number {
    return this.shared.emitter.listenerCount(event);
  }

  removeAllListeners(): void {
    this.shared.emitter.removeAllListeners();
  }

  private own(listener: object): void {
    if (this.owner !== undefined) this.shared.owners.set(listener, this.owner);
  }

  private listenerFailed(event: string, fn: { listener?: object }, error: unknown): void {
    const plugin = this.shared.owners.get(fn.listener ?? fn);
    this.shared.logger?.error(
      { err: error, event, ...(plugin === undefined ? {} : { plugin }) },
      plugin === undefined
        ? `a listener of '${event}' threw; continuing`
        : `a listener of '${event}' registered by plugin '${plugin}' threw; continuing`,
    );
  }
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return (
    typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function'
  );
}
