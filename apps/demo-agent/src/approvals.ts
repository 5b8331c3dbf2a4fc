import type { ApprovalAnswer, ApprovalRequest } from '@conch/core';

export interface PendingApproval {
  id: number;
  toolCallId: string;
  request: ApprovalRequest;
}

/**
 * Turns the permission plugin's asks into prompts a UI answers: `approve` (handed to
 * toAiSdkTools) queues a request and waits; the UI shows `current()` and calls `answer()`.
 * An aborted call (Ctrl+C) withdraws its prompt and is denied.
 */
export class ApprovalQueue {
  private readonly pending: (PendingApproval & { resolve: (answer: ApprovalAnswer) => void })[] = [];
  private readonly listeners = new Set<() => void>();
  private nextId = 1;

  readonly approve = (
    request: ApprovalRequest,
    options: { signal?: AbortSignal },
    toolCallId: string,
  ): Promise<ApprovalAnswer> => {
    if (options.signal?.aborted) return Promise.resolve('deny');
    return new Promise<ApprovalAnswer>((resolve) => {
      const id = this.nextId++;
      const onAbort = () => this.settle(id, 'deny');
      options.signal?.addEventListener('abort', onAbort, { once: true });
      this.pending.push({
        id,
        toolCallId,
        request,
        resolve: (answer) => {
          options.signal?.removeEventListener('abort', onAbort);
          resolve(answer);
        },
      });
      this.changed();
    });
  };

  /** The prompt to show now (first come, first asked). */
  current(): PendingApproval | undefined {
    const first = this.pending[0];
    return first && { id: first.id, toolCallId: first.toolCallId, request: first.request };
  }

  answer(id: number, answer: ApprovalAnswer): void {
    this.settle(id, answer);
  }

  /** Denies everything pending (exit). */
  denyAll(): void {
    for (const entry of [...this.pending]) this.settle(entry.id, 'deny');
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private settle(id: number, answer: ApprovalAnswer): void {
    const index = this.pending.findIndex((p) => p.id === id);
    if (index < 0) return;
    const [entry] = this.pending.splice(index, 1);
    entry?.resolve(answer);
    this.changed();
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}

/** Reads y / n / a (and words) as an answer; undefined when it is none of them. */
export function parseApprovalAnswer(text: string): ApprovalAnswer | undefined {
  const t = text.trim().toLowerCase();
  if (['y', 'yes', 'once', 'o'].includes(t)) return 'once';
  if (['a', 'always'].includes(t)) return 'always';
  if (['n', 'no', 'deny', 'd', ''].includes(t)) return 'deny';
  return undefined;
}
