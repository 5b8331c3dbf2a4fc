import type { PluginRegistry } from '@conch/core';

/** A terminal session as the process panel shows it. */
export interface TerminalSessionRow {
  id: string;
  command: string;
  pid: number | undefined;
  startedAt: number | undefined;
  endedAt: number | undefined;
  state: string;
  running: boolean;
  lastLine?: string;
}

export interface TerminalHostApi {
  list(): TerminalSessionRow[];
  kill(id: string): Promise<void>;
  killAll(): Promise<void>;
  logs(id: string): Promise<unknown>;
}

/** The terminal plugin's host API, if the plugin is exposed (placeholder until it lands). */
export function terminalService(_registry: PluginRegistry): TerminalHostApi | undefined {
  return undefined;
}
