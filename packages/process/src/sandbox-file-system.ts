import type { AtomicWriteOptions } from './atomic-write.js';
import type { FsOp, FsStats } from './supervisor-protocol.js';

/** A file opened for reading through a sandbox's supervisor. */
export interface SandboxFileHandle {
  stat(): Promise<FsStats>;
  read(buffer: Uint8Array, offset: number, length: number, position: number): Promise<number>;
  close(): Promise<void>;
}

/**
 * File primitives run inside a sandbox (by its supervisor, in its mount namespace): the same
 * shape as @conch/files' `FileSystemBackend`, so a file operator can read and write through the
 * kernel's view — protected paths read-only, the workspace writable, links resolved by the kernel
 * at the moment of the write. Errors are node errno errors; ESANDBOX when the sandbox is gone.
 */
export interface SandboxFileSystem {
  open(path: string): Promise<SandboxFileHandle>;
  stat(path: string): Promise<FsStats>;
  lstat(path: string): Promise<FsStats>;
  realpath(path: string): Promise<string>;
  readlink(path: string): Promise<string>;
  readdir(path: string): Promise<{ name: string; type: FsStats['type'] }[]>;
  mkdirp(path: string): Promise<void>;
  writeFileAtomic(path: string, data: Uint8Array, options?: AtomicWriteOptions): Promise<void>;
}

/** Builds the file system over one call function (`op`, `args`) -> value. */
export function sandboxFileSystem(
  call: (op: FsOp, args: readonly unknown[]) => Promise<unknown>,
): SandboxFileSystem {
  return {
    async open(path) {
      const { handle } = (await call('open', [path])) as { handle: number };
      let closed = false;
      return {
        stat: async () => (await call('fstat', [handle])) as FsStats,
        async read(buffer, offset, length, position) {
          const data = Buffer.from((await call('read', [handle, position, length])) as string, 'base64');
          buffer.set(data.subarray(0, Math.min(data.length, length)), offset);
          return data.length;
        },
        async close() {
          if (closed) return;
          closed = true;
          await call('close', [handle]);
        },
      };
    },
    stat: async (path) => (await call('stat', [path])) as FsStats,
    lstat: async (path) => (await call('lstat', [path])) as FsStats,
    realpath: async (path) => (await call('realpath', [path])) as string,
    readlink: async (path) => (await call('readlink', [path])) as string,
    readdir: async (path) => (await call('readdir', [path])) as { name: string; type: FsStats['type'] }[],
    async mkdirp(path) {
      await call('mkdirp', [path]);
    },
    async writeFileAtomic(path, data, options = {}) {
      await call('write', [
        path,
        Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64'),
        options.mode ?? null,
        options.createOnly === true,
      ]);
    },
  };
}
