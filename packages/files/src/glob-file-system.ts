import type { GlobOptions as TinyGlobOptions } from 'tinyglobby';
import type { EntryType } from './file-operations.js';
import type { FileStats, FileSystemBackend } from './file-system-backend.js';

type Callback<T> = (error: NodeJS.ErrnoException | null, value?: T) => void;

/** A `fs.Dirent` look-alike of a backend entry (what the crawler asks of an entry). */
class Entry {
  constructor(
    readonly name: string,
    private readonly type: EntryType,
  ) {}
  isFile(): boolean {
    return this.type === 'file';
  }
  isDirectory(): boolean {
    return this.type === 'directory';
  }
  isSymbolicLink(): boolean {
    return this.type === 'symlink';
  }
}

/** A `fs.Stats` look-alike of backend stats. */
function statsLike(stats: FileStats) {
  return {
    size: stats.size,
    mode: stats.mode,
    mtimeMs: stats.mtimeMs,
    isFile: () => stats.type === 'file',
    isDirectory: () => stats.type === 'directory',
    isSymbolicLink: () => stats.type === 'symlink',
  };
}

function callback<T>(promise: Promise<T>, done: Callback<T>): void {
  promise.then(
    (value) => done(null, value),
    (error: unknown) => done(error as NodeJS.ErrnoException),
  );
}

function noSync(name: string): never {
  throw Object.assign(new Error(`${name}: a FileSystemBackend is async only`), { code: 'ENOTSUP' });
}

/**
 * The `fs` tinyglobby's crawler (fdir) walks with, made of the backend's primitives: `readdir`
 * with file types (and `realpath` / `stat`, used only when following symlinks, which glob does
 * not). The sync variants throw: the async crawler never calls them, and a call would otherwise
 * fall back to node's fs, around the backend.
 */
export function globFileSystem(backend: FileSystemBackend): NonNullable<TinyGlobOptions['fs']> {
  const adapter = {
    readdir(path: string, ...rest: unknown[]) {
      const done = rest[rest.length - 1] as Callback<Entry[]>;
      callback(
        backend.readdir(String(path)).then((entries) => entries.map((e) => new Entry(e.name, e.type))),
        done,
      );
    },
    realpath(path: string, ...rest: unknown[]) {
      callback(backend.realpath(String(path)), rest[rest.length - 1] as Callback<string>);
    },
    stat(path: string, ...rest: unknown[]) {
      const done = rest[rest.length - 1] as Callback<ReturnType<typeof statsLike>>;
      callback(backend.stat(String(path)).then(statsLike), done);
    },
    readdirSync: () => noSync('readdirSync'),
    realpathSync: () => noSync('realpathSync'),
    statSync: () => noSync('statSync'),
  };
  return adapter as unknown as NonNullable<TinyGlobOptions['fs']>;
}
