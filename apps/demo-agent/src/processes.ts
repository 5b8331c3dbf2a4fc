import {
  BACKGROUND_SERVICE,
  token,
  type BackgroundService,
  type BackgroundTaskInfo,
  type PluginRegistry,
  type ProcessManagerService,
} from '@conch/core';
import { stripAnsi } from '@conch/process';
import { isTerminalId, terminalService, type TerminalSessionRow } from './terminal-api.js';

/** @conch/process's manager, by its token name (tokens of one name are one key). */
const PROCESS_MANAGER = token<ProcessManagerService>('conch.process.ProcessManager');

/** One line of the process panel and of `!ps`. */
export interface ProcessRow {
  id: string;
  kind: 'process' | 'background' | 'terminal' | 'browser';
  command: string;
  pid: number | undefined;
  startedAt: number | undefined;
  endedAt: number | undefined;
  state: string;
  running: boolean;
  lastLine: string;
}

interface TrackedProcess {
  id: string;
  command: string;
  pid: number | undefined;
  startedAt: number;
  endedAt?: number;
  state: string;
  output: string;
  outputDropped: number;
  lastLine: string;
}

const MAX_KEPT_OUTPUT = 1024 * 1024;
const MAX_EXITED_KEPT = 20;

/**
 * The host's view of everything running: foreground tool processes (from the registry's
 * `process.*` events), background tasks (the background plugin's host API) and terminal sessions
 * (the terminal plugin's host API). Partners are resolved at call time, so the panel works with
 * whichever plugins the config exposes.
 */
export class ProcessTracker {
  private readonly processes = new Map<string, TrackedProcess>();
  private readonly listeners = new Set<() => void>();
  private readonly unsubscribe: (() => void)[] = [];

  constructor(private readonly registry: PluginRegistry) {
    // Processes already running (the environment's browser started before the app's UI).
    for (const p of this.manager()?.list() ?? []) {
      if (!p.isRunning) continue;
      this.processes.set(p.id, {
        id: p.id,
        command: p.command,
        pid: p.pid,
        startedAt: p.startedAt,
        state: 'running',
        output: '',
        outputDropped: 0,
        lastLine: '',
      });
    }
    const events = registry.events;
    this.unsubscribe.push(
      events.on('process.started', (e) => {
        this.processes.set(e.id, {
          id: e.id,
          command: e.command,
          pid: e.pid,
          startedAt: e.startedAt,
          state: 'running',
          output: '',
          outputDropped: 0,
          lastLine: '',
        });
        this.prune();
        this.changed();
      }),
      events.on('process.output', (e) => {
        const p = this.processes.get(e.id);
        if (!p) return;
        p.output += e.text;
        if (p.output.length > MAX_KEPT_OUTPUT) {
          const cut = p.output.length - MAX_KEPT_OUTPUT;
          p.output = p.output.slice(cut);
          p.outputDropped += cut;
        }
        const line = lastNonEmptyLine(e.text);
        if (line) p.lastLine = line;
        this.changed();
      }),
      events.on('process.exited', (e) => {
        const p = this.processes.get(e.id);
        if (!p) return;
        p.endedAt = Date.now();
        p.state =
          e.reason && e.reason !== 'exit'
            ? e.reason
            : e.signal
              ? `killed (${e.signal})`
              : `exited ${String(e.exitCode)}`;
        this.changed();
      }),
    );
  }

  /** Everything known, newest first within each kind; background tasks and sessions first. */
  rows(): ProcessRow[] {
    const background = this.background()?.list() ?? [];
    const sessions = this.safeSessions();
    const ownedPids = new Set<number>();
    for (const t of background) if (t.pid !== undefined) ownedPids.add(t.pid);
    for (const s of sessions) if (s.pid !== undefined) ownedPids.add(s.pid);
    const backgroundCommands = new Set(
      background.filter((t) => t.status === 'running').map((t) => t.command),
    );

    const rows: ProcessRow[] = [
      ...background.map((t) => backgroundRow(t, this.findProcessFor(t))),
      ...sessions.map((s): ProcessRow => ({
        id: s.id,
        kind: 'terminal',
        command: s.command,
        pid: s.pid,
        startedAt: s.startedAt,
        endedAt: s.endedAt,
        state: s.state,
        running: s.running,
        lastLine: s.lastLine ?? '',
      })),
    ];
    // Labels can change after the start (the browser's, once CDP answers): read them live.
    const labels = new Map((this.manager()?.list() ?? []).map((p) => [p.id, p.command]));
    for (const p of [...this.processes.values()].reverse()) {
      if (p.pid !== undefined && ownedPids.has(p.pid)) continue;
      // A promoted task keeps its process; show it once, as the task.
      if (!p.endedAt && backgroundCommands.has(p.command)) continue;
      const row: ProcessRow = {
        id: p.id,
        kind: 'process',
        command: labels.get(p.id) ?? p.command,
        pid: p.pid,
        startedAt: p.startedAt,
        endedAt: p.endedAt,
        state: p.state,
        running: p.endedAt === undefined,
        lastLine: p.lastLine,
      };
      rows.push(browserRow(row) ?? row);
    }
    // The browser first: it is the one a user looks for (its CDP address).
    return [...rows.filter((r) => r.kind === 'browser'), ...rows.filter((r) => r.kind !== 'browser')];
  }

