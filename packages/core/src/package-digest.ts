import { createHash } from 'node:crypto';
import { constants, type Dirent } from 'node:fs';
import { lstat, open, readdir, readlink, realpath, stat } from 'node:fs/promises';
import { join } from 'node:path';

/** How much of a plugin package is hashed at most; a bigger package is never trusted automatically. */
export const PACKAGE_DIGEST_LIMITS = { maxFiles: 4_000, maxBytes: 64 * 1024 * 1024 } as const;

/** The biggest conch.config.json that is hashed (and so can be trusted). */
export const CONFIG_DIGEST_MAX_BYTES = 16 * 1024 * 1024;

export type PackageDigest = { digest: string } | { tooLarge: string };

interface Entry {
  rel: string;
  abs: string;
  kind: 'file' | 'dir' | 'link' | 'other';
  link?: string;
  mode?: number;
}

/**
 * The sha256 of a package directory's files: every entry under it except nested `node_modules`, in
 * sorted path order, each hashed with its relative path, its kind and its bytes. A symbolic link is
 * hashed as its target text and then followed (a linked directory is walked once; a loop ends
 * there). Only regular files are opened: a FIFO or a device planted in a package is hashed by its
 * mode, never read (reading one would hang the host). Past PACKAGE_DIGEST_LIMITS the walk stops and
 * the package is reported as too large.
 */
export async function digestPackage(
  dir: string,
  limits: { maxFiles: number; maxBytes: number } = PACKAGE_DIGEST_LIMITS,
): Promise<PackageDigest> {
  const entries: Entry[] = [];
  const visited = new Set<string>([await realpath(dir).catch(() => dir)]);
  const walk = async (abs: string, rel: string): Promise<string | undefined> => {
    let children: Dirent[];
    try {
      children = await readdir(abs, { withFileTypes: true });
    } catch {
      return undefined;
    }
    for (const child of children) {
      const name = child.name;
      if (name === 'node_modules') continue;
      const childAbs = join(abs, name);
      const childRel = rel === '' ? name : `${rel}/${name}`;
      let kind: 'file' | 'dir' | 'other' = child.isDirectory() ? 'dir' : child.isFile() ? 'file' : 'other';
      let mode: number | undefined;
      if (child.isSymbolicLink()) {
        entries.push({
          rel: childRel,
          abs: childAbs,
          kind: 'link',
          link: await readlink(childAbs).catch(() => ''),
        });
        const target = await stat(childAbs).catch(() => undefined);
        if (!target) continue;
        kind = target.isDirectory() ? 'dir' : target.isFile() ? 'file' : 'other';
        mode = target.mode;
        if (kind === 'dir') {
          const real = await realpath(childAbs).catch(() => undefined);
          if (real === undefined || visited.has(real)) continue;
          visited.add(real);
        }
      } else if (kind === 'other') {
        mode = (await lstat(childAbs).catch(() => undefined))?.mode;
      }
      entries.push({ rel: childRel, abs: childAbs, kind, ...(mode === undefined ? {} : { mode }) });
      if (entries.length > limits.maxFiles) return `more than ${limits.maxFiles} files`;
      if (kind === 'dir') {
        const over = await walk(childAbs, childRel);
        if (over) return over;
      }
    }
    return undefined;
  };
  const over = await walk(dir, '');
  if (over) return { tooLarge: over };
  // Sorted by path (code units), whatever order the directory listed its entries in.
  entries.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : a.kind < b.kind ? -1 : 1));
  const hash = createHash('sha256');
  let read = 0;
  for (const entry of entries) {
    hash.update(`${entry.kind}\0${entry.rel}\0`);
    if (entry.kind === 'link') hash.update(`${entry.link}\0`);
    else if (entry.kind === 'other') hash.update(`${entry.mode}\0`);
    else if (entry.kind === 'file') {
      const got = await readRegularFile(entry.abs, limits.maxBytes - read, (chunk) => hash.update(chunk));
      if (got === 'too-large') return { tooLarge: `more than ${limits.maxBytes / (1024 * 1024)} MB` };
      if (typeof got === 'number') read += got;
      hash.update(`\0${got}\0`);
    }
  }
  return { digest: `sha256:${hash.digest('hex')}` };
}

/**
 * Hands a regular file's bytes to `onChunk`, reading at most `budget` bytes; the number read, or why
 * not. Opened non-blocking and checked after opening, so a FIFO swapped in is never waited on.
 */
async function readRegularFile(
  file: string,
  budget: number,
  onChunk: (chunk: Buffer) => void,
): Promise<number | 'too-large' | 'not-a-file' | 'unreadable'> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK).catch(() => undefined);
  if (!handle) return 'unreadable';
  try {
    if (!(await handle.stat()).isFile()) return 'not-a-file';
    const buffer = Buffer.allocUnsafe(64 * 1024);
    let total = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) return total;
      total += bytesRead;
      if (total > budget) return 'too-large';
      onChunk(buffer.subarray(0, bytesRead));
    }
  } catch {
    return 'unreadable';
  } finally {
    await handle.close();
  }
}

/** A file's digest and its bytes: `'none'` when it does not exist. */
export interface FileDigest {
  digest: string;
  /** The bytes hashed, when it is a regular file within the bound (parse these, not a second read). */
  bytes?: Buffer;
}

/**
 * The digest of a config file: `sha256:<hex>` of its bytes, `none` when there is no file,
 * `not-a-file` for a directory, FIFO or device (never opened for reading), `too-large` past
 * CONFIG_DIGEST_MAX_BYTES, `unreadable` when it cannot be read.
 */
export async function digestFile(file: string, maxBytes = CONFIG_DIGEST_MAX_BYTES): Promise<FileDigest> {
  const info = await stat(file).catch((error: NodeJS.ErrnoException) => error);
  if (info instanceof Error)
    return { digest: info.code === 'ENOENT' || info.code === 'ENOTDIR' ? 'none' : 'unreadable' };
  if (!info.isFile()) return { digest: 'not-a-file' };
  if (info.size > maxBytes) return { digest: 'too-large' };
  const chunks: Buffer[] = [];
  const hash = createHash('sha256');
  const got = await readRegularFile(file, maxBytes, (chunk) => {
    chunks.push(Buffer.from(chunk));
    hash.update(chunk);
  });
  if (typeof got !== 'number') return { digest: got };
  return { digest: `sha256:${hash.digest('hex')}`, bytes: Buffer.concat(chunks) };
}
