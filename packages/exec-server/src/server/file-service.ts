import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { FileOperator } from '@conch/files';
import { protectedPathReason } from '@conch/permission';
import type { ClientRequests, FilesPolicy } from '../protocol.js';

type Req<M extends keyof ClientRequests> = ClientRequests[M][0];
type Res<M extends keyof ClientRequests> = ClientRequests[M][1];

/** Distinct policies kept (a host normally uses one or two). */
const MAX_POLICIES = 16;

/** The two operators of one policy: reads go further (the server's temp dir) than writes. */
interface Operators {
  read: FileOperator;
  write: FileOperator;
}

/**
 * `fs.*` in the target: @conch/files' FileOperator (this machine's file system, atomic writes) under
 * the policy each call carries (working dir, allowed roots, limits), judged here, where the files
 * are, so what is checked is what is written:
 *
 * - `~` and `~/…` (in paths, the working dir and allowed roots) are this target user's home.
 * - Reads stay inside the working dir, the allowed roots and the server's temp dir (spill files,
 *   terminal overflow files: results name them).
 * - Writes and edits (and `fs.resolve`, the check the host makes before asking its gate) stay
 *   inside the working dir and the allowed roots the host sent — never the temp dir — and refuse
 *   protected paths with @conch/permission's rule judged with this target's home and workspace,
 *   on the path as written and on its real path here (symlinks followed in the target, hard links
 *   of protected files found here), at the write itself. The host's gate judges its own extra
 *   globs and names before it sends a write; the built-in protected names need no host to hold.
 */
export class FileService {
  private readonly workspace: string;
  private readonly tempDir: string;
  private readonly home: string;
  private readonly operators = new Map<string, Operators>();

  /** `tempDir`: the server's own (spill files, session logs, overflow files), always readable. */
  constructor(workspace: string, tempDir: string, home: string = homedir()) {
    this.workspace = workspace;
    this.tempDir = tempDir;
    this.home = home;
  }

  read(p: Req<'fs.read'>): Promise<Res<'fs.read'>> {
    return this.reader(p).read(this.path(p.path), {
      ...(p.offset !== undefined ? { offset: p.offset } : {}),
      ...(p.limit !== undefined ? { limit: p.limit } : {}),
    });
  }

  async readBytes(p: Req<'fs.readBytes'>): Promise<Res<'fs.readBytes'>> {
    const r = await this.reader(p).readBytes(this.path(p.path), {
      ...(p.offset !== undefined ? { offset: p.offset } : {}),
      ...(p.length !== undefined ? { length: p.length } : {}),
    });
    return { path: r.path, data: r.data.toString('base64'), sizeBytes: r.sizeBytes };
  }

  /** Where a write (or an edit) of `path` would go, refused as the write itself would be. */
  resolve(p: Req<'fs.resolve'>): Promise<Res<'fs.resolve'>> {
    return this.writer(p).policy.resolveForWrite(p.operation, this.path(p.path));
  }

  write(p: Req<'fs.write'>): Promise<Res<'fs.write'>> {
    return this.writer(p).write(
      this.path(p.path),
      p.encoding === 'base64' ? Buffer.from(p.content, 'base64') : p.content,
      p.createDirs !== undefined ? { createDirs: p.createDirs } : {},
    );
  }

  edit(p: Req<'fs.edit'>): Promise<Res<'fs.edit'>> {
    return this.writer(p).edit(this.path(p.path), {
      oldString: p.oldString,
      newString: p.newString,
      ...(p.replaceAll !== undefined ? { replaceAll: p.replaceAll } : {}),
    });
  }

  list(p: Req<'fs.list'>): Promise<Res<'fs.list'>> {
    return this.reader(p).list(this.path(p.path), p.limit !== undefined ? { limit: p.limit } : {});
  }

  stat(p: Req<'fs.stat'>): Promise<Res<'fs.stat'>> {
    return this.reader(p).stat(this.path(p.path));
  }

  glob(p: Req<'fs.glob'>): Promise<Res<'fs.glob'>> {
    return this.reader(p).glob(p.patterns, {
      ...(p.cwd !== undefined ? { cwd: this.path(p.cwd) } : {}),
      ...(p.dot !== undefined ? { dot: p.dot } : {}),
      ...(p.ignore !== undefined ? { ignore: p.ignore } : {}),
      ...(p.limit !== undefined ? { limit: p.limit } : {}),
    });
  }

  /**
   * `~` and `~/…` as this target's home (what the model means by them, and what a shell here
   * would write); anything else as given (the operator checks the argument and resolves it from
   * the working dir). A file named `~` in the working dir is `./~`.
   */
  private path(path: string): string {
    if (typeof path !== 'string') return path;
    if (path === '~') return this.home;
    if (path.startsWith('~/')) return join(this.home, path.slice(2));
    return path;
  }

  private reader(p: { policy?: FilesPolicy } | undefined): FileOperator {
    return this.operatorsFor(p?.policy).read;
  }

  private writer(p: { policy?: FilesPolicy } | undefined): FileOperator {
    return this.operatorsFor(p?.policy).write;
  }

  private operatorsFor(policy: FilesPolicy | undefined): Operators {
    const key = JSON.stringify(policy ?? {});
    let operators = this.operators.get(key);
    if (!operators) {
      const p = policy ?? {};
      const root = p.root !== undefined ? resolve(this.workspace, this.path(p.root)) : this.workspace;
      const allowedRoots = (p.allowedRoots ?? []).map((r) => {
        const expanded = this.path(r);
        return isAbsolute(expanded) ? expanded : resolve(root, expanded);
      });
      const common = {
        root,
        ...(p.allowOutside !== undefined ? { allowOutside: p.allowOutside } : {}),
        ...(p.maxReadBytes !== undefined ? { maxReadBytes: p.maxReadBytes } : {}),
        ...(p.maxReadLines !== undefined ? { maxReadLines: p.maxReadLines } : {}),
        ...(p.maxResults !== undefined ? { maxResults: p.maxResults } : {}),
        ...(p.maxEditBytes !== undefined ? { maxEditBytes: p.maxEditBytes } : {}),
      };
      const workspaceRoot = root;
      const home = this.home;
      operators = {
        // A result's output_file is in the server's temp dir: a model reads it with these operations.
        read: new FileOperator({ ...common, allowedRoots: [...allowedRoots, this.tempDir] }),
        write: new FileOperator({
          ...common,
          allowedRoots,
          protectedReason: (abs) => protectedPathReason(abs, { workspaceRoot, home }),
        }),
      };
      if (this.operators.size >= MAX_POLICIES) this.operators.delete(this.operators.keys().next().value!);
      this.operators.set(key, operators);
    }
    return operators;
  }
}