  /** Ends one process, task or session by id. Returns what it did, for the chat. */
  async kill(id: string): Promise<string> {
    const background = this.background();
    if (background?.list().some((t) => t.id === id)) {
      await background.kill(id);
      return `killed background task ${id}`;
    }
    const terminal = terminalService(this.registry);
    if (terminal && isTerminalId(terminal, id)) {
      await terminal.kill(id);
      return `killed terminal session ${id}`;
    }
    const manager = this.registry.resolveOptional(PROCESS_MANAGER);
    if (this.processes.has(id) && manager) {
      await manager.kill(id);
      return `killed process ${id}`;
    }
    throw new Error(`no process, background task or terminal session has id '${id}'; see !ps`);
  }

  /**
   * Ends everything that is running — background tasks, terminal sessions, every process the
   * registry started (the browser included) — and says what it ended, by id.
   */
  async killAll(): Promise<string> {
    const running = this.rows().filter((r) => r.running);
    const background = this.background();
    if (background) await background.killAll();
    const terminal = terminalService(this.registry);
    if (terminal) await terminal.killAll();
    const manager = this.registry.resolveOptional(PROCESS_MANAGER);
    if (manager) await manager.killAll();
    if (running.length === 0) return 'nothing was running';
    const named = (kind: ProcessRow['kind'], one: string, many: string) => {
      const ids = running.filter((r) => r.kind === kind).map((r) => r.id);
      return ids.length ? `${ids.length} ${ids.length === 1 ? one : many} (${ids.join(', ')})` : undefined;
    };
    const parts = [
      named('browser', 'browser', 'browsers'),
      named('background', 'background task', 'background tasks'),
      named('terminal', 'terminal session', 'terminal sessions'),
      named('process', 'process', 'processes'),
    ].filter((p): p is string => p !== undefined);
    return `killed ${parts.join(', ')}`;
  }

  /** The full output of a process, task or session. */
  async logs(id: string): Promise<string> {
    const background = this.background();
    if (background?.list().some((t) => t.id === id)) return readAllLogs(background, id);
    const terminal = terminalService(this.registry);
    if (terminal && isTerminalId(terminal, id)) return await terminal.logs(id);
    const p = this.processes.get(id);
    if (p) {
      return (
        (p.outputDropped ? `(first ${p.outputDropped} characters not kept by the demo)\n` : '') + p.output
      );
    }
    throw new Error(`no process, background task or terminal session has id '${id}'; see !ps`);
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  dispose(): void {
    for (const off of this.unsubscribe.splice(0)) off();
    this.listeners.clear();
  }

  private manager(): ProcessManagerService | undefined {
    if (this.registry.disposed) return undefined;
    return this.registry.resolveOptional(PROCESS_MANAGER);
  }

  private background(): BackgroundService | undefined {
    if (this.registry.disposed) return undefined;
    return this.registry.resolveOptional(BACKGROUND_SERVICE);
  }

  private safeSessions(): TerminalSessionRow[] {
    if (this.registry.disposed) return [];
    return terminalService(this.registry)?.list() ?? [];
  }

  private findProcessFor(task: BackgroundTaskInfo): TrackedProcess | undefined {
    if (task.pid === undefined) return undefined;
    for (const p of this.processes.values()) if (p.pid === task.pid) return p;
    return undefined;
  }

  private prune(): void {
    const exited = [...this.processes.values()].filter((p) => p.endedAt !== undefined);
    for (const p of exited.slice(0, Math.max(0, exited.length - MAX_EXITED_KEPT)))
      this.processes.delete(p.id);
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}

/**
 * A browser's row in the seed's words: `[browser] Chrome Headless`, state `CDP Ready` and its
 * WebSocket address as the second line (what a CDP client connects to), from the label
 * @conch/browser gives its process (`[browser] Chrome Headless  CDP Ready ws://…`).
 */
export function browserRow(row: ProcessRow): ProcessRow | undefined {
  const match = /^(\[browser\] .+?) {2}(CDP Ready|starting)(?: (\S+))?$/.exec(row.command);
  if (!match) return undefined;
  return {
    ...row,
    kind: 'browser',
    command: match[1]!,
    state: row.running ? match[2]! : row.state,
    lastLine: match[3] ?? row.lastLine,
  };
}

function backgroundRow(t: BackgroundTaskInfo, process: TrackedProcess | undefined): ProcessRow {
  return {
    id: t.id,
    kind: 'background',
    command: t.command,
    pid: t.pid,
    startedAt: t.startedAt ?? t.createdAt,
    endedAt: t.endedAt,
    state: t.status,
    running: t.status === 'running' || t.status === 'queued',
    lastLine: t.lastLine ?? process?.lastLine ?? '',
  };
}

const MAX_PAGER_BYTES = 8 * 1024 * 1024;

/** Reads a background task's output page by page (the API pages by byte offset). */
async function readAllLogs(background: BackgroundService, id: string): Promise<string> {
  let text = '';
  let offset = 0;
  for (;;) {
    const page = await background.logs(id, { offset, limit: 256 * 1024 });
    text += page.text;
    if (page.nextOffset <= offset || page.nextOffset >= page.totalBytes) return text;
    if (page.nextOffset >= MAX_PAGER_BYTES) {
      return `${text}\n(… ${page.totalBytes - page.nextOffset} more bytes in ${page.outputFile ?? 'the task log'})`;
    }
    offset = page.nextOffset;
  }
}

/**
 * The last line with text, for the process panel: terminal control sequences (colours, cursor moves,
 * OSC 8 hyperlinks, titles) removed by @conch/process's `stripAnsi`, the one the tools use.
 */
export function lastNonEmptyLine(text: string): string {
  const lines = stripAnsi(text).split(/\r?\n|\r/);
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]?.trim();
    if (line) return line;
  }
  return '';
}

/** "3.2s", "2m 05s", "1h 02m". */
export function formatDuration(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}
