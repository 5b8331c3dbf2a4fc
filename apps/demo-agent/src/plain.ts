import type { Readable, Writable } from 'node:stream';
import { parseApprovalAnswer, type ApprovalQueue } from './approvals.js';
import type { ChatController, ChatItem } from './chat.js';
import { LineReader } from './line-reader.js';
import { formatDuration } from './processes.js';

export interface PlainOptions {
  chat: ChatController;
  approvals: ApprovalQueue;
  header: string[];
  /** Messages to send first (the walkthrough, --prompt). */
  initial: string[];
  /** Answer approvals "yes, once" without asking. */
  yes: boolean;
  input: Readable;
  output: Writable;
  /** Disposes the registry; called once at the end. */
  shutdown: () => Promise<void>;
  /** True once `!exit` was typed: no more input is read. */
  stopped?: () => boolean;
}

const STATUS_MARK: Record<string, string> = {
  ok: '✓',
  failed: '✗',
  denied: '⊘',
  error: '!',
  aborted: '■',
};

/**
 * Non-TTY mode for pipes and CI: plain lines out; lines in are messages or `!` commands; an
 * approval prompt reads its answer from the next input line (or is answered "yes, once" with
 * --yes; at end of input it is denied). Ends at end of input, after the last turn.
 */
export async function runPlain(options: PlainOptions): Promise<void> {
  const { chat, approvals, output } = options;
  const write = (text: string) => output.write(`${text}\n`);
  const reader = new LineReader(options.input);
  const printed = new Map<number, 'started' | 'done'>();

  const print = (item: ChatItem) => {
    const state = printed.get(item.id);
    if (state === 'done') return;
    switch (item.kind) {
      case 'user':
        write(`> ${item.text}`);
        break;
      case 'assistant':
        if (!item.done) return;
        if (item.text) write(`assistant: ${item.text}`);
        break;
      case 'tool':
        if (!state) write(`  ▶ ${item.name} ${item.summary}`);
        if (item.status === 'running') {
          printed.set(item.id, 'started');
          return;
        }
        write(
          `  ${STATUS_MARK[item.status] ?? '?'} ${item.name} ${item.status} (${formatDuration((item.endedAt ?? Date.now()) - item.startedAt)})`,
        );
        if (item.detail) write(indent(item.detail, '    '));
        break;
      case 'command':
        write(`$ ${item.text}`);
        break;
      case 'error':
        write(`error: ${item.text}`);
        break;
      case 'info':
        write(item.text);
        break;
    }
    printed.set(item.id, 'done');
  };
  // Print in order: stop at the first item that is still in progress (its followers wait).
  const flush = () => {
    for (const item of chat.items) {
      print(item);
      if (printed.get(item.id) !== 'done') break;
    }
  };
  const offChat = chat.subscribe(flush);

  let asking: number | undefined;
  const offApprovals = approvals.subscribe(() => {
    const current = approvals.current();
    if (!current || asking === current.id) return;
    asking = current.id;
    flush();
    const { request } = current;
    write(`? conch asks to run: ${request.display}`);
    write(`  ${request.reason}${request.suggestedRule ? `  (always adds: ${request.suggestedRule})` : ''}`);
    const reaches = request.escalation?.reaches ?? [];
    if (reaches.length > 0) {
      write('  outside the sandbox it will reach:');
      for (const line of reaches) write(`    - ${line}`);
    }
    if (options.yes) {
      write('  allow? [y]es / [n]o / [a]lways: y   (--yes)');
      approvals.answer(current.id, 'once');
      return;
    }
    write('  allow? [y]es / [n]o / [a]lways:');
    void (async () => {
      for (;;) {
        const line = await reader.next();
        if (line === undefined) {
          write('  (end of input: denied)');
          approvals.answer(current.id, 'deny');
          return;
        }
        const answer = parseApprovalAnswer(line);
        if (answer) {
          write(`  → ${answer}`);
          approvals.answer(current.id, answer);
          return;
        }
        write('  please answer y, n or a:');
      }
    })();
  });

  for (const line of options.header) write(line);
  try {
    const stopped = options.stopped ?? (() => false);
    for (const message of options.initial) {
      if (stopped()) break;
      await chat.submit(message);
    }
    while (!stopped()) {
      const line = await reader.next();
      if (line === undefined) break;
      await chat.submit(line);
    }
    await chat.idle();
  } finally {
    flush();
    offChat();
    offApprovals();
    reader.dispose();
    approvals.denyAll();
    await options.shutdown();
  }
}

function indent(text: string, prefix: string): string {
  return text
    .split('\n')
    .map((l) => prefix + l)
    .join('\n');
}
