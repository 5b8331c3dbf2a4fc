import type { Agent } from './agent.js';
import type { ApprovalQueue } from './approvals.js';
import { runCommand, isCommand } from './commands.js';
import type { ProcessTracker } from './processes.js';
import { displayLine, readResult } from './result-display.js';

export type ToolStatus = 'running' | 'ok' | 'failed' | 'denied' | 'error' | 'aborted';

export type ChatItem =
  | { id: number; kind: 'user'; text: string }
  | { id: number; kind: 'assistant'; text: string; done: boolean }
  | {
      id: number;
      kind: 'tool';
      callId: string;
      name: string;
      summary: string;
      status: ToolStatus;
      startedAt: number;
      endedAt?: number;
      detail?: string;
    }
  | { id: number; kind: 'info' | 'error' | 'command'; text: string };

export interface ChatControllerOptions {
  agent: Agent;
  tracker: ProcessTracker;
  approvals: ApprovalQueue;
  /** Called for `!logs`: a UI pages it, plain mode prints it. */
  onLogs: (id: string, text: string) => void;
  /** Called for `!exit`. */
  onExit: () => void;
}

/**
 * The chat as data: user lines go to the agent (or run as `!` commands), the agent's stream
 * becomes items (assistant text, tool calls with status and timing). The TUI renders the items;
 * plain mode prints them. One turn runs at a time; `cancel()` aborts it (the tools' process trees
 * are killed through the abort signal).
 */
export class ChatController {
  readonly items: ChatItem[] = [];
  private readonly listeners = new Set<() => void>();
  private nextId = 1;
  private controller: AbortController | undefined;
  private running: Promise<void> | undefined;

  constructor(private readonly options: ChatControllerOptions) {}

  get busy(): boolean {
    return this.controller !== undefined;
  }

  get cancelling(): boolean {
    return this.controller?.signal.aborted ?? false;
  }

  /** Handles one line typed by the user. Resolves when a turn or command has finished. */
  async submit(line: string): Promise<void> {
    const text = line.trim();
    if (!text) return;
    if (isCommand(text)) {
      this.push({ kind: 'command', text });
      const outcome = await runCommand(text, this.options.tracker);
      if (outcome.kind === 'exit') this.options.onExit();
      else if (outcome.kind === 'logs') this.options.onLogs(outcome.id, outcome.text);
      else this.push({ kind: outcome.isError ? 'error' : 'info', text: outcome.text });
      return;
    }
    if (this.busy) {
      this.push({ kind: 'error', text: 'the model is still working: wait, or press Ctrl+C to cancel it' });
      return;
    }
    this.push({ kind: 'user', text });
    this.running = this.turn(text);
    await this.running;
  }

  /** Aborts the running turn. Returns false when nothing was running. */
  cancel(): boolean {
    if (!this.controller || this.controller.signal.aborted) return false;
    this.controller.abort(new Error('cancelled by the user (Ctrl+C)'));
    return true;
  }

  /** Waits for the running turn, if any, to end. */
  async idle(): Promise<void> {
    await this.running;
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  info(text: string, kind: 'info' | 'error' = 'info'): void {
    this.push({ kind, text });
  }

  private async turn(text: string): Promise<void> {
    const controller = new AbortController();
    this.controller = controller;
    this.changed();
    let assistant: Extract<ChatItem, { kind: 'assistant' }> | undefined;
    const tools = new Map<string, Extract<ChatItem, { kind: 'tool' }>>();
    const endText = () => {
      if (assistant) {
        assistant.done = true;
        assistant.text = assistant.text.trimEnd();
        assistant = undefined;
        this.changed();
      }
    };
    try {
      const outcome = await this.options.agent.run(text, controller.signal, {
        onText: (delta) => {
          if (!assistant) assistant = this.push({ kind: 'assistant', text: '', done: false });
          assistant.text += delta;
          this.changed();
        },
        onTextEnd: endText,
        onToolCall: ({ id, name, input }) => {
          endText();
          tools.set(
            id,
            this.push({
              kind: 'tool',
              callId: id,
              name,
              summary: summarizeInput(name, this.options.agent.describeCall(name, input)),
              status: 'running',
              startedAt: Date.now(),
            }),
          );
        },
        onToolResult: ({ id, output, isError }) => {
          const item = tools.get(id);
          if (!item) return;
          const { status, detail } = summarizeOutput(output, isError);
          Object.assign(item, { status, detail, endedAt: Date.now() });
          this.changed();
        },
        onToolError: ({ id, name, message }) => {
          const item = tools.get(id);
          if (item) Object.assign(item, { status: 'error', detail: message, endedAt: Date.now() });
          else this.push({ kind: 'error', text: `${name}: ${message}` });
          this.changed();
        },
        onError: (message) => {
          endText();
          this.push({ kind: 'error', text: `model error: ${message}` });
        },
      });
      endText();
      for (const item of tools.values()) {
        if (item.status === 'running') {
          Object.assign(item, { status: 'aborted', detail: 'cancelled', endedAt: Date.now() });
        }
      }
      if (outcome === 'aborted')
        this.push({ kind: 'info', text: 'cancelled: the running tool and its processes were stopped' });
    } finally {
      this.controller = undefined;
      this.running = undefined;
      this.changed();
    }
  }

  private push<T extends Omit<ChatItem, 'id'>>(item: T): T & { id: number } {
    const full = { ...item, id: this.nextId++ } as T & { id: number };
    this.items.push(full as unknown as ChatItem);
    this.changed();
    return full;
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}

/**
 * What a tool call does, shown after the tool's name: the registry's `describeCall` line (the
 * tool's own, e.g. `terminal(npm run dev, background)`, or `name(first string argument)`) without
 * the `name(…)` around it, since the UI prints the name itself.
 */
export function summarizeInput(name: string, line: string): string {
  const prefix = `${name}(`;
  return line.startsWith(prefix) && line.endsWith(')') ? line.slice(prefix.length, -1) : line;
}

/**
 * The status and the one-line detail of a tool result, from its `display` and `error_code` only
 * (every result carries them; see result-display.ts).
 */
export function summarizeOutput(output: unknown, isError: boolean): { status: ToolStatus; detail: string } {
  const detail = displayLine(output);
  if (isError) return { status: 'error', detail };
  const { kind } = readResult(output);
  return { status: kind === 'blocked' ? 'denied' : kind === 'failed' ? 'failed' : 'ok', detail };
}
