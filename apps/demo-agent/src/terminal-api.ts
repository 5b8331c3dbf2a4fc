import type { PluginRegistry } from '@conch/core';
import { TERMINAL_SERVICE, type TerminalService } from '@conch/terminal';
import type { ProcessRow } from './processes.js';

/** A terminal session as the process panel shows it; ids are `t<session_id>`. */
export type TerminalSessionRow = Omit<ProcessRow, 'kind' | 'lastLine'> & { lastLine?: string };

export interface TerminalHostApi {
  list(): TerminalSessionRow[];
  kill(id: string): Promise<void>;
  killAll(): Promise<void>;
  logs(id: string): Promise<string>;
}

/** `t3` or `3` -> 3. */
function sessionNumber(id: string): number | undefined {
  const match = /^t?(\d+)$/.exec(id.trim());
  return match ? Number(match[1]) : undefined;
}

/**
 * The terminal plugin's host API (`TERMINAL_SERVICE`) in the panel's terms, or undefined when
 * the terminal plugin is not exposed.
 */
export function terminalService(registry: PluginRegistry): TerminalHostApi | undefined {
  if (registry.disposed) return undefined;
  const service = registry.resolveOptional<TerminalService>(TERMINAL_SERVICE);
  if (!service) return undefined;
  const find = (id: string) => {
    const n = sessionNumber(id);
    return n === undefined ? undefined : service.list().find((s) => s.id === n);
  };
  return {
    list: () =>
      service.list().map((s) => ({
        id: `t${s.id}`,
        command: s.command ?? '(shell)',
        pid: s.pid,
        startedAt: s.startedAt,
        endedAt: undefined,
        state: s.state === 'waiting' ? 'waiting for input' : s.state,
        running: s.state !== 'exited' && s.state !== 'idle',
        lastLine: s.lastLine,
      })),
    kill: async (id) => {
      const session = find(id);
      if (session) await service.kill(session.id);
    },
    killAll: async () => {
      await Promise.all(service.list().map((s) => service.kill(s.id)));
    },
    logs: async (id) => {
      const session = find(id);
      if (!session) throw new Error(`no terminal session '${id}'`);
      return service.readLog(session.id, { clean: true });
    },
  };
}

/** Whether `id` names a live terminal session (`t3` or `3`). */
export function isTerminalId(api: TerminalHostApi, id: string): boolean {
  const n = sessionNumber(id);
  return n !== undefined && api.list().some((s) => s.id === `t${n}`);
}
