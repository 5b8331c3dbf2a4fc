import type { Plant, SandboxKind } from '@conch/sandbox';
import type { GuardRefusal } from './sandbox-activity.js';
import type { ResourceLimitHit } from './sandbox-limits.js';
import type { CaptureSnapshot } from './output-capture.js';
import type { SpillReport } from './spill-sink.js';

export type ExitReason = 'exit' | 'timeout' | 'aborted' | 'killed' | 'error';

/** A process a command started that was still alive when the command's result was made. */
export interface LeftoverProcess {
  pid: number;
  /** From /proc/<pid>/cmdline, arguments joined by spaces, at most 200 characters. */
  command: string;
}

export interface ProcessResult {
  id: string;
  pid: number | undefined;
  /** Exit code, or null when killed by a signal or never started. */
  exitCode: number | null;
  /** The signal that ended it (e.g. 'SIGTERM'), or null. */
  signal: string | null;
  timedOut: boolean;
  aborted: boolean;
  /** Ended by kill()/killAll()/dispose(). */
  killed: boolean;
  reason: ExitReason;
  durationMs: number;
  stdout: CaptureSnapshot;
  stderr: CaptureSnapshot;
  /** With spill 'combined': the file holding stdout and stderr interleaved (once large, or always with spillFile 'always'). */
  outputFile?: string;
  /**
   * With spill 'combined': what `outputFile` really holds when it is not every byte where it was
   * asked for — no file could be made anywhere (`problem: 'not-saved'`, no `outputFile`), the disk
   * filled up or a spill limit was reached (`keptBytes` of `totalBytes`), or it went to a fallback
   * directory (`relocated`). Absent when the file (if any) is complete where it was asked for.
   * (With spill 'separate' each stream's snapshot carries its own `spill`.)
   */
  spill?: SpillReport;
  /** The process could not be started (ENOENT: not found, EACCES: not executable, ...). */
  spawnError?: { code: string; message: string };
  /** stdout/stderr were still held open by a descendant when the drain time ended. */
  drainTimedOut: boolean;
  /**
   * Processes it started (same env cookie) still alive when it ended: those holding its output
   * open or still in its process group. Empty after a kill/timeout/abort (they were killed). Take
   * them over with `manager.adoptLeftovers(proc)`, or end them with `proc.kill()`.
   */
  leftRunning: LeftoverProcess[];
  /** The sandbox that really applied ('none' where bwrap was unavailable). */
  sandbox: SandboxKind;
  /**
   * It was killed because its process supervisor went away (the supervisor, or the sandbox it
   * lives in, was killed or crashed): why. Not the command's own doing; the next spawn starts a
   * new supervisor.
   */
  supervisorLost?: string;
  /**
   * With `supervisorLost`: the supervisor did not die by itself; it stopped answering (SIGSTOP, a
   * hang) and was killed and replaced by the health check, taking this process with it.
   */
  supervisorUnresponsive?: true;
  /**
   * With `supervisorLost`: the command had already ended on its own (its stopped supervisor had
   * not reaped it yet); `exitCode`/`signal` are its own, read from the kernel, and its output is
   * whole. Processes it left running were killed with the supervisor.
   */
  endedBeforeLoss?: true;
  /**
   * Calls the sandbox's guard refused this command and everything it started (their paths as the
   * guard resolved them): present when there were any, whatever the exit status (a refused write in
   * a `postinstall` that ignores the error still shows here).
   */
  sandboxRefusals?: GuardRefusal[];
  /**
   * What it left that the user's own tools would run later outside any sandbox (a git config's
   * `core.fsmonitor`, a `.yarnrc.yml` `yarnPath`, history that would check out a `.envrc`, …): see
   * @conch/sandbox plants. Also kept in the manager's `status().plants` until cleared.
   */
  plants?: Plant[];
  /**
   * It ran into its sandbox's memory or process limit (@conch/sandbox resource-limits): which, how
   * the limit is enforced, and the evidence (an OOM kill counted by the kernel, an allocation
   * failure in its output, the tasks the sandbox held). A command that failed for its own reasons
   * under a limit it never reached has none.
   */
  resourceLimit?: ResourceLimitHit;
}

export interface OutputEvent {
  stream: 'stdout' | 'stderr';
  /** The chunk decoded as UTF-8 (streaming: characters split across chunks stay whole). */
  text: string;
  chunk: Buffer;
}
