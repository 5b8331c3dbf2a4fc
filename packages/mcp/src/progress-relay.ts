import type { ToolProgress } from '@conch/core';

export interface ProgressNotification {
  progress: number;
  total?: number;
  message?: string;
}

/**
 * Turns a tool's progress reports into MCP progress notifications for one call, and sends a
 * keep-alive notification every `intervalMs` while the call runs, so clients that reset their
 * request timeout on progress (`resetTimeoutOnProgress`) do not give up on a long command.
 * MCP requires `progress` to increase with every notification; the relay enforces it.
 */
export class ProgressRelay {
  private last = 0;
  private lastTotal: number | undefined;
  private readonly started = performance.now();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly send: (notification: ProgressNotification) => void,
    intervalMs: number,
  ) {
    if (intervalMs > 0) {
      this.timer = setInterval(() => this.keepAlive(), intervalMs);
      this.timer.unref();
    }
  }

  /** A progress report from the tool. */
  report(progress: ToolProgress): void {
    if (this.closed) return;
    const value =
      Number.isFinite(progress.progress) && progress.progress > this.last ? progress.progress : this.bump();
    const total =
      progress.total !== undefined && Number.isFinite(progress.total) && progress.total >= value
        ? progress.total
        : undefined;
    this.emit({
      progress: value,
      ...(total === undefined ? {} : { total }),
      ...(progress.message === undefined ? {} : { message: progress.message }),
    });
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private keepAlive(): void {
    if (this.closed) return;
    const seconds = Math.round((performance.now() - this.started) / 1000);
    const value = this.bump();
    this.emit({
      progress: value,
      ...(this.lastTotal !== undefined && this.lastTotal >= value ? { total: this.lastTotal } : {}),
      message: `still running (${seconds}s)`,
    });
  }

  /** The smallest step above the last value that stays under a known total. */
  private bump(): number {
    if (this.lastTotal !== undefined) {
      const room = this.lastTotal - this.last;
      if (room > 0) return this.last + Math.min(room / 100, 1);
    }
    return this.last + 1;
  }

  private emit(notification: ProgressNotification): void {
    this.last = notification.progress;
    this.lastTotal = notification.total;
    this.send(notification);
  }
}
