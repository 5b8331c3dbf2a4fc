import { randomBytes } from 'node:crypto';
// eslint-disable-next-line no-restricted-imports -- reads the user's trust store, in a directory no sandbox can write (README: Trust store)
import { chmod, lstat, mkdir, open, readFile, realpath, rename, rm, stat } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { basename, dirname, isAbsolute, join, resolve, sep } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import type { Logger } from './logger.js';

/**
 * Why a file conch would load from a workspace was not loaded. The workspace is writable by the
 * sandboxed commands conch runs there, so a file that is new or changed since conch last ran there
 * may have been written by one of them.
 */
export const UNTRUSTED_REASONS = {
  new: 'new since conch last ran in this workspace',
  changed: 'changed since conch last ran in this workspace',
  removed: 'removed since conch last ran in this workspace',
  tooLarge: 'too large to pin (more than 4000 files or 64 MB): never trusted automatically',
} as const;

export type UntrustedReason = (typeof UNTRUSTED_REASONS)[keyof typeof UNTRUSTED_REASONS];

/** A plugin package or config file that conch found in a workspace and did not load. */
export interface UntrustedItem {
  kind: 'plugin' | 'config';
  /** Where it is: the package directory or the config file (real paths; a link's own place for a link). */
  path: string;
  /** The package's name, for a plugin. */
  package?: string;
  reason: UntrustedReason;
}

/**
 * The trust store's file: `$XDG_STATE_HOME/conch/trust.json`, else `~/.local/state/conch/trust.json`.
 * Outside every workspace, so no sandboxed command can write it.
 */
export function defaultTrustStorePath(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_STATE_HOME;
  const state = xdg && isAbsolute(xdg) ? xdg : join(env.HOME || homedir(), '.local', 'state');
  return join(state, 'conch', 'trust.json');
}

/** `path` with every symbolic link resolved, as far as it exists (the rest appended as written). */
export async function realPathOf(path: string): Promise<string> {
  const absolute = resolve(path);
  const rest: string[] = [];
  let current = absolute;
  for (;;) {
    try {
      const real = await realpath(current);
      return rest.length === 0 ? real : join(real, ...rest.reverse());
    } catch {
      const parent = dirname(current);
      if (parent === current) return absolute;
      rest.push(basename(current));
      current = parent;
    }
  }
}

/** Whether `path` is `dir` or lies under it, comparing the strings as they are (no resolution). */
export function isWithin(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep);
}

/**
 * Whether `path` lies inside `workspace` (or is it), once both are resolved to real paths: a link
 * inside the workspace that points out is outside; a link elsewhere that points in is inside.
 */
export async function insideWorkspace(path: string, workspace: string): Promise<boolean> {
  const [real, root] = await Promise.all([realPathOf(path), realPathOf(workspace)]);
  return isWithin(real, root);
}

const pinSchema = z.object({
  kind: z.enum(['plugin', 'config']),
  /** `sha256:<hex>` of the contents; `link:<real path>` for a package reached through a link; `none` for no config file. */
  digest: z.string(),
  package: z.string().optional(),
  pinnedAt: z.string(),
});

const stateSchema = z.object({
  version: z.literal(1),
  /** Real paths of the workspaces conch has run in (its sandboxes could write there). */
  workspaces: z.record(z.string(), z.object({ since: z.string() })),
  /** What conch last loaded, by path: plugin package directories and config files inside those workspaces. */
  pins: z.record(z.string(), pinSchema),
});

export type TrustPin = z.infer<typeof pinSchema>;
export type TrustState = z.infer<typeof stateSchema>;

const emptyState = (): TrustState => ({ version: 1, workspaces: {}, pins: {} });

/** What was logged about a store file already (once per process and file). */
const logged = new Set<string>();

export interface TrustStoreOptions {
  /** The store's file. Default: defaultTrustStorePath(). */
  file?: string;
  logger?: Logger;
  /** How long an update waits for another conch process holding the store's lock. Default 5 000 ms. */
  lockTimeoutMs?: number;
}

/**
 * conch's record of what it last loaded in each workspace: one JSON file (mode 0600, in a 0700
 * directory), read whole, rewritten whole under a lock file (`<file>.lock`) through a temp file and
 * a rename, so a reader never sees half a file and two conch processes never lose each other's
 * pins. A missing or corrupt file reads as empty (logged once per process): every workspace is
 * then new to conch.
 */
export class TrustStore {
  readonly file: string;
  private readonly logger: Logger | undefined;
  private readonly lockTimeoutMs: number;

  constructor(options: TrustStoreOptions = {}) {
    this.file = resolve(options.file ?? defaultTrustStorePath());
    this.logger = options.logger;
    this.lockTimeoutMs = options.lockTimeoutMs ?? 5_000;
  }

