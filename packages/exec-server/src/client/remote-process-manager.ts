import { randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import type { EventBus, Logger, ProcessInfo } from '@conch/core';
import {
  InvalidSpawnOptionError,
  LeftoverAdoptionError,
  ProcessManagerDisposedError,
  processEvents,
  toProcessInfo,
  type LeftoverHandle,
  type ProcessManagerStatus,
  type SpawnOptions,
  validateSpawnArguments,
} from '@conch/process';
import type { ProcessHandle, ProcessLayer, ProcessTarget } from '../process-layer.js';
import type { ExecClient } from './exec-client.js';
import { RemoteLeftovers } from './remote-leftovers.js';
import { RemoteProcess, type RemoteProcessOwner, type RemoteProcessResult } from './remote-process.js';

export interface RemoteProcessManagerOptions {
  client: ExecClient;
  events?: EventBus | undefined;
  logger?: Logger | undefined;
  /** Finished processes kept for list()/get(). Default 50. */
  historyLimit?: number;
}

/**
 * @conch/process's process layer in a target: `spawn` returns a RemoteProcess that behaves like a
 * ManagedProcess, but capture, spill files (every byte in the target's spill file), process groups,
 * env cookies, timeouts, kills and leftovers are the target's ProcessManager's, in the exec server.
 * Options are validated here as the local manager does (synchronously: NUL bytes, empty command,
 * bad timeout), so a runner sees the same errors wherever it runs.
 *
 * Paths, cwd and env are the target's: `cwd` resolves against the target workspace, `env` is added
 * to the server's environment (the target user's), results name `target`. Events (`process.started`,
 * `process.output`, `process.exited`) go to the host's bus with this manager's ids; output is
 * streamed from the target only while someone listens.
 */
export class RemoteProcessManager implements ProcessLayer {
  readonly client: ExecClient;
  readonly events: EventBus | undefined;
  readonly logger: Logger | undefined;
  /** Prefix of this manager's process ids (several managers may share one client). */
  readonly id = randomBytes(3).toString('hex');
  private readonly options: RemoteProcessManagerOptions;
  private readonly processes = new Map<string, RemoteProcess>();
  private readonly live = new Set<RemoteProcess>();
  private readonly leftovers = new Map<string, RemoteLeftovers>();
  private readonly owner: RemoteProcessOwner;
  private readonly unsubscribe: (() => void)[];
  private counter = 0;
  private disposing: Promise<void> | undefined;

  constructor(options: RemoteProcessManagerOptions) {
    this.options = options;
    this.client = options.client;
    this.events = options.events;
    this.logger = options.logger;
    this.owner = {
      client: this.client,
      events: this.events,
      logger: this.logger,
      started: (proc) => this.onStarted(proc),
      finished: (proc, result) => this.onFinished(proc, result),
    };
    const mine = (id: string) => (id.startsWith(`${this.id}-`) ? this.processes.get(id) : undefined);
    this.unsubscribe = [
      this.client.on('proc.started', (p) => mine(p.id)?.onStarted(p.pid, p.cookie, p.sandbox)),
      this.client.on('proc.output', (p) => mine(p.id)?.onChunk(p.stream, p.data, p.skipped)),
      this.client.on('proc.progress', (p) => mine(p.id)?.onProgress(p.bytes, p.outputFile, p.lastLine)),
      this.client.on('proc.exited', (p) => mine(p.id)?.onExited(p.result)),
      this.client.on('leftovers.progress', (p) => this.leftovers.get(p.id)?.onProgress(p)),
      this.client.on('leftovers.done', (p) => this.leftovers.get(p.id)?.end()),
      this.client.onSessionEnded((error, session) => this.onSessionEnded(error, session)),
      this.client.participate({
        processes: (session) => [
          ...[...this.live].filter((p) => p.session === session).map((p) => p.id),
          ...[...this.leftovers.keys()].filter((id) => this.processes.get(id)?.session === session),
        ],
        streamed: (session) =>
          Object.fromEntries(
            [...this.live].filter((p) => p.session === session).map((p) => [p.id, p.streamedBytes]),
          ),
        attached: ({ unknown }) => {
          for (const id of unknown) {
            if (!id.startsWith(`${this.id}-`)) continue;
            this.processes.get(id)?.onNeverArrived();
            this.leftovers.get(id)?.end();
          }
        },
        describe: (session) =>
          [...this.live]
            .filter((p) => p.session === session)
            .map((p) => `process ${p.id} (${p.label.length > 80 ? `${p.label.slice(0, 77)}...` : p.label})`),
      }),
    ];
  }

  get target(): string {
    return this.client.target;
  }

  get disposed(): boolean {
    return this.disposing !== undefined;
  }

  /** The target workspace, once connected (relative cwds resolve against it). */
  get cwd(): string | undefined {
    return this.client.lastConnection?.init.cwd;
  }

  spawn(command: string, args: readonly string[] = [], options: SpawnOptions = {}): RemoteProcess {
    if (this.disposing) throw new ProcessManagerDisposedError();
    validateSpawnArguments(command, args, options);
    if (options.executor) {
      // An executor object is a host thing; in a target the server's process layer is the executor.
      throw new InvalidSpawnOptionError(
        'executor',
        `no executor: processes of ${this.target} run in the target (its sandbox profiles apply there)`,
        options.executor.name,
      );
    }
    const id = `${this.id}-r${++this.counter}`;
    const base = this.cwd;
    const cwd =
      options.cwd === undefined ? (base ?? '.') : base ? posix.resolve(base, options.cwd) : options.cwd;
    const proc = new RemoteProcess({ owner: this.owner, id, command, args, cwd, options });
    this.processes.set(id, proc);
    this.live.add(proc);
    return proc;
  }

  adoptLeftovers(proc: ProcessHandle | string): LeftoverHandle {
    const p = typeof proc === 'string' ? this.processes.get(proc) : this.processes.get(proc.id);
    if (!p || (typeof proc !== 'string' && p !== proc)) {
      throw new LeftoverAdoptionError(
        'proc',
        'a process this manager spawned (or its id)',
        typeof proc === 'string' ? proc : proc?.id,
      );
    }
    if (p.isRunning) {
      throw new LeftoverAdoptionError('proc', 'a process that has ended (await proc.result first)', p.id);
    }
    let handle = this.leftovers.get(p.id);
    if (!handle) {
      // The result's list: the target's pids when the command ended (progress updates it).
      handle = new RemoteLeftovers(p, p.finalResult?.leftRunning.map((l) => l.pid) ?? []);
      this.leftovers.set(p.id, handle);
      void handle.done.then(() => this.leftovers.delete(p.id));
    }
    return handle;
  }

  get(id: string): RemoteProcess | undefined {
    return this.processes.get(id);
  }

  list(): ProcessInfo[] {
    return [...this.processes.values()].map(toProcessInfo);
  }

  async kill(id: string): Promise<void> {
    await this.processes.get(id)?.kill();
  }

  /** Kills every process this manager runs (and, in the target, sweeps their cookies). */
  async killAll(): Promise<void> {
    await Promise.all([...this.live].map((p) => p.kill()));
    await Promise.all([...this.leftovers.values()].map((h) => h.kill()));
  }

  /** The target's process layer status (connects if needed). */
  async status(): Promise<ProcessManagerStatus> {
    const { processes } = await this.client.request('server.status', {});
    return processes;
  }

  /** The target workspace (connecting first): what a runner resolves relative cwds against. */
  async workspace(): Promise<string> {
    return (await this.client.connect()).init.cwd;
  }

  /** Where processes run (connecting first): the target's name, workspace, home and PATH. */
  async remote(): Promise<ProcessTarget> {
    const { hello, init } = await this.client.connect();
    return {
      target: this.target,
      cwd: init.cwd,
      home: hello.home,
      ...(init.path ? { path: init.path } : {}),
    };
  }

  /**
   * What `path` is in the target: a runner's cwd check (cli checks a command's cwd before it
   * plans the run; with a remote layer it must ask the target, not this machine).
   */
  async directoryState(path: string): Promise<'directory' | 'not-directory' | 'missing'> {
    try {
      const stat = await this.client.request('fs.stat', { path, policy: { allowOutside: true } });
      return stat.type === 'directory' || (stat.type === 'symlink' && (await this.followsToDirectory(path)))
        ? 'directory'
        : 'not-directory';
    } catch (error) {
      if ((error as { code?: string }).code === 'FILE_NOT_FOUND') return 'missing';
      throw error;
    }
  }

  /** Connects now instead of on the first spawn (the deploy, if any, and the server's start). */
  warmUp(): void {
    void this.client.connect().catch((error: unknown) => {
      this.logger?.warn({ err: error, target: this.target }, 'exec server: warm-up connection failed');
    });
  }

  /** Kills everything this manager started; the connection stays (the executor closes it). */
  dispose(): Promise<void> {
    this.disposing ??= (async () => {
      await this.killAll();
      for (const off of this.unsubscribe) off();
    })();
    return this.disposing;
  }

  private async followsToDirectory(path: string): Promise<boolean> {
    const listed = await this.client
      .request('fs.list', { path, limit: 1, policy: { allowOutside: true } })
      .then(
        () => true,
        () => false,
      );
    return listed;
  }

  private onStarted(proc: RemoteProcess): void {
    processEvents.started(this.events, proc);
  }

  private onFinished(proc: RemoteProcess, result: RemoteProcessResult): void {
    this.live.delete(proc);
    processEvents.exited(this.events, proc, result);
    processEvents.trimHistory(this.processes, this.options.historyLimit ?? 50, (id) =>
      this.leftovers.has(id),
    );
  }

  /** The server of `session` is gone, and with it what ran there (killed at once or at its grace period's end). */
  private onSessionEnded(error: Error, session: number): void {
    for (const proc of [...this.live]) {
      // A process whose spawn was never sent fails through its spawn request.
      if (proc.session === session) proc.onSessionEnded(error);
    }
    for (const [id, handle] of [...this.leftovers]) {
      if (this.processes.get(id)?.session === session) handle.end();
    }
  }
}
