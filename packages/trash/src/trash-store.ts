import { constants } from 'node:fs';
import { chmod, cp, lstat, mkdir, readdir, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import {
  readRegularFileSync,
  type Logger,
  type TrashDialect,
  type TrashEntryInfo,
  type TrashService,
} from '@conch/core';
import { TrashError } from './errors/trash-error.js';
import { safeRmFunction } from './safe-rm.js';

/** Ids the shell function and `put` create: `<epoch seconds>-<pid>-<n>`. Nothing else is an entry. */
const ID = /^\d{1,12}-\d{1,10}-\d{1,4}$/;
const DAY_MS = 24 * 3600 * 1000;
/** A `.path` without its item older than this is a move that never happened (crash, full disk). */
const STALE_CLAIM_MS = 3600 * 1000;

export interface TrashStoreOptions {
  /** The project's trash directory (absolute; created on first use, mode 0700). */
  dir: string;
  logger?: Logger;
}

interface Located {
  info: TrashEntryInfo;
  /** The path as the shell recorded it, byte for byte (restore goes back there). */
  raw: Buffer;
}

/** A path given as raw bytes, as a string when it is valid UTF-8 (fs accepts either). */
function fsPath(raw: Buffer): string | Buffer {
  const text = raw.toString('utf8');
  return Buffer.from(text, 'utf8').equals(raw) ? text : raw;
}

/** The parent directory of a raw absolute path ('/' for a top-level name). */
function parentOf(raw: Buffer): Buffer {
  let end = raw.length;
  while (end > 1 && raw[end - 1] === 0x2f) end--;
  const slash = raw.lastIndexOf(0x2f, end - 1);
  return slash <= 0 ? Buffer.from('/') : raw.subarray(0, slash);
}

function kindOf(st: { isSymbolicLink(): boolean; isDirectory(): boolean; isFile(): boolean }) {
  return st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'directory' : st.isFile() ? 'file' : 'other';
}

function errno(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/**
 * The per-project trash: a directory of entries the safe-rm shell function (and `put`) create, and
 * the operations the `trash` tool offers on them. Every method reads the directory afresh, so
 * entries written by any shell at any time are seen; nothing is cached.
 */
export class TrashStore implements TrashService {
  readonly dir: string;
  private readonly logger: Logger | undefined;
  private counter = 0;

  constructor(options: TrashStoreOptions) {
    this.dir = resolve(options.dir);
    this.logger = options.logger;
  }

  shellFunction(dialect: TrashDialect): string {
    return safeRmFunction(dialect, this.dir);
  }

  async list(): Promise<TrashEntryInfo[]> {
    return (await this.scan()).map((e) => e.info);
  }

  /** One entry, or undefined. */
  async get(id: string): Promise<TrashEntryInfo | undefined> {
    return (await this.locate(id))?.info;
  }

  async restore(id: string, options: { to?: string } = {}): Promise<TrashEntryInfo> {
    const entry = await this.locate(id);
    if (!entry) {
      const recent = (await this.list()).slice(0, 10).map((e) => `${e.id} (${e.originalPath})`);
      throw new TrashError(
        'UNKNOWN_TRASH_ENTRY',
        id,
        `no trash entry has the id ${JSON.stringify(id)} (${recent.length ? `newest: ${recent.join(', ')}` : 'the trash is empty'}). ` +
          "Ids come from trash({ action: 'list' })",
      );
    }
    const target = options.to === undefined ? entry.raw : Buffer.from(resolve(options.to));
    const shown = fsPath(target).toString();
    let existing: string | undefined;
    try {
      existing = kindOf(await lstat(fsPath(target)));
    } catch (error) {
      if (errno(error) !== 'ENOENT') {
        throw new TrashError(
          'TRASH_RESTORE_FAILED',
          id,
          `cannot restore ${id} to ${shown}: ${(error as Error).message}`,
          error,
        );
      }
    }
    if (existing !== undefined) {
      throw new TrashError(
        'TRASH_RESTORE_CONFLICT',
        id,
        `cannot restore ${id} to ${shown}: a ${existing} exists there now, and restore never overwrites. ` +
          `Move or remove it first, or restore elsewhere with { action: 'restore', id: '${id}', to: '<path>' }`,
      );
    }
    const item = join(this.dir, id);
    try {
      await mkdir(fsPath(parentOf(target)), { recursive: true });
      await moveAcross(item, fsPath(target));
    } catch (error) {
      throw new TrashError(
        'TRASH_RESTORE_FAILED',
        id,
        `cannot restore ${id} to ${shown}: ${(error as Error).message}`,
        error,
      );
    }
    await unlink(join(this.dir, `${id}.path`)).catch(() => undefined);
    this.logger?.info({ id, to: shown }, 'trash entry restored');
    return { ...entry.info, originalPath: resolve(shown) };
  }

  async empty(options: { olderThanDays?: number } = {}): Promise<{ removed: number }> {
    const cutoff =
      options.olderThanDays === undefined ? Infinity : Date.now() - options.olderThanDays * DAY_MS;
    let removed = 0;
    for (const { info } of await this.scan({ stale: true })) {
      if (options.olderThanDays !== undefined && info.deletedAt > cutoff) continue;
      await forceRemove(join(this.dir, info.id));
      await rm(join(this.dir, `${info.id}.path`), { force: true });
      removed++;
    }
    this.logger?.info({ removed, olderThanDays: options.olderThanDays }, 'trash emptied');
    return { removed };
  }

  async put(path: string): Promise<TrashEntryInfo> {
    const abs = resolve(path);
    let st;
    try {
      st = await lstat(abs);
    } catch (error) {
      throw new TrashError(
        'TRASH_PUT_FAILED',
        abs,
        `cannot move ${abs} to the trash: ${(error as Error).message}`,
        error,
      );
    }
    if (abs === '/' || this.dir === abs || this.dir.startsWith(`${abs}/`)) {
      throw new TrashError(
        'TRASH_PUT_FAILED',
        abs,
        `cannot move ${abs} to the trash: it contains the trash (${this.dir})`,
      );
    }
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const seconds = Math.floor(Date.now() / 1000);
    let id: string | undefined;
    for (let n = 1; n <= 1000 && id === undefined; n++) {
      const candidate = `${seconds}-${process.pid}-${++this.counter % 10_000 || 1}`;
      try {
        // 'wx': created here or not at all, so a shell's rm never shares the id.
        await writeFile(join(this.dir, `${candidate}.path`), abs, { flag: 'wx', mode: 0o600 });
        id = candidate;
      } catch (error) {
        if (errno(error) !== 'EEXIST') {
          throw new TrashError(
            'TRASH_PUT_FAILED',
            abs,
            `cannot move ${abs} to the trash: ${(error as Error).message}`,
            error,
          );
        }
      }
    }
    if (id === undefined)
      throw new TrashError('TRASH_PUT_FAILED', abs, `cannot move ${abs} to the trash: no free id`);
    try {
      await moveAcross(abs, join(this.dir, id));
    } catch (error) {
      await unlink(join(this.dir, `${id}.path`)).catch(() => undefined);
      throw new TrashError(
        'TRASH_PUT_FAILED',
        abs,
        `cannot move ${abs} to the trash: ${(error as Error).message}`,
        error,
      );
    }
    return {
      id,
      originalPath: abs,
      deletedAt: Date.now(),
      kind: kindOf(st),
      ...(st.isDirectory() ? {} : { sizeBytes: st.size }),
    };
  }

  private async locate(id: string): Promise<Located | undefined> {
    if (!ID.test(id)) return undefined;
    return this.read(id);
  }

  /** Complete entries, newest first; `stale` also yields claims whose move never happened. */
  private async scan(options: { stale?: boolean } = {}): Promise<Located[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (error) {
      if (errno(error) === 'ENOENT') return [];
      throw error;
    }
    const out: Located[] = [];
    for (const name of names) {
      if (!name.endsWith('.path')) continue;
      const id = name.slice(0, -5);
      if (!ID.test(id)) continue;
      const entry = await this.read(id, options.stale === true);
      if (entry) out.push(entry);
    }
    return out.sort((a, b) => b.info.deletedAt - a.info.deletedAt || (a.info.id < b.info.id ? 1 : -1));
  }

  private async read(id: string, stale = false): Promise<Located | undefined> {
    const meta = join(this.dir, `${id}.path`);
    let raw: Buffer;
    let deletedAt: number;
    try {
      // The trash is writable inside the sandbox: its records are read only as regular files.
      raw = readRegularFileSync(meta, { maxBytes: 1024 * 1024 });
      deletedAt = (await stat(meta)).mtimeMs;
    } catch {
      return undefined;
    }
    let item;
    try {
      item = await lstat(join(this.dir, id));
    } catch {
      // Claimed but not (yet) moved: an rm in progress, or one that failed long ago.
      if (stale && Date.now() - deletedAt > STALE_CLAIM_MS) {
        await rm(meta, { force: true });
      }
      return undefined;
    }
    const kind = kindOf(item);
    return {
      raw,
      info: {
        id,
        originalPath: resolve(raw.toString('utf8')),
        deletedAt: Math.round(deletedAt),
        kind,
        ...(kind === 'directory' ? {} : { sizeBytes: item.size }),
      },
    };
  }
}

/** rename, or copy + remove across file systems (EXDEV), keeping modes, times and symlinks as they are. */
async function moveAcross(from: string | Buffer, to: string | Buffer): Promise<void> {
  try {
    await rename(from, to);
    return;
  } catch (error) {
    if (errno(error) === 'EACCES' && (await renameProtectedDirectory(from, to))) return;
    if (errno(error) !== 'EXDEV') throw error;
  }
  const src = from.toString();
  const dst = to.toString();
  await cp(src, dst, {
    recursive: true,
    preserveTimestamps: true,
    verbatimSymlinks: true,
    errorOnExist: true,
    force: false,
    mode: constants.COPYFILE_EXCL,
  });
  await forceRemove(src);
}

/**
 * Moving a directory to another parent rewrites its `..` entry, which needs write permission on
 * the directory itself: a write-protected one (a read-only checkout, a module cache that
 * toolchains make 0555) fails with EACCES for anyone but root. Its owner may open it for the
 * move: it is made writable, moved, and given its mode back (emptying the trash opens the rest).
 * Returns false (nothing changed) when that is not the case or the move still fails.
 */
async function renameProtectedDirectory(from: string | Buffer, to: string | Buffer): Promise<boolean> {
  let st;
  try {
    st = await lstat(from);
  } catch {
    return false;
  }
  if (!st.isDirectory() || (st.mode & 0o200) !== 0 || st.uid !== process.getuid?.()) return false;
  const mode = st.mode & 0o7777;
  try {
    await chmod(from, mode | 0o200);
  } catch {
    return false;
  }
  try {
    await rename(from, to);
  } catch {
    await chmod(from, mode).catch(() => undefined);
    return false;
  }
  await chmod(to, mode).catch(() => undefined);
  return true;
}

/** rm -rf that also takes write-protected directories (their modes are opened first). */
async function forceRemove(path: string): Promise<void> {
  try {
    await rm(path, { recursive: true, force: true });
  } catch (error) {
    if (errno(error) !== 'EACCES' && errno(error) !== 'EPERM') throw error;
    await openUp(path);
    await rm(path, { recursive: true, force: true });
  }
}

async function openUp(path: string): Promise<void> {
  let st;
  try {
    st = await lstat(path);
  } catch {
    return;
  }
  if (!st.isDirectory()) return;
  await chmod(path, 0o700).catch(() => undefined);
  const names = await readdir(path).catch(() => [] as string[]);
  for (const name of names) await openUp(join(path, name));
}
