import { PERMISSION_GATE, type ToolCallContext } from '@conch/core';
import type { ProcessResult, SandboxProfile } from '@conch/process';

/**
 * The kernel wall behind the gate: a command the gate allowed because it only reads runs in the
 * read-only profile (read-only filesystem, private /tmp, no network); every other command runs in
 * the workspace profile, where the gate's protected paths are read-only. No gate, or a gate that
 * wants no wall: no profile. (Where bubblewrap does not work the process layer runs the command
 * unsandboxed, says so once, and the result's `sandbox` is 'none'.)
 */
export function sandboxFor(
  ctx: ToolCallContext<unknown>,
  judgedElsewhere = false,
): SandboxProfile | undefined {
  const gate = ctx.resolveOptional(PERMISSION_GATE);
  const policy = gate?.kernelPolicy?.();
  if (!policy) return undefined;
  if (ctx.decision?.readOnly && !judgedElsewhere) return { kind: 'read-only' };
  return { kind: 'workspace', readOnlyPaths: policy.readOnlyPaths };
}

/** What to tell the model when the sandbox refused a write (EROFS), or undefined. */
export function sandboxRefusal(result: ProcessResult): string | undefined {
  if (result.sandbox === 'none' || result.exitCode === 0) return undefined;
  const text = `${result.stderr.head}\n${result.stderr.tail}\n${result.stdout.tail}`;
  if (!/read-only file system|EROFS/i.test(text)) return undefined;
  if (result.sandbox === 'read-only')
    return 'The permission gate allowed this command because it only reads, so it ran in a read-only sandbox (no writes, no network), and the sandbox refused a write (EROFS). If the command really must write, that is a different command: the gate will ask for it.';
  return "The sandbox refused a write (EROFS): the path is protected (shell start-up files, .ssh, .git/hooks, .git/config, .env files and the host's protected paths are read-only for every command). Write somewhere else.";
}
