import { ConchError } from '@conch/core';

/** Why the exec server could not be started in a target. */
export type ExecServerStartStage =
  /** The transport command itself failed (ssh could not connect, no such container/pod). */
  | 'transport'
  /** The SandboxClaim could not be created, or did not become Ready with a pod (`kind: 'kubernetes'` with `claim`). */
  | 'claim'
  /** `node` is not on the target's PATH (set the executor's `node` to its absolute path). */
  | 'node-missing'
  /** The target's node is older than 20. */
  | 'node-too-old'
  /** Copying or installing the bundle failed (cache dir not writable, corrupt transfer). */
  | 'deploy'
  /** No hello within the connect timeout. */
  | 'timeout'
  /** The server answered, then refused to initialize (bad workspace directory, ...). */
  | 'initialize';

/** The exec server could not be started or reached in a target. `stage` says which step failed. */
export class ExecServerStartError extends ConchError {
  readonly target: string;
  readonly stage: ExecServerStartStage;

  constructor(target: string, stage: ExecServerStartStage, detail: string, cause?: unknown) {
    super({
      code: 'EXEC_SERVER_START_FAILED',
      message: `exec server on ${target}: expected it to start; ${detail}`,
      cause,
    });
    this.name = 'ExecServerStartError';
    this.target = target;
    this.stage = stage;
  }
}
