import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { checkTarget, compileProtected, type PathContext } from './paths.js';

/**
 * The protected-path check of the gate's `protectedPaths` rule for one path a tool writes itself:
 * resolved in the kernel's order (symlinks before `..`), hard links of protected files included.
 * Returns the reason in the gate's words (`… is inside an .ssh directory`), or undefined.
 */
export function protectedWrite(path: string, cwd: string, ctx: PathContext): string | undefined {
  const check = checkTarget(path, [cwd], ctx, { followFinal: true });
  return check.kind === 'protected' ? check.reason : undefined;
}

export interface ProtectedPathOptions {
  /** The workspace root (relative `protectedPaths` globs match from here). */
  workspaceRoot: string;
  /** Default: os.homedir(). */
  home?: string;
  /** Extra globs, as the permission config's `protectedPaths`. */
  protectedPaths?: readonly string[];
}

/**
 * The same check without a gate (its defaults plus `protectedPaths`): for hosts and tools that
 * write files where no permission plugin is exposed. Prefer `engine.protectedWriteReason()` when
 * one is, so the host's config applies.
 */
export function protectedPathReason(path: string, options: ProtectedPathOptions): string | undefined {
  const ctx: PathContext = {
    home: options.home ?? homedir(),
    workspaceRoot: resolve(options.workspaceRoot),
    extra: compileProtected(options.protectedPaths ?? []),
  };
  return protectedWrite(path, ctx.workspaceRoot, ctx);
}
