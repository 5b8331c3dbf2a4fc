import type { LeftoverHandle } from '@conch/process';
import type { LeftoverProgress } from '../protocol.js';
import type { RemoteProcess } from './remote-process.js';

/**
 * What a finished remote command left running, adopted in the target (its ProcessManager's
 * LeftoverHandle watches them there): pids, bytes, last line and spill path arrive as progress,
 * `done` when none is left. A dropped connection ends the handle (the server killed them).
 */
export class RemoteLeftovers implements LeftoverHandle {
  readonly cookie: string;
  readonly done: Promise<void>;
  private readonly proc: RemoteProcess;
  private resolveDone!: () => void;
  private finished = false;
  private known: number[];
  private bytes = 0;
  private file: string | undefined;
  private last: string | undefined;

  constructor(proc: RemoteProcess, initialPids: readonly number[]) {
    this.proc = proc;
    this.cookie = proc.cookie;
    this.known = [...initialPids];
    this.last = proc.lastLine();
    this.file = proc.combined?.path;
    this.bytes = proc.combined?.totalBytes ?? 0;
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
    proc.request('proc.adopt', { id: proc.id }).then(
      (progress) => this.onProgress(progress),
      () => this.end(),
    );
  }

  pids(): number[] {
    return this.finished ? [] : [...this.known];
  }

  async kill(): Promise<void> {
    if (this.finished) return;
    await this.proc.request('leftovers.kill', { id: this.proc.id }).catch(() => undefined);
    await this.done;
  }

  async readOutput(offset: number, limit: number): Promise<Uint8Array> {
    const { data } = await this.proc.request('leftovers.read', { id: this.proc.id, offset, limit });
    return Buffer.from(data, 'base64');
  }

  outputBytes(): number {
    return this.bytes;
  }

  outputFile(): string | undefined {
    return this.file;
  }

  lastLine(): string | undefined {
    return this.last;
  }

  /** @internal */
  onProgress(progress: LeftoverProgress): void {
    this.known = progress.pids;
    this.bytes = progress.bytes;
    if (progress.outputFile) this.file = progress.outputFile;
    if (progress.lastLine !== undefined) this.last = progress.lastLine;
  }

  /** @internal none left (or the connection dropped: the server killed them). */
  end(): void {
    if (this.finished) return;
    this.finished = true;
    this.known = [];
    this.resolveDone();
  }
}
