import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { PermissionDecision, PermissionRequest } from './permission.js';

/**
 * The events of core itself (plugins, tool calls, the registry). Each package declares its own with
 * declaration merging — `declare module '@conch/core' { interface ConchEvents { 'my.event': {...} } }`
 * — in a module its index imports: `process.*` in @conch/process, `permission.decision` in
 * @conch/permission, `background.task.*` in @conch/background, `terminal.*` in @conch/terminal.
 */
export interface ConchEvents {
  'plugin.exposed': { plugin: string; tools: string[] };
  'plugin.load-error': { source: string; code: string; message: string };
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

/**
 * A typed event bus, one per registry. A throwing listener is logged and never breaks the
 * emitter or the other listeners.
 */
export class EventBus {
  private readonly emitter = new EventEmitter();

  constructor(private readonly logger?: Logger) {
    this.emitter.setMaxListeners(0);
  }

  on<K extends ConchEventName>(event: K, listener: ConchListener<K>): () => void {
    this.emitter.on(event, listener as (payload: unknown) => void);
    return () => this.off(event, listener);
  }

  once<K extends ConchEventName>(event: K, listener: ConchListener<K>): () => void {
    this.emitter.once(event, listener as (payload: unknown) => void);
    return () => this.off(event, listener);
  }

  off<K extends ConchEventName>(event: K, listener: ConchListener<K>): void {
    this.emitter.off(event, listener as (payload: unknown) => void);
  }

  emit<K extends ConchEventName>(event: K, payload: ConchEvents[K]): void {
    for (const listener of this.emitter.listeners(event)) {
      try {
        (listener as (payload: unknown) => void)(payload);
      } catch (error) {
        this.logger?.error({ err: error, event }, 'event listener threw; continuing');
      }
    }
  }

  listenerCount(event: ConchEventName): number {
    return this.emitter.listenerCount(event);
  }

  removeAllListeners(): void {
    this.emitter.removeAllListeners();
  }
}
