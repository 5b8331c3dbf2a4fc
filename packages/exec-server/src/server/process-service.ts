import type { Logger } from '@conch/core';
import {
  InvalidSpawnOptionError,
  type LeftoverHandle,
  type ManagedProcess,
  type OutputEvent,
  type ProcessManager,
  type SpawnOptions,
} from '@conch/process';
import type { ProcessResult } from '@conch/process';
import { PROGRESS_MS, STREAM_WINDOW_BYTES, type LeftoverProgress, type SpawnParams } from '../protocol.js';
import type { ClientLink } from './exec-server.js';
import { ServerError } from './server-error.js';

/** Finished processes kept addressable per connection. */
const HISTORY = 500;

interface Entry {
  id: string;
  proc: ManagedProcess;
  /** Ends the process with reason 'aborted' (the client's abort signal, relayed). */
  controller: AbortController | undefined;
  stream: boolean;
  removeOutput: (() => void) | undefined;
  started: boolean;
  /** Streamed bytes the client has not acknowledged. */
  inFlight: number;
  /** Bytes not streamed because the window was full (sent with the next chunk). */
  skipped: number;
  /** Bytes accounted for to the client: chunks sent plus skipped counts sent. */
  accounted: number;
  lastBytes: number;
  lastFile: string | undefined;
  exited: boolean;
  /** The result, once it ended (re-sent to a client that re-attaches). */
  result: ProcessResult | undefined;
  leftovers: { handle: LeftoverHandle; last: string; done: boolean } | undefined;
}

/**
 * The process layer of the target: `proc.*` and `leftovers.*` requests run on one ProcessManager
 * (with its supervisor, capture, spill files, process groups and cookies), and what happens comes
 * back as notifications — started, output (only for processes the client streams, within a
 * window of unacknowledged bytes: a slow link never slows a command, the spill file keeps every
 * byte), progress (bytes, last line, spill path; throttled), exited (the ProcessResult).
 *
 * While the server is detached nothing is sent: output is counted as skipped (the spill file has
 * it, the client reads it by offset), and a re-attaching client gets the state of the processes it
 * waits on again (`resend`).
 */
export class ProcessService {
  private readonly manager: ProcessManager;
  private readonly peer: ClientLink;
  private readonly logger: Logger;
  private readonly entries = new Map<string, Entry>();
  private progressTimer: NodeJS.Timeout | undefined;

  constructor(manager: ProcessManager, peer: ClientLink, logger: Logger) {
    this.manager = manager;
    this.peer = peer;
    this.logger = logger;
  }

  get running(): number {
    let n = 0;
    for (const entry of this.entries.values()) if (!entry.exited) n++;
    return n;
  }