  /** The store as it is on disk now; empty when missing or corrupt. Never throws. */
  async read(): Promise<TrustState> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') {
        this.once(
          'missing',
          'info',
          `conch trust store ${this.file} does not exist yet: every workspace is new to it`,
        );
      } else {
        this.once(
          'unreadable',
          'warn',
          `conch trust store ${this.file} cannot be read (${(error as Error).message}): treated as empty, so every workspace counts as new to conch`,
        );
      }
      return emptyState();
    }
    let parsed: ReturnType<typeof stateSchema.safeParse>;
    try {
      parsed = stateSchema.safeParse(JSON.parse(text));
    } catch (error) {
      this.corrupt((error as Error).message);
      return emptyState();
    }
    if (!parsed.success) {
      this.corrupt(
        parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; '),
      );
      return emptyState();
    }
    return parsed.data;
  }

  /**
   * Reads the store under its lock, applies `change`, forgets workspaces under the system temp dir
   * that no longer exist (and the pins of no remaining workspace), and writes it back atomically.
   * False (logged) when it could not be written: pins are then not kept.
   */
  async update(change: (state: TrustState) => void): Promise<boolean> {
    const dir = dirname(this.file);
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await chmod(dir, 0o700);
    } catch (error) {
      this.logger?.warn(
        { err: error, store: this.file },
        `conch trust store directory ${dir} cannot be made: pins are not kept, so this workspace will count as new again`,
      );
      return false;
    }
    const release = await this.lock();
    if (!release) return false;
    try {
      const state = await this.read();
      change(state);
      await forgetGoneTempWorkspaces(state);
      await writeAtomically(this.file, `${JSON.stringify(state, null, 2)}\n`);
      return true;
    } catch (error) {
      this.logger?.warn(
        { err: error, store: this.file },
        `conch trust store ${this.file} cannot be written: pins are not kept, so this workspace will count as new again`,
      );
      return false;
    } finally {
      await release();
    }
  }

  private corrupt(detail: string): void {
    this.once(
      'corrupt',
      'warn',
      `conch trust store ${this.file} is not a valid trust store (${detail}): treated as empty, so every workspace counts as new to conch; it is rewritten at the next pin`,
    );
  }

  private once(what: string, level: 'info' | 'warn', message: string): void {
    const key = `${this.file}\0${what}`;
    if (logged.has(key)) return;
    logged.add(key);
    this.logger?.[level]({ store: this.file }, message);
  }

  /** Takes `<file>.lock` (O_EXCL); a lock whose process is gone, or older than 30 s, is broken. */
  private async lock(): Promise<(() => Promise<void>) | undefined> {
    const lockFile = `${this.file}.lock`;
    const deadline = performance.now() + this.lockTimeoutMs;
    for (;;) {
      try {
        const handle = await open(lockFile, 'wx', 0o600);
        try {
          await handle.writeFile(`${process.pid}\n`);
        } finally {
          await handle.close();
        }
        return () => rm(lockFile, { force: true });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
          this.logger?.warn(
            { err: error, store: this.file },
            `conch trust store lock ${lockFile} cannot be taken: pins are not kept`,
          );
          return undefined;
        }
      }
      if (await isStale(lockFile)) {
        await rm(lockFile, { force: true });
        continue;
      }
      if (performance.now() > deadline) {
        this.logger?.warn(
          { store: this.file },
          `conch trust store lock ${lockFile} is held by another conch process for over ${this.lockTimeoutMs} ms: pins are not kept`,
        );
        return undefined;
      }
      await delay(10 + Math.floor(Math.random() * 20));
    }
  }
}

async function isStale(lockFile: string): Promise<boolean> {
  try {
    const [text, info] = await Promise.all([readFile(lockFile, 'utf8'), stat(lockFile)]);
    if (Date.now() - info.mtimeMs > 30_000) return true;
    const pid = Number.parseInt(text, 10);
    if (!Number.isInteger(pid) || pid <= 0) return Date.now() - info.mtimeMs > 1_000;
    try {
      process.kill(pid, 0);
      return false;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'ESRCH';
    }
  } catch {
    return false;
  }
}

async function writeAtomically(file: string, text: string): Promise<void> {
  const temp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const handle = await open(temp, 'wx', 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}

/**
 * Test runs and scratch sessions leave a workspace per temp dir: those under the system temp dir
 * that are gone are forgotten (a workspace elsewhere is kept even when it is missing, e.g. on an
 * unmounted disk: forgetting it would make it new to conch again), and so are the pins that lie
 * in no remaining workspace.
 */
async function forgetGoneTempWorkspaces(state: TrustState): Promise<void> {
  const temp = await realPathOf(tmpdir());
  await Promise.all(
    Object.keys(state.workspaces).map(async (workspace) => {
      if (workspace === temp || !isWithin(workspace, temp)) return;
      const gone = await lstat(workspace).then(
        () => false,
        (error: NodeJS.ErrnoException) => error.code === 'ENOENT',
      );
      if (gone) delete state.workspaces[workspace];
    }),
  );
  const kept = Object.keys(state.workspaces);
  for (const path of Object.keys(state.pins)) {
    if (!kept.some((workspace) => isWithin(path, workspace))) delete state.pins[path];
  }
}
