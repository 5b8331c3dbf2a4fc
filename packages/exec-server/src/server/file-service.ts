import { FileOperator } from '@conch/files';
import type { FilesPolicy } from '../protocol.js';

/** Distinct policies kept (a host normally uses one or two). */
const MAX_OPERATORS = 16;

/**
 * `fs.*` in the target: @conch/files' FileOperator (this machine's file system, atomic writes) under
 * the policy each call carries (working dir, allowed roots, limits), one operator per policy.
 */
export class FileService {
  private readonly workspace: string;
  private readonly tempDir: string;
  private readonly operators = new Map<string, FileOperator>();

  /** `tempDir`: the server's own (spill files, session logs, overflow files), always readable. */
  constructor(workspace: string, tempDir: string) {
    this.workspace = workspace;
    this.tempDir = tempDir;
  }

  operator(policy: FilesPolicy | undefined): FileOperator {
    const key = JSON.stringify(policy ?? {});
    let operator = this.operators.get(key);
    if (!operator) {
      const p = policy ?? {};
      operator = new FileOperator({
        root: p.root ?? this.workspace,
        // A result's output_file is in the server's temp dir: a model reads it with these operations.
        allowedRoots: [...(p.allowedRoots ?? []), this.tempDir],
        ...(p.allowOutside !== undefined ? { allowOutside: p.allowOutside } : {}),
        ...(p.maxReadBytes !== undefined ? { maxReadBytes: p.maxReadBytes } : {}),
        ...(p.maxReadLines !== undefined ? { maxReadLines: p.maxReadLines } : {}),
        ...(p.maxResults !== undefined ? { maxResults: p.maxResults } : {}),
        ...(p.maxEditBytes !== undefined ? { maxEditBytes: p.maxEditBytes } : {}),
      });
      if (this.operators.size >= MAX_OPERATORS) this.operators.delete(this.operators.keys().next().value!);
      this.operators.set(key, operator);
    }
    return operator;
  }
}