  spawn(params: SpawnParams): Record<string, never> {
    if (typeof params?.id !== 'string' || params.id.length === 0) {
      throw new ServerError(
        'INVALID_PARAMS',
        `proc.spawn 'id': expected a non-empty string; given ${JSON.stringify(params?.id)}`,
      );
    }
    if (this.entries.has(params.id)) {
      throw new ServerError(
        'INVALID_PARAMS',
        `proc.spawn 'id': expected an id not used on this connection; '${params.id}' is`,
      );
    }
    if (!Array.isArray(params.args)) {
      throw new InvalidSpawnOptionError('args', 'an array of strings', params.args);
    }
    const controller = params.abortable ? new AbortController() : undefined;
    const env: Record<string, string | undefined> | undefined = params.env
      ? Object.fromEntries(Object.entries(params.env).map(([k, v]) => [k, v ?? undefined]))
      : undefined;
    const options: SpawnOptions = {
      ...(params.cwd !== undefined ? { cwd: params.cwd } : {}),
      ...(env ? { env } : {}),
      ...(params.extendEnv !== undefined ? { extendEnv: params.extendEnv } : {}),
      ...(params.shell !== undefined ? { shell: params.shell } : {}),
      ...(params.timeoutMs !== undefined ? { timeoutMs: params.timeoutMs } : {}),
      ...(params.capture !== undefined ? { capture: params.capture } : {}),
      ...(params.stdin !== undefined ? { stdin: params.stdin } : {}),
      ...(params.killGraceMs !== undefined ? { killGraceMs: params.killGraceMs } : {}),
      ...(params.drainMs !== undefined ? { drainMs: params.drainMs } : {}),
      ...(params.keepLeftoverOutput !== undefined ? { keepLeftoverOutput: params.keepLeftoverOutput } : {}),
      ...(params.sandbox !== undefined ? { sandbox: params.sandbox } : {}),
      ...(params.label !== undefined ? { label: params.label } : {}),
      ...(controller ? { signal: controller.signal } : {}),
    };
    const proc = this.manager.spawn(params.command, params.args, options);
    const entry: Entry = {
      id: params.id,
      proc,
      controller,
      stream: false,
      removeOutput: undefined,
      started: false,
      inFlight: 0,
      skipped: 0,
      accounted: 0,
      lastBytes: 0,
      lastFile: undefined,
      exited: false,
      result: undefined,
      leftovers: undefined,
    };
    this.entries.set(params.id, entry);
    if (params.stream) this.setStream(entry, true);
    void proc.spawned.then((pid) => {
      if (pid !== undefined) this.notifyStarted(entry);
    });
    void proc.result.then((result) => {
      entry.exited = true;
      entry.result = result;
      this.prune();
      this.notifyStarted(entry);
      this.sendSkipped(entry);
      this.sendProgress(entry, true);
      this.peer.notify('proc.exited', { id: entry.id, result });
      // The stream is over; what a leftover writes later is read through leftovers.read.
      entry.removeOutput?.();
      entry.removeOutput = undefined;
    });
    this.ensureProgressTimer();
    return {};
  }

  async write(id: string, data: string): Promise<{ written: boolean }> {
    const { proc } = this.entry(id);
    const stdin = proc.stdin;
    if (!stdin || stdin.writableEnded || stdin.destroyed) return { written: false };
    const bytes = Buffer.from(data, 'base64');
    return new Promise((resolve) => {
      stdin.write(bytes, (error) => resolve({ written: !error }));
    });
  }

  closeStdin(id: string): Record<string, never> {
    const { proc } = this.entry(id);
    proc.stdin?.end();
    return {};
  }

  async kill(id: string): Promise<Record<string, never>> {
    await this.entry(id).proc.kill();
    return {};
  }

  abort(id: string): Record<string, never> {
    const entry = this.entry(id);
    if (entry.controller) entry.controller.abort();
    else {
      entry.controller = new AbortController();
      entry.proc.attachSignal(entry.controller.signal);
      entry.controller.abort();
    }
    return {};
  }

  setTimeout(id: string, ms: number | null): Record<string, never> {
    this.entry(id).proc.setTimeout(ms ?? undefined);
    return {};
  }

  /** Attaches a fresh abort relay (attached) or stops the client's signal from ending it (detached). */
  signal(id: string, attached: boolean): Record<string, never> {
    const entry = this.entry(id);
    if (attached) {
      entry.controller = new AbortController();
      entry.proc.attachSignal(entry.controller.signal);
    } else {
      entry.proc.detachSignal();
      entry.controller = undefined;
    }
    return {};
  }

  stream(id: string, on: boolean): Record<string, never> {
    const entry = this.entry(id);
    if (!entry.exited) this.setStream(entry, on);
    return {};
  }

  ack(id: string, bytes: number): void {
    const entry = this.entries.get(id);
    if (!entry || !(bytes > 0)) return;
    entry.inFlight = Math.max(0, entry.inFlight - bytes);
  }

  async materialize(id: string): Promise<{ path: string | null }> {
    return { path: (await this.entry(id).proc.materializeOutput()) ?? null };
  }

  async read(id: string, offset: number, limit: number): Promise<{ data: string }> {
    const { proc } = this.entry(id);
    const sink = proc.combined ?? proc.stdout.sink;
    if (!sink) return { data: '' };
    const bytes = await sink.read(offset, Math.min(limit, 8 * 1024 * 1024));
    return { data: Buffer.from(bytes).toString('base64') };
  }

