import { basename, dirname, join, posix } from 'node:path';
import { errnoError, type FileStats, type FileSystemBackend } from '../file-system-backend.js';

/** '/a/b/' and '/a//b' as '/a/b' (the crawler asks for directories with a trailing slash). */
function normal(path: string): string {
  const p = posix.normalize(path);
  return p.length > 1 && p.endsWith('/') ? p.slice(0, -1) : p;
}

interface Node {
  type: 'file' | 'directory';
  data: Buffer;
  mode: number;
  mtimeMs: number;
}

/**
 * A FileSystemBackend held in memory (files and directories, no symlinks): nothing of it exists
 * on disk, so an operator that reached node:fs around its backend would fail on it.
 */
export class MemoryFileSystem implements FileSystemBackend {
  readonly nodes = new Map<string, Node>([
    ['/', { type: 'directory', data: Buffer.alloc(0), mode: 0o40755, mtimeMs: 0 }],
  ]);
  /** Every primitive called, as `name path`. */
  readonly calls: string[] = [];

  private node(path: string, syscall: string): Node {
    const clean = normal(path);
    for (let dir = dirname(clean); ; dir = dirname(dir)) {
      const parent = this.nodes.get(dir);
      if (parent && parent.type !== 'directory') throw errnoError('ENOTDIR', syscall, path);
      if (dir === '/') break;
    }
    const node = this.nodes.get(clean);
    if (!node) throw errnoError('ENOENT', syscall, path);
    return node;
  }

  private stats(node: Node): FileStats {
    return { type: node.type, size: node.data.length, mode: node.mode, mtimeMs: node.mtimeMs };
  }

  async open(path: string) {
    this.calls.push(`open ${path}`);
    const node = this.node(path, 'open');
    return {
      stat: () => Promise.resolve(this.stats(node)),
      read: (buffer: Uint8Array, offset: number, length: number, position: number) => {
        const bytes = node.data.subarray(position, position + length);
        buffer.set(bytes, offset);
        return Promise.resolve(bytes.length);
      },
      close: () => Promise.resolve(),
    };
  }

  async stat(path: string) {
    this.calls.push(`stat ${path}`);
    return this.stats(this.node(path, 'stat'));
  }

  async lstat(path: string) {
    this.calls.push(`lstat ${path}`);
    return this.stats(this.node(path, 'lstat'));
  }

  async realpath(path: string) {
    this.calls.push(`realpath ${path}`);
    this.node(path, 'realpath');
    return normal(path);
  }

  async readlink(path: string): Promise<string> {
    this.calls.push(`readlink ${path}`);
    this.node(path, 'readlink');
    throw errnoError('EINVAL', 'readlink', path);
  }

  async readdir(path: string) {
    this.calls.push(`readdir ${path}`);
    const dir = normal(path);
    if (this.node(path, 'scandir').type !== 'directory') throw errnoError('ENOTDIR', 'scandir', path);
    return [...this.nodes]
      .filter(([p]) => p !== '/' && dirname(p) === dir)
      .map(([p, n]) => ({ name: basename(p), type: n.type }));
  }

  async mkdirp(path: string) {
    this.calls.push(`mkdirp ${path}`);
    this.makeDirs(path);
  }

  private makeDirs(path: string): void {
    const parts = normal(path).split('/').filter(Boolean);
    let current = '/';
    for (const part of parts) {
      current = join(current, part);
      const node = this.nodes.get(current);
      if (node && node.type !== 'directory') throw errnoError('EEXIST', 'mkdir', current);
      if (!node)
        this.nodes.set(current, {
          type: 'directory',
          data: Buffer.alloc(0),
          mode: 0o40755,
          mtimeMs: Date.now(),
        });
    }
  }

  async writeFileAtomic(
    path: string,
    data: Uint8Array,
    options: { mode?: number; createOnly?: boolean } = {},
  ) {
    this.calls.push(`writeFileAtomic ${path}`);
    const clean = normal(path);
    if (this.node(dirname(clean), 'open').type !== 'directory') throw errnoError('ENOTDIR', 'open', path);
    const existing = this.nodes.get(clean);
    if (existing && options.createOnly) throw errnoError('EEXIST', 'link', path);
    if (existing?.type === 'directory') throw errnoError('EISDIR', 'rename', path);
    this.nodes.set(clean, {
      type: 'file',
      data: Buffer.from(data),
      mode: 0o100000 | (options.mode ?? 0o644),
      mtimeMs: Date.now(),
    });
  }

  /** Test set-up: a file with its parents. */
  put(path: string, content: string, mode = 0o644): void {
    this.makeDirs(dirname(path));
    this.nodes.set(path, {
      type: 'file',
      data: Buffer.from(content),
      mode: 0o100000 | mode,
      mtimeMs: Date.now(),
    });
    this.calls.length = 0;
  }
}
