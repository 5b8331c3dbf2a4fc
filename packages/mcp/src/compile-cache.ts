// Runs a CommonJS file with V8's code cache for it kept on disk, so every start after the first
// skips compiling it: the published conch-mcp server is one ~2 MB file, and compiling it was a
// third of the server's start. Written here rather than taken from a library: node's own
// module.enableCompileCache() exists only from node 22.1 (conch runs on 20.19+), and
// v8-compile-cache, the library that did this for older nodes, is unmaintained and hooks every
// require of the process.
//
// `import()` does not work inside the file: node 20 loses the loader of code compiled from a cache
// (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING), and vm's main-context loader is experimental (a warning
// on stderr at each start). Code that imports gets node's loader another way: conch's plugin
// discovery through @conch/core's IMPORT_MODULE_HOOK, which the launcher sets.
//
// The cache is trusted code: V8 checks a cache against its own version and flags and the source's
// length, not the source itself. So a cache is named by a SHA-256 of the source, node's version
// and the architecture, and it is kept only in a directory this user owns that nobody else can
// write to (os.tmpdir()/conch-compile-cache-<uid>, 0700), and read only from files this user owns.
import { createHash } from 'node:crypto';
import { isAscii } from 'node:buffer';
import {
  closeSync,
  constants as fsConstants,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  // eslint-disable-next-line no-restricted-imports -- reads conch's own bundle and its code cache in the user's cache dir (opened O_NONBLOCK, owner and type checked)
  readFileSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { Script } from 'node:vm';
import { safeLstatSync, safeStatSync } from '@conch/core';

/** What happened to a file's code cache this run. */
export type CompileCacheState =
  /** Compiled from the cache. */
  | 'hit'
  /** No cache yet: compiled from source; the cache is written once the code has run. */
  | 'miss'
  /** V8 refused the cache (other V8 flags, say): compiled from source, the cache is rewritten. */
  | 'rejected'
  /** No cache used (turned off, or no safe directory): compiled from source, nothing written. */
  | 'off';

export interface CompileCacheRun {
  state: CompileCacheState;
  /** The cache file (absent when `state` is 'off'). */
  cacheFile?: string;
  /** Why no cache was used (`state` 'off'). */
  reason?: string;
}

export interface CompileCacheOptions {
  /** Environment read for the switches below; default process.env. */
  env?: NodeJS.ProcessEnv;
  /**
   * After this long running, the cache is written even if the process never exits normally
   * (a server killed with SIGKILL); default 10 s. It is also written at exit, whichever is first.
   */
  writeAfterMs?: number;
  /**
   * The file's text is already a CommonJS module wrapped as node wraps one, `WRAPPER_HEAD … \n})`
   * (conch-mcp's bundle is written so): it is compiled as it is. Otherwise the wrapper is added,
   * which makes V8 copy the whole text once more (2.5 MB for the bundle, a few ms of a start on a
   * machine whose page faults are slow).
   */
  wrapped?: boolean;
}

/** How a CommonJS module's text starts once wrapped (its end is `\n})`). */
export const WRAPPER_HEAD = '(function (exports, require, module, __filename, __dirname) { ';
export const WRAPPER_TAIL = '\n})';

/** Cache files of a source older than this are removed when a new one is written. */
const STALE_MS = 7 * 24 * 60 * 60 * 1000;
const SUFFIX = '.v8cache';

/**
 * The directory code caches go in, or why there is none:
 * - `NODE_DISABLE_COMPILE_CACHE=1` (node's own switch) or `CONCH_COMPILE_CACHE=0`: none;
 * - `CONCH_COMPILE_CACHE=<dir>`: that directory;
 * - otherwise `os.tmpdir()/conch-compile-cache-<uid>`.
 * The directory is created 0700; one that is a symlink, owned by another user or writable by
 * group or others is refused.
 */
export function compileCacheDir(env: NodeJS.ProcessEnv = process.env): { dir: string } | { reason: string } {
  if (env.NODE_DISABLE_COMPILE_CACHE === '1') return { reason: 'NODE_DISABLE_COMPILE_CACHE=1' };
  const chosen = env.CONCH_COMPILE_CACHE;
  if (chosen === '0' || chosen === 'off') return { reason: `CONCH_COMPILE_CACHE=${chosen}` };
  const uid = process.getuid?.();
  const dir = chosen || join(tmpdir(), `conch-compile-cache-${uid ?? 'user'}`);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const stat = safeLstatSync(dir);
    if (!stat.isDirectory()) return { reason: `${dir} is not a directory` };
    if (uid !== undefined && stat.uid !== uid) return { reason: `${dir} belongs to uid ${stat.uid}` };
    if ((stat.mode & 0o022) !== 0)
      return { reason: `${dir} is writable by others (mode ${(stat.mode & 0o777).toString(8)})` };
    return { dir };
  } catch (error) {
    return { reason: `${dir}: ${(error as Error).message}` };
  }
}