  adopt(id: string): LeftoverProgress {
    const entry = this.entry(id);
    if (!entry.leftovers) {
      const handle = this.manager.adoptLeftovers(entry.proc);
      entry.leftovers = { handle, last: '', done: false };
      void handle.done.then(() => {
        if (entry.leftovers) entry.leftovers.done = true;
        this.sendLeftoverProgress(entry, true);
        this.peer.notify('leftovers.done', { id });
      });
      this.ensureProgressTimer();
    }
    return this.leftoverProgress(entry);
  }

  async killLeftovers(id: string): Promise<Record<string, never>> {
    const entry = this.entry(id);
    await entry.leftovers?.handle.kill();
    return {};
  }

  async readLeftovers(id: string, offset: number, limit: number): Promise<{ data: string }> {
    const entry = this.entry(id);
    if (!entry.leftovers) return { data: '' };
    const bytes = await entry.leftovers.handle.readOutput(offset, Math.min(limit, 8 * 1024 * 1024));
    return { data: Buffer.from(bytes).toString('base64') };
  }

  async killAll(): Promise<Record<string, never>> {
    await this.manager.killAll();
    return {};
  }

  /**
   * A client re-attached: what the old stream had not acknowledged is moot (a fresh window), and
   * what it carried off without delivering (the client says what it got) is counted as skipped.
   */
  reattached(streamed: Record<string, number>): void {
    for (const entry of this.entries.values()) {
      entry.inFlight = 0;
      const got = streamed[entry.id];
      if (typeof got === 'number' && got >= 0 && got < entry.accounted) {
        entry.skipped += entry.accounted - got;
        entry.accounted = got;
      }
    }
  }

  /**
   * Sends the state of these processes again (started, progress, skipped output, exited, leftovers)
   * to a client that re-attached; returns the ids this server never saw.
   */
  resend(ids: readonly string[]): string[] {
    const unknown: string[] = [];
    for (const id of ids) {
      const entry = typeof id === 'string' ? this.entries.get(id) : undefined;
      if (!entry) {
        unknown.push(String(id));
        continue;
      }
      entry.started = false;
      this.notifyStarted(entry);
      this.sendProgress(entry, true);
      if (entry.exited && entry.result) {
        this.sendSkipped(entry);
        this.peer.notify('proc.exited', { id: entry.id, result: entry.result });
      }
      if (entry.leftovers) {
        this.sendLeftoverProgress(entry, true);
        if (entry.leftovers.done) this.peer.notify('leftovers.done', { id });
      }
    }
    return unknown;
  }

  /** Stops notifying (the connection is going away). */
  close(): void {
    if (this.progressTimer) clearInterval(this.progressTimer);
    this.progressTimer = undefined;
    for (const entry of this.entries.values()) entry.removeOutput?.();
  }

  /**
   * Forgets the oldest finished processes beyond HISTORY (their spill files stay until the server
   * shuts down): a finished run stays readable for a while (a background task's output is paged
   * after it ended), but a long-lived connection does not keep every process ever run.
   */
  private prune(): void {
    if (this.entries.size <= HISTORY) return;
    for (const [id, entry] of this.entries) {
      if (this.entries.size <= HISTORY) break;
      if (entry.exited && (!entry.leftovers || entry.leftovers.done)) this.entries.delete(id);
    }
  }

  private entry(id: string): Entry {
    const entry = this.entries.get(id);
    if (!entry)
      throw new ServerError(
        'UNKNOWN_PROCESS',
        `process id '${id}': expected a process spawned on this connection; there is none`,
      );
    return entry;
  }

  /** The count of what was not streamed, at the end (no later chunk carries it); kept while detached. */
  private sendSkipped(entry: Entry): void {
    if (entry.skipped === 0 || !this.peer.attached) return;
    this.peer.notify('proc.output', { id: entry.id, stream: 'stdout', data: '', skipped: entry.skipped });
    entry.accounted += entry.skipped;
    entry.skipped = 0;
  }

