import { TerminalProtocolError } from './errors/terminal-protocol-error.js';
import { MARKER_OSC } from './shell-scripts.js';

/**
 * Splits a session's PTY stream by the markers of shell-scripts.ts: the first end marker means the
 * init file ran; after each command is typed, everything up to its begin marker (the echo of the
 * typed line) is dropped, everything up to the end marker is the command's output, and what comes
 * between commands (jobs a command left running) is idle output. Only new chunks (plus a few held
 * characters) are searched, so a flood costs linear time.
 */
export interface MarkerEvents {
  /** The init file ran. `before` is what the shell printed until then (rc noise, errors). */
  ready(cwd: string, before: string): void;
  begin(): void;
  output(text: string): void;
  end(exitCode: number, cwd: string): void;
  /** Output while no command runs. */
  idle(text: string): void;
}

/** Where a suffix of `text` that could begin `prefix` starts (text.length when none). */
function partialPrefixStart(text: string, prefix: string): number {
  const from = Math.max(0, text.length - prefix.length + 1);
  for (let i = text.indexOf('\u001b', from); i >= 0; i = text.indexOf('\u001b', i + 1)) {
    if (prefix.startsWith(text.slice(i))) return i;
  }
  return text.length;
}

/** The cwd field of an end marker (`\r\n` from the tty's output processing undone). */
function cwdField(fields: string[]): string {
  return fields.join(';').replace(/\r\n/g, '\n');
}

export class MarkerParser {
  private readonly beginPrefix: string;
  private readonly endPrefix: string;
  private readonly events: MarkerEvents;
  private mode: 'starting' | 'idle' | 'pre' | 'in' = 'starting';
  private seq = 0;
  /** Startup text, or the typed line's echo before a begin marker. */
  private pending = '';
  /** Text that may be the start of an end marker split across chunks. */
  private held = '';

  constructor(nonce: string, events: MarkerEvents) {
    this.beginPrefix = `${MARKER_OSC}B;${nonce};`;
    this.endPrefix = `${MARKER_OSC}E;${nonce};`;
    this.events = events;
  }

  /** Whether the current command printed its begin marker (it runs). */
  get begun(): boolean {
    return this.mode === 'in';
  }

  /** What the shell printed before it was ready (kept until then, bounded). */
  get startupText(): string {
    return this.pending;
  }

  /** A command with this seq was typed: wait for its begin marker. */
  expect(seq: number): void {
    if (this.mode !== 'idle') {
      throw new TerminalProtocolError(
        'SESSION_NOT_TYPABLE',
        `marker parser: expected a shell waiting at its gate ('idle') when a command is typed; it is '${this.mode}'`,
      );
    }
    this.seq = seq;
    this.pending = '';
    this.held = '';
    this.mode = 'pre';
  }

  push(data: string): void {
    switch (this.mode) {
      case 'starting':
        this.onStarting(data);
        return;
      case 'pre':
        this.onPre(data);
        return;
      case 'in':
        this.onCommandData(data);
        return;
      default:
        this.events.idle(data);
    }
  }

  private onStarting(data: string): void {
    this.pending += data;
    const at = this.pending.indexOf(this.endPrefix);
    if (at < 0) {
      if (this.pending.length > 256 * 1024) this.pending = this.pending.slice(-128 * 1024);
      return;
    }
    const close = this.pending.indexOf('\u0007', at);
    if (close < 0) return;
    const [, ...cwd] = this.pending.slice(at + this.endPrefix.length, close).split(';');
    const before = this.pending.slice(0, at);
    const rest = this.pending.slice(close + 1);
    this.pending = '';
    this.mode = 'idle';
    this.events.ready(cwdField(cwd), before);
    if (rest) this.events.idle(rest);
  }

  private onPre(data: string): void {
    this.pending += data;
    const marker = `${this.beginPrefix}${this.seq}\u0007`;
    const at = this.pending.indexOf(marker);
    if (at < 0) {
      if (this.pending.length > 64 * 1024) this.pending = this.pending.slice(-1024);
      return;
    }
    const rest = this.pending.slice(at + marker.length);
    this.pending = '';
    this.mode = 'in';
    this.events.begin();
    if (rest) this.onCommandData(rest);
  }

  private onCommandData(data: string): void {
    const text = this.held + data;
    this.held = '';
    const at = text.indexOf(this.endPrefix);
    if (at < 0) {
      const keep = partialPrefixStart(text, this.endPrefix);
      this.held = text.slice(keep);
      if (keep > 0) this.events.output(text.slice(0, keep));
      return;
    }
    const close = text.indexOf('\u0007', at);
    if (close < 0) {
      // The marker is split across chunks: hold it until its end arrives (a cwd is < 4 KiB).
      if (at > 0) this.events.output(text.slice(0, at));
      if (text.length - at > 16 * 1024) this.events.output(text.slice(at));
      else this.held = text.slice(at);
      return;
    }
    const [codeText, ...cwd] = text.slice(at + this.endPrefix.length, close).split(';');
    if (at > 0) this.events.output(text.slice(0, at));
    this.mode = 'idle';
    this.events.end(Number(codeText), cwdField(cwd));
    const rest = text.slice(close + 1);
    if (rest) this.events.idle(rest);
  }
}
