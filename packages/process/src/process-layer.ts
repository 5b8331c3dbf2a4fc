import type { Writable } from 'node:stream';
import { token, type PluginScope, type ProcessManagerService } from '@conch/core';
import type { SandboxKind } from '@conch/sandbox';
import type { LeftoverHandle } from './leftover-handle.js';
import type { ProcessManagerStatus } from './process-manager.js';
import type { OutputEvent, ProcessResult } from './process-result.js';
import type { SpawnOptions } from './spawn-options.js';
import type { SpillReport } from './spill-sink.js';

/**
 * The part of the process layer a command runner uses (what cli's runCommand and background tasks
 * call), so a runner works the same on `ProcessManager` (this machine) and on a layer that runs
 * processes elsewhere (@conch/exec-server's `RemoteProcessManager`: an ssh host, a container, a
 * pod). ProcessManager and ManagedProcess satisfy these interfaces as they are.
 */
export interface OutputStore {
  /** Bytes at `offset` of everything written so far. */
  read(offset: number, length: number): Promise<Uint8Array>;
  readonly totalBytes: number;
  /** The file holding every byte, once there is one (a path in the target for a remote process). */
  readonly path: string | undefined;
  /**
   * What the file holds (bytes kept of bytes produced, and why they differ: a full disk, a spill
   * limit, no writable directory). Optional: a layer that cannot tell leaves it out.
   */
  report?(): SpillReport;
}

export interface ProcessHandle {
  readonly id: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly label: string;
  readonly cwd: string;
  readonly cookie: string;
  readonly startedAt: number;
  /** The pid (in the target's pid namespace for a remote process); undefined until started. */
  readonly pid: number | undefined;
  readonly spawned: Promise<number | undefined>;
  /** Never rejects. */
  readonly result: Promise<ProcessResult>;
  readonly sandbox: SandboxKind;
  readonly stdin: Writable | null;
  /** With spill 'combined': stdout and stderr interleaved. */
  readonly combined: OutputStore | undefined;
  readonly isRunning: boolean;
  readonly exitCode: number | null;
  onOutput(listener: (event: OutputEvent) => void): () => void;
  kill(): Promise<ProcessResult>;
  setTimeout(ms: number | undefined): void;
  attachSignal(signal: AbortSignal): void;
  detachSignal(): void;
  materializeOutput(): Promise<string | undefined>;
  lastLine(): string | undefined;
}

/** Where a layer that runs processes on another machine runs them (after connecting). */
export interface ProcessTarget {
  /** Where processes run, as results name it: 'ssh:me@dev:22', 'podman:box', 'kubernetes:ns/pod'. */
  target: string;
  /** The workspace, absolute in the target: relative cwds resolve against it. */
  cwd: string;
  /** The target user's home (`~` in paths such as cli's extraPaths). */
  home?: string;
  /** The PATH commands get there (what cli's extraPaths are prepended to). */
  path?: string;
}

export interface ProcessLayer extends Omit<ProcessManagerService, 'kill'> {
  /**
   * Kills one process's whole tree; resolves once it has ended. The local ProcessManager resolves
   * whether the id was known (pai's `kill` -> bool, and takes a `timeout`); a layer that cannot
   * tell resolves undefined.
   */
  kill(id: string): Promise<boolean | void>;
  readonly disposed: boolean;
  /** A remote layer's target name ('ssh:me@dev:22'); absent for this machine. */
  readonly target?: string;
  spawn(command: string, args?: readonly string[], options?: SpawnOptions): ProcessHandle;
  adoptLeftovers(proc: ProcessHandle | string): LeftoverHandle;
  get(id: string): ProcessHandle | undefined;
  status(): Promise<ProcessManagerStatus>;
  /**
   * Present on a layer whose processes run on another machine, container or pod: where (connecting
   * first). Paths, cwd and env of its processes are the target's; a runner resolves relative cwds
   * against `cwd` and checks directories with `directoryState`. Absent: this machine.
   */
  remote?(): Promise<ProcessTarget>;
  /** What `path` is where the processes run (a remote layer's cwd check). */
  directoryState?(path: string): Promise<'directory' | 'not-directory' | 'missing'>;
}

/**
 * The process layer commands run through when it is not the registry's own ProcessManager: a
 * remote target's (provided by @conch/exec-server's `executor` plugin), or a manager that wraps
 * every command in bubblewrap. The token's name is the key, so a provider need not import this
 * package's copy of it.
 */
export const PROCESS_LAYER = token<ProcessLayer>('conch.process.ProcessLayer');

/**
 * The process layer a call runs through: the one provided under `PROCESS_LAYER` (the `executor`
 * plugin's, when exposed), else `fallback` (the plugin's `ensureProcessManager(ctx)`). Resolve it
 * per call, so that exposure order does not matter. A provided layer that was disposed is still
 * returned (its spawn refuses): a command judged for a target never falls back to this machine.
 */
export function resolveProcessLayer(
  ctx: Pick<PluginScope, 'resolveOptional'>,
  fallback: ProcessLayer,
): ProcessLayer {
  return ctx.resolveOptional(PROCESS_LAYER) ?? fallback;
}
