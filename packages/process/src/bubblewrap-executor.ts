import { findBwrap } from '@conch/sandbox';
import { BwrapNotFoundError } from './errors.js';
import { LocalExecutor, type ExecutorSpawnRequest } from './executor.js';

export interface BubblewrapOptions {
  /** Directories the command may write (the workspace). Default: the spawn's cwd. */
  writable?: readonly string[];
  /** Path of bwrap. Default: found on PATH. */
  bwrap?: string;
  /** Share the network namespace (default true; false adds --unshare-net). */
  network?: boolean;
  /** Extra bwrap arguments inserted before `--`. */
  extraArgs?: readonly string[];
}

/**
 * Runs each command inside its own bubblewrap: the root filesystem read-only, the workspace (and
 * /tmp) writable, a private PID namespace (`--unshare-pid`) and `--die-with-parent`, so nothing it
 * starts can outlive it or escape the kill — not even a `setsid` double fork.
 *
 * This is the per-command sandbox of the cli's `sandbox: true` config: one bwrap per command,
 * started by the manager's supervisor (`prepare` wraps the request, so the host does not fork).
 * Sandbox profiles (`spawn(..., { sandbox })`) are the cheaper wall: the namespaces are set up
 * once, around the supervisor itself.
 */
export class BubblewrapExecutor extends LocalExecutor {
  override readonly name = 'bubblewrap';
  private readonly bwrap: string;
  private readonly options: BubblewrapOptions;

  constructor(options: BubblewrapOptions = {}) {
    super();
    const bwrap = options.bwrap ?? findBwrap();
    if (!bwrap) throw new BwrapNotFoundError('BubblewrapExecutor');
    this.bwrap = bwrap;
    this.options = options;
  }

  /** The bwrap argv for a request (exposed for tests and logs). */
  bwrapArgs(request: ExecutorSpawnRequest): string[] {
    const writable = this.options.writable ?? [request.cwd];
    const args = [
      '--ro-bind',
      '/',
      '/',
      '--dev',
      '/dev',
      '--proc',
      '/proc',
      '--tmpfs',
      '/tmp',
      '--unshare-pid',
      '--die-with-parent',
      '--new-session',
    ];
    for (const dir of writable) args.push('--bind', dir, dir);
    if (this.options.network === false) args.push('--unshare-net');
    args.push(...(this.options.extraArgs ?? []), '--chdir', request.cwd, '--', request.file, ...request.args);
    return args;
  }

  override prepare(request: ExecutorSpawnRequest): ExecutorSpawnRequest {
    return { ...request, file: this.bwrap, args: this.bwrapArgs(request) };
  }
}