/** The cache's bytes if `file` is a regular file of this user's, else undefined. */
function readOwned(file: string): Buffer | undefined {
  let fd: number;
  try {
    // Non-blocking: a FIFO in its place returns at once and fails the type check below.
    fd = openSync(file, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const stat = fstatSync(fd);
    const uid = process.getuid?.();
    if (!stat.isFile() || (uid !== undefined && stat.uid !== uid)) return undefined;
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes `data` to `file` atomically (0600), then removes stale caches of the same source: the
 * other files of the directory named `<prefix><key>.v8cache`.
 */
function writeCache(file: string, prefix: string, data: Buffer): void {
  const temp = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(temp, data, { mode: 0o600 });
    renameSync(temp, file);
  } catch {
    // A full or read-only disk: the next start compiles from source again, nothing else is lost.
    try {
      unlinkSync(temp);
    } catch {
      // never written
    }
    return;
  }
  const dir = dirname(file);
  try {
    for (const name of readdirSync(dir)) {
      const other = join(dir, name);
      if (other === file || !name.startsWith(prefix) || !name.endsWith(SUFFIX)) continue;
      if (Date.now() - safeStatSync(other).mtimeMs > STALE_MS) unlinkSync(other);
    }
  } catch {
    // another process cleaning up at the same time
  }
}

/**
 * Runs the CommonJS file `file` (with `require`, `module`, `__filename` and `__dirname` as node
 * gives them; no `import()`, see above) compiled from its code cache when
 * there is a valid one; otherwise compiles it and writes the cache once the code has run (the
 * functions compiled while running are in it too). Returns what happened to the cache.
 */
export function runWithCompileCache(file: string, options: CompileCacheOptions = {}): CompileCacheRun {
  const bytes = readFileSync(file);
  // An ASCII file (esbuild's output is) decodes as latin1, a copy: utf8 would validate 2 MB.
  const source = bytes.toString(isAscii(bytes) ? 'latin1' : 'utf8');
  const where = compileCacheDir(options.env);
  const prefix = `${basename(file)}-`;
  let cacheFile: string | undefined;
  let cachedData: Buffer | undefined;
  if ('dir' in where) {
    const key = createHash('sha256')
      .update(bytes)
      .update(`\0${process.version}\0${process.arch}`)
      .digest('hex')
      .slice(0, 32);
    cacheFile = join(where.dir, `${prefix}${key}${SUFFIX}`);
    cachedData = readOwned(cacheFile);
  }
  if (options.wrapped && !(source.startsWith(WRAPPER_HEAD) && source.endsWith(WRAPPER_TAIL)))
    throw new Error(
      `${file}: expected a wrapped CommonJS module (starting ${JSON.stringify(WRAPPER_HEAD)}, ending ${JSON.stringify(WRAPPER_TAIL)})`,
    );
  // The module wrapper on the first line keeps line numbers in stack traces as in the file.
  const script = new Script(options.wrapped ? source : `${WRAPPER_HEAD}${source}${WRAPPER_TAIL}`, {
    filename: file,
    ...(cachedData ? { cachedData } : {}),
  });
  const state: CompileCacheState =
    cacheFile === undefined ? 'off' : !cachedData ? 'miss' : script.cachedDataRejected ? 'rejected' : 'hit';
  if (cacheFile !== undefined && state !== 'hit') {
    const target = cacheFile;
    let written = false;
    const write = () => {
      if (written) return;
      written = true;
      process.off('exit', write);
      clearTimeout(timer);
      writeCache(target, prefix, script.createCachedData());
    };
    const timer = setTimeout(write, options.writeAfterMs ?? 10_000);
    timer.unref();
    process.once('exit', write);
  }
  const wrapper = script.runInThisContext() as (
    exports: unknown,
    require: NodeJS.Require,
    module: unknown,
    filename: string,
    dirname: string,
  ) => void;
  const module = { exports: {}, id: file, filename: file, loaded: false, children: [], paths: [] };
  wrapper.call(module.exports, module.exports, createRequire(file), module, file, dirname(file));
  module.loaded = true;
  return {
    state,
    ...(cacheFile === undefined ? {} : { cacheFile }),
    ...('reason' in where ? { reason: where.reason } : {}),
  };
}