  private notifyStarted(entry: Entry): void {
    if (entry.started || entry.proc.pid === undefined) return;
    entry.started = true;
    this.peer.notify('proc.started', {
      id: entry.id,
      pid: entry.proc.pid,
      cookie: entry.proc.cookie,
      sandbox: entry.proc.sandbox,
    });
  }

  private setStream(entry: Entry, on: boolean): void {
    if (on === entry.stream) return;
    entry.stream = on;
    // What the process wrote while nobody streamed it (before a late `proc.stream`, or between an
    // off and an on) is skipped like a full window's: streamed plus skipped stays every byte.
    if (on) entry.skipped += Math.max(0, this.bytesOf(entry) - entry.accounted - entry.skipped);
    entry.removeOutput?.();
    entry.removeOutput = on ? entry.proc.onOutput((event) => this.forward(entry, event)) : undefined;
  }

  /**
   * Streams a chunk unless the client is STREAM_WINDOW_BYTES behind: then the chunk is counted as
   * skipped (the spill file has it) and the next chunk that fits says how much was skipped.
   */
  private forward(entry: Entry, event: OutputEvent): void {
    this.notifyStarted(entry);
    const size = event.chunk.length;
    // Detached: nobody to send to; the next chunk after a re-attach says how much was skipped.
    if (!this.peer.attached || entry.inFlight + size > STREAM_WINDOW_BYTES) {
      entry.skipped += size;
      return;
    }
    entry.inFlight += size;
    const skipped = entry.skipped;
    entry.skipped = 0;
    entry.accounted += size + skipped;
    this.peer.notify('proc.output', {
      id: entry.id,
      stream: event.stream,
      data: event.chunk.toString('base64'),
      ...(skipped > 0 ? { skipped } : {}),
    });
  }

  private ensureProgressTimer(): void {
    if (this.progressTimer) return;
    this.progressTimer = setInterval(() => this.tick(), PROGRESS_MS);
  }

  private tick(): void {
    let active = false;
    for (const entry of this.entries.values()) {
      if (!entry.exited) {
        active = true;
        this.sendProgress(entry, false);
      }
      if (entry.leftovers && !entry.leftovers.done) {
        active = true;
        this.sendLeftoverProgress(entry, false);
      }
    }
    if (!active && this.progressTimer) {
      clearInterval(this.progressTimer);
      this.progressTimer = undefined;
    }
  }

  private bytesOf(entry: Entry): number {
    const { proc } = entry;
    return proc.combined ? proc.combined.totalBytes : proc.stdout.totalBytes + proc.stderr.totalBytes;
  }

  private sendProgress(entry: Entry, force: boolean): void {
    const bytes = this.bytesOf(entry);
    const file = entry.proc.combined?.path;
    if (!force && bytes === entry.lastBytes && file === entry.lastFile) return;
    entry.lastBytes = bytes;
    entry.lastFile = file;
    const lastLine = entry.proc.lastLine();
    this.peer.notify('proc.progress', {
      id: entry.id,
      bytes,
      ...(file ? { outputFile: file } : {}),
      ...(lastLine !== undefined ? { lastLine } : {}),
    });
  }

  private leftoverProgress(entry: Entry): LeftoverProgress {
    const handle = entry.leftovers!.handle;
    const outputFile = handle.outputFile();
    const lastLine = handle.lastLine();
    return {
      id: entry.id,
      pids: handle.pids(),
      bytes: handle.outputBytes(),
      ...(outputFile ? { outputFile } : {}),
      ...(lastLine !== undefined ? { lastLine } : {}),
    };
  }

  private sendLeftoverProgress(entry: Entry, force: boolean): void {
    const progress = this.leftoverProgress(entry);
    const key = JSON.stringify(progress);
    if (!force && key === entry.leftovers!.last) return;
    entry.leftovers!.last = key;
    this.peer.notify('leftovers.progress', progress);
    this.logger.trace?.({ id: entry.id }, 'leftover progress');
  }
}
