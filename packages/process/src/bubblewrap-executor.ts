import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
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

/** The last PATH bwrap was found on, and where (asked on every sandboxed spawn). */
let found: { pathEnv: string; bwrap: string } | undefined;

/**
 * Finds `bwrap` on PATH, or undefined. A hit is remembered for the same PATH (one that disappears
 * later fails its supervisor's start, which marks the sandbox broken); a miss is looked for again.
 */
export function findBwrap(pathEnv = process.env.PATH ?? ''): string | undefined {
  if (found?.pathEnv === pathEnv) return found.bwrap;
  for (const dir of pathEnv.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, 'bwrap');
    try {
      accessSync(candidate, constants.X_OK);
      found = { pathEnv, bwrap: candidate };
      return candidate;
    } catch {
      // keep looking
    }
  }
  return undefined;
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
