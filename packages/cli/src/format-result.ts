import { constants } from 'node:os';
import { formatBytes, oneLine } from '@conch/core';
import {
  argMax,
  MAX_ARG_STRLEN,
  type CaptureSnapshot,
  type ProcessResult,
  type SpillReport,
} from '@conch/process';

export type CliMode = 'direct' | 'shell';

/** What cli_based_tool returns for a command that ran to its end (or was stopped). */
export interface CliResult {
  [key: string]: unknown;
  stdout: string;
  stderr: string;
  /** Exit code; 128+N when killed by signal N; 127 not found; 126 not executable. */
  returncode: number;
  /** 'direct' (argv, no shell) or 'shell' (/bin/sh -c). */
  mode: CliMode;
  truncated?: true;
  truncation_message?: string;
  /**
   * The output (stdout and stderr interleaved) whenever anything was cut: every byte, unless
   * `output_file_incomplete` says how much it holds. Absent when no file could be made
   * (`OUTPUT_NOT_SAVED`).
   */
  output_file?: string;
  /**
   * When the output was cut and the file does not hold all of it (a full disk, a spill limit, a
   * failed write, or no file at all): bytes kept in `output_file` of the bytes the command wrote,
   * and why.
   */
  output_file_incomplete?: { kept_bytes: number; total_bytes: number; reason: string };
  error?: string;
  /** Stable code of `error` (see the cli README): COMMAND_NOT_FOUND, TIMED_OUT, … */
  error_code?: string;
  /**
   * Something a command that succeeded should know, which is not its error: `SECRET_HIDDEN` when a
   * tool warned about a file the sandbox hides and still exited 0 (with `refused_path`).
   */
  notice?: string;
  /** The stable code of `notice`. */
  notice_code?: string;
  /** With SANDBOX_REFUSED_WRITE: the path the refused write named, when the output names one. */
  refused_path?: string;
  /**
   * Every wall the command met, when more than one (`error_code` is the first): a refused write
   * and a hidden secret, a network refusal beside either, a signal to a process outside.
   */
  error_codes?: string[];
  /** With SANDBOX_REFUSED_SIGNAL: the host pid the command tried to signal. */
  refused_pid?: number;
  /** With NETWORK_BLOCKED: the destinations the sandbox's network refused. */
  blocked_hosts?: string[];
  /**
   * With ENGINE_REFUSED: what the container-engine policy refused (at most 5, each once): its
   * `rule` (`privileged`, `bind-outside-workspace`, …), the message the client got, the endpoint.
   */
  engine_refusals?: { rule: string; message: string; route?: string }[];
  /**
   * With PLANT_REPORTED: what the command left that the user's own tools would run later outside
   * any sandbox (`kind`, `path`, what runs and when). Also in `registry.status()` until cleared.
   */
  plants?: { kind: string; path: string; detail: string }[];
  /**
   * With OUT_OF_MEMORY / PROCESS_LIMIT: the sandbox's limit it ran into — memory in `bytes` (for
   * the whole sandbox or `per` process) or `processes` (tasks, threads included) — and how it is
   * enforced (`mechanism`: 'cgroup-v2', 'rlimit', 'pid-namespace', 'watch', or 'machine' when the
   * machine itself ran out), with the evidence.
   */
  limit?: {
    kind: 'memory' | 'processes';
    bytes?: number;
    processes?: number;
    per?: 'sandbox' | 'process';
    mechanism: string;
    evidence: string;
  };
  /** With OUT_OF_MEMORY / PROCESS_LIMIT: the signal that ended the command (SIGKILL, SIGABRT), if one did. */
  signal?: string;
  /** Where it ran: 'workspace-write' / 'read-only' (sandboxes), 'protected' (outside, protected paths read-only), 'none'. */
  sandbox?: string;
  /** Processes the command started that were still running when it returned. */
  left_running?: { pid: number; command: string }[];
  left_running_message?: string;
  /**
   * The background task that owns `left_running` (adopted leftovers: `server & echo started`).
   * Not `background_task_id`: the command itself finished and this result is its result; the task
   * is only what it left behind, and may never end (a server).
   */
  left_running_task_id?: string;
  /** One line for a UI: `✓ exit=0`, `✗ exit=127 COMMAND_NOT_FOUND: …` (see {@link cliDisplay}). */
  display?: string;
}

/**
 * What cli_based_tool returns when the command continues as a background task (started as one, or
 * promoted at the threshold): the seed's contract — `background_task_id` means the command has
 * not finished and its result comes from check_background_task.
 */
export interface CliBackgroundResult {
  [key: string]: unknown;
  background_task_id: string;
  /** 'running', or 'queued' while every background worker is busy. */
  status: 'running' | 'queued';
  message: string;
  mode: CliMode;
  /** `background <id> running` or `background <id> queued`. */
  display?: string;
}

export interface FormatOptions {
  maxOutputChars: number;
  mode: CliMode;
  /** argv[0] or the script, for error messages. */
  command: string;
  cwd: string;
  /** Seconds of the limit that killed it, if it timed out. */
  limitSeconds?: number;
  /**
   * The limit was the auto-background threshold: true when no background plugin could take over,
   * 'foreground' when the call asked for background: false.
   */
  thresholdAsTimeout?: boolean | 'foreground';
}

const fmt = (n: number) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

function signalNumber(signal: string): number | undefined {
  return (constants.signals as Record<string, number | undefined>)[signal];
}

function streamText(snap: CaptureSnapshot, marker: (snap: CaptureSnapshot) => string): string {
  if (snap.binary) return `[binary output: ${fmt(snap.totalBytes)} bytes not shown; see output_file]`;
  if (!snap.truncated) return snap.head;
  return `${snap.head}${marker(snap)}${snap.tail}`;
}

/** Keeps the start and end of `text` within `budget` characters, cutting at line ends when close. */
export function cutMiddle(text: string, budget: number, marker: string): string {
  if (text.length <= budget) return text;
  const room = Math.max(0, budget - marker.length);
  let headLen = Math.floor(room * 0.4);
  let tailStart = text.length - (room - headLen);
  const nl = text.lastIndexOf('\n', headLen);
  if (nl > headLen - 400 && nl > 0) headLen = nl + 1;
  const nl2 = text.indexOf('\n', tailStart);
  if (nl2 !== -1 && nl2 < tailStart + 400) tailStart = nl2 + 1;
  return `${text.slice(0, headLen)}${marker}${text.slice(tailStart)}`;
}

function describeSize(snap: CaptureSnapshot): string {
  return `${fmt(snap.totalBytes)} bytes, ${fmt(snap.lines)} lines`;
}

/** Actionable guidance, with its stable code, for the failures a model can fix itself (the jaato error table). */
export function errorGuidance(
  result: ProcessResult,
  stderr: string,
  options: FormatOptions,
): { error: string; code: string } | undefined {
  const name = options.command;
  // It had ended on its own before its supervisor was lost: its own exit stands (see the notice).
  const lostFirst = result.supervisorLost !== undefined && result.endedBeforeLoss !== true;
  if (lostFirst && result.supervisorUnresponsive) {
    const started = result.spawnError ? 'before it started' : 'while it ran';
    return {
      code: 'SUPERVISOR_UNRESPONSIVE',
      error: `The command was stopped ${started}: conch's process supervisor stopped answering (${result.supervisorLost}), so it was killed with everything it ran and replaced. This is not the command's failure. ${result.spawnError ? 'Run it again' : 'It may have done its work before that (the supervisor could not report how it ended): check its effects (the output shown, the files it changes) before you run it again'}; the next call starts a new ${result.sandbox !== 'none' ? 'sandbox' : 'supervisor'}. If it happens again, tell the user the machine may be overloaded or something is stopping processes (SIGSTOP).`,
    };
  }
  if (lostFirst && result.supervisorLost?.startsWith('too many open files')) {
    // Its pipes did not reach the host for want of file descriptors: this command alone was stopped.
    return {
      code: 'TOO_MANY_OPEN_FILES',
      error: `The command was stopped: ${result.supervisorLost} It was killed with everything it started; it may have done part of its work, so check its effects before you run it again.`,
    };
  }
  if (lostFirst) {
    const when = result.spawnError ? ' before the command started' : '';
    return {
      code: 'SUPERVISOR_LOST',
      error: `The command was stopped because conch's process supervisor went away${when} (${result.supervisorLost}); it and everything it started were killed. This is not the command's failure. If the command itself killed the supervisor (kill $PPID, pkill node), avoid that; otherwise run it again: the next call starts a new ${result.sandbox !== 'none' ? 'sandbox' : 'supervisor'}.`,
    };
  }
  if (result.spawnError) {
    const { code, message } = result.spawnError;
    if (code === 'ENOENT') {
      return {
        code: 'COMMAND_NOT_FOUND',
        error: `Command not found: '${name}'. Check that it is installed and on PATH (the cli config's extraPaths adds directories), or use an alternative tool.`,
      };
    }
    if (code === 'EACCES') {
      return {
        code: 'NOT_EXECUTABLE',
        // A bare name is looked up on PATH as execvp does: a PATH directory that may not be searched
        // (another user's, left in PATH by `su`) gives EACCES when the name is found nowhere else.
        error: name.includes('/')
          ? `Permission denied: '${name}' is not executable. Check its permissions (ls -l ${name}) or run it through its interpreter (e.g. sh ${name}).`
          : `Permission denied starting '${name}': either it is not executable, or it was not found on PATH and a PATH directory could not be searched. Check with command -v ${name} (and ls -l on what it prints), or use its full path.`,
      };
    }
    if (code === 'EMFILE' || code === 'ENFILE') {
      // conch's own admission says what was short and what to do; the system's says only EMFILE.
      return {
        code: 'TOO_MANY_OPEN_FILES',
        error: message.startsWith('too many open files:')
          ? `Not run: ${message}`
          : `Could not start '${name}': too many open files (${message}). Wait for running commands or background tasks to end, or tell the user to raise the open-file limit (ulimit -n) of the program that runs conch.`,
      };
    }
    if (code === 'ESANDBOX') {
      return {
        code: 'SANDBOX_UNAVAILABLE',
        error: `Not run: ${message}. Call again with sandbox: false and a justification to ask a human to run it outside the sandbox.`,
      };
    }
    if (code === 'E2BIG') {
      return {
        code: 'INVALID_ARGUMENTS',
        error: `Not run: the command is too long for the system to start (E2BIG: Linux takes at most ${fmt(MAX_ARG_STRLEN)} bytes in one argument and ${fmt(argMax())} bytes for all arguments and the environment together). Shorten 'command': write long data to a file and pass its path, or feed it to the program's stdin with a heredoc.`,
      };
    }
    return { code: 'SPAWN_FAILED', error: `Could not start '${name}': ${message}` };
  }
  if (result.spill?.stopped) {
    const spill = result.spill;
    return {
      code: 'OUTPUT_LIMIT_REACHED',
      error: `The command was stopped: its output reached the ${spill.limit?.scope === 'registry' ? 'per-registry' : 'per-call'} spill limit of ${fmt(spill.limit?.bytes ?? spill.keptBytes)} bytes (${fmt(spill.totalBytes)} bytes written${spill.path ? `, the first ${fmt(spill.keptBytes)} kept in ${spill.path}` : ''}). Filter its output (| grep PATTERN, | tail -100, quieter flags) or, if all of it is needed, ask the user to raise the cli config spillLimitPerCall.`,
    };
  }
  if (result.timedOut) {
    const secs = options.limitSeconds === undefined ? '' : ` after ${options.limitSeconds}s`;
    const base = `Command timed out${secs}; it was killed with every process it started. The output so far is above.`;
    if (options.thresholdAsTimeout === 'foreground') {
      return {
        code: 'TIMED_OUT',
        error: `${base} It ran in the foreground (background: false), where autoBackgroundThreshold acts as a timeout: pass a larger timeout (seconds), or let it run as a background task.`,
      };
    }
    return {
      code: 'TIMED_OUT',
      error: options.thresholdAsTimeout
        ? `${base} No background plugin can take it over, so autoBackgroundThreshold acts as a timeout: pass a larger timeout (seconds) if it needs longer, or narrow the command.`
        : `${base} Pass a larger timeout (seconds), or background: true to run it as a background task.`,
    };
  }
  if (result.killed)
    return {
      code: 'KILLED',
      error: 'Command was killed before it finished (cancelled or the session ended).',
    };
  if (result.aborted)
    return {
      code: 'ABORTED',
      error: 'Command was aborted by the caller; it was killed with every process it started.',
    };
  const hit = result.resourceLimit;
  if (hit?.kind === 'processes') {
    return {
      code: 'PROCESS_LIMIT',
      error: `The command was stopped: the sandbox reached its limit of ${fmt(hit.limit)} processes (threads count too), and this command held most of them (${hit.evidence}). A fork loop, or more parallel processes than the sandbox allows: lower the parallelism (-j4, --maxWorkers=4, fewer workers) or fix the loop; if the task really needs more, tell the user (the permission config's resources.processes).`,
    };
  }
  if (hit?.kind === 'memory') {
    const how =
      hit.mechanism === 'machine'
        ? 'The machine ran out of memory while it ran and the kernel killed it'
        : hit.per === 'process'
          ? `It ran out of memory under the sandbox's limit of ${formatBytes(hit.limit)} per process`
          : `It ran out of memory under the sandbox's limit of ${formatBytes(hit.limit)}`;
    return {
      code: 'OUT_OF_MEMORY',
      error: `${how}${hit.signal ? ` (ended by ${hit.signal})` : ''}: ${hit.evidence}. Use less memory (smaller inputs, a streaming approach, fewer parallel jobs: -j2, --maxWorkers=2) or, if the task needs more, tell the user (the permission config's resources.memory).`,
    };
  }
  const rc = result.exitCode;
  if (rc === 0 || rc === null) return undefined;
  if (rc === 127 && /not found/i.test(stderr)) {
    const match = /(?:^|\n)(?:[^:\n]*: )?(?:line \d+: )?(?:\d+: )?([^:\n]+): (?:command )?not found/i.exec(
      stderr,
    );
    const missing = match?.[1]?.trim() ?? name;
    return {
      code: 'COMMAND_NOT_FOUND',
      error: `Command not found: '${missing}'. Check that it is installed and on PATH (the cli config's extraPaths adds directories), or use an alternative tool.`,
    };
  }
  if (/argument list too long/i.test(stderr)) {
    // The shell could not exec a program with an argument over MAX_ARG_STRLEN (or a line over
    // ARG_MAX): not a permission problem, though it exits 126.
    return {
      code: 'INVALID_ARGUMENTS',
      error: `A program could not be started: its arguments are too long for the system ("Argument list too long": Linux takes at most ${fmt(MAX_ARG_STRLEN)} bytes in one argument and ${fmt(argMax())} bytes for all arguments and the environment together). Shorten 'command' / 'args': write long data to a file and pass its path, or feed it to the program's stdin with a heredoc.`,
    };
  }
  if (rc === 126 || /permission denied/i.test(stderr)) {
    return {
      code: 'PERMISSION_DENIED',
      error:
        'Permission denied: try an alternative approach (a path you own, a different tool, the right permissions) or report the blocker; do not retry the same command, and never with sudo.',
    };
  }
  if (/no such file or directory/i.test(stderr)) {
    return {
      code: 'NO_SUCH_FILE',
      error: `No such file or directory: verify the path exists first (ls, find); relative paths start at ${options.cwd}.`,
    };
  }
  return undefined;
}

/**
 * Shapes a finished process into a cli result: stdout and stderr cleaned for the model, cut to
 * `maxOutputChars` combined (head and tail kept, with a marker giving the true size), the full
 * output in `output_file`, and an `error` the model can act on.
 */
export function formatResult(result: ProcessResult, options: FormatOptions): CliResult {
  const file = result.outputFile;
  const saved = outputFileState(result);
  const where = saved.marker;
  const markerFor = (snap: CaptureSnapshot) =>
    `\n\n[... output truncated: showing the start and the end of ${describeSize(snap)}${where} ...]\n\n`;
  let stdout = streamText(result.stdout, markerFor);
  let stderr = streamText(result.stderr, markerFor);
  const max = options.maxOutputChars;
  let cut =
    result.stdout.truncated || result.stderr.truncated || result.stdout.binary || result.stderr.binary;
  if (stdout.length + stderr.length > max) {
    cut = true;
    const stderrBudget = Math.min(stderr.length, Math.max(Math.floor(max * 0.25), max - stdout.length));
    const stdoutBudget = max - stderrBudget;
    stdout = cutMiddle(stdout, stdoutBudget, markerFor(result.stdout));
    stderr = cutMiddle(stderr, stderrBudget, markerFor(result.stderr));
  }

  const returncode =
    result.exitCode ??
    (result.signal ? 128 + (signalNumber(result.signal) ?? 0) : undefined) ??
    (result.spawnError?.code === 'ENOENT' ? 127 : result.spawnError?.code === 'EACCES' ? 126 : -1);
  const out: CliResult = { stdout, stderr, returncode, mode: options.mode };
  if (cut) {
    out.truncated = true;
    const parts = [`stdout ${describeSize(result.stdout)}`, `stderr ${describeSize(result.stderr)}`];
    out.truncation_message =
      `Output truncated to ${fmt(max)} characters (${parts.join('; ')}); the start and the end are shown.` +
      saved.note +
      ` To see less, filter the command: pipe to grep PATTERN, head -50 or tail -50, limit find with -maxdepth 2 or -name, or use quieter flags.`;
    if (file && !saved.unsaved) out.output_file = file;
    if (saved.incomplete) out.output_file_incomplete = saved.incomplete;
  }
  const guidance = errorGuidance(result, result.stderr.head + result.stderr.tail, options);
  if (guidance) {
    out.error = guidance.error;
    out.error_code = guidance.code;
  }
  if (result.supervisorLost && result.endedBeforeLoss) {
    const how = result.signal ? `killed by ${result.signal}` : `exit ${result.exitCode}`;
    const left = result.leftRunning.length > 0 ? ' Processes it left running were stopped with it.' : '';
    out.notice = `The command had ended on its own (${how}) when conch's process supervisor stopped answering (${result.supervisorLost}): its exit status comes from the kernel and its output is complete.${left} The supervisor was replaced; the next call starts a new ${result.sandbox !== 'none' ? 'sandbox' : 'supervisor'}.`;
    out.notice_code = 'SUPERVISOR_REPLACED';
  }
  const hit = result.resourceLimit;
  if (hit && (guidance?.code === 'OUT_OF_MEMORY' || guidance?.code === 'PROCESS_LIMIT')) {
    out.limit = {
      kind: hit.kind,
      ...(hit.kind === 'memory' ? { bytes: hit.limit } : { processes: hit.limit }),
      ...(hit.per ? { per: hit.per } : {}),
      mechanism: hit.mechanism,
      evidence: hit.evidence,
    };
    const signal = hit.signal ?? result.signal ?? undefined;
    if (signal) out.signal = signal;
  }
  if (cut && saved.problem && !result.spill?.stopped) {
    // What was lost of the output is always said; the code is the command's own when it has one.
    out.error = out.error ? `${out.error} ${saved.problem.error}` : saved.problem.error;
    out.error_code ??= saved.problem.code;
  }
  return out;
}

/** What the output file holds, in the words a result uses (marker, truncation note, error). */
interface OutputFileState {
  /** In the truncation marker: `; full output in FILE`, `; the first N bytes in FILE`, … */
  marker: string;
  /** In truncation_message. */
  note: string;
  incomplete?: { kept_bytes: number; total_bytes: number; reason: string };
  problem?: { code: string; error: string };
  /** No file holds any of it: the result names none. */
  unsaved?: boolean;
}

const READ_HINT = '(read parts of it with head, tail, grep or sed -n)';

/**
 * The output file as it really is: every byte where it was asked for; every byte in a fallback
 * directory (the asked-for one could not be used); a prefix (a full disk, a failed write, a spill
 * limit); or nothing (no directory could take it). Never claims a complete file it does not have.
 */
export function outputFileState(result: ProcessResult): OutputFileState {
  const file = result.outputFile;
  const given: SpillReport | undefined = result.spill;
  // A file that kept nothing (the disk was full before the first byte) is no file to point at.
  const spill: SpillReport | undefined =
    given && given.keptBytes === 0 && (given.problem === 'disk-full' || given.problem === 'write-failed')
      ? { ...given, problem: 'not-saved' }
      : given;
  if (!spill || (spill.problem === undefined && file)) {
    if (!file) return { marker: '', note: '' };
    const moved = spill?.relocated
      ? ` It is not in ${spill.relocated.from}, which could not be used (${spill.relocated.reason})${spill.relocated.temporary ? "; this fallback is the session's temporary directory, removed when the session ends" : ''}.`
      : '';
    return {
      marker: `; full output in ${file}`,
      note: ` The full output is in ${file} ${READ_HINT}.${moved}`,
    };
  }
  const kept = fmt(spill.keptBytes);
  const total = fmt(spill.totalBytes);
  const lost = fmt(Math.max(0, spill.totalBytes - spill.keptBytes));
  const reason = spill.reason ?? 'unknown';
  const incomplete = { kept_bytes: spill.keptBytes, total_bytes: spill.totalBytes, reason };
  const filter =
    'rerun it with the output filtered (| grep PATTERN, | tail -100, quieter flags) or redirected into a file in the workspace (> out.log)';
  switch (spill.problem) {
    case 'not-saved':
    case undefined:
      return {
        unsaved: true,
        marker: '; the full output could not be saved',
        note: ` The full output (${total} bytes) could not be saved to a file (${reason}): only the start and the end shown are kept.`,
        incomplete,
        problem: {
          code: 'OUTPUT_NOT_SAVED',
          error: `The output (${total} bytes) could not be saved to a file, so only its start and end are shown and the middle is lost (${reason}). If the missing part matters, ${filter}; tell the user ${given?.problem === 'disk-full' ? 'the disk is full' : 'the output directory (cli config outputDir) is not writable'}.`,
        },
      };
    case 'disk-full':
      return {
        marker: `; only the first ${kept} bytes saved in ${file}: the disk is full`,
        note: ` Only the first ${kept} of ${total} bytes are in ${file} ${READ_HINT}: the disk filled up (${reason}).`,
        incomplete,
        problem: {
          code: 'OUTPUT_TRUNCATED_DISK_FULL',
          error: `The disk filled up while the output was saved: ${file} holds only the first ${kept} of ${total} bytes (${lost} bytes lost apart from the end shown) — ${reason}. Tell the user the disk is full; if the missing part matters, ${filter}.`,
        },
      };
    case 'write-failed':
      return {
        marker: `; only the first ${kept} bytes saved in ${file}`,
        note: ` Only the first ${kept} of ${total} bytes are in ${file} ${READ_HINT}: writing the rest failed (${reason}).`,
        incomplete,
        problem: {
          code: 'OUTPUT_NOT_SAVED',
          error: `Saving the output failed: ${file} holds only the first ${kept} of ${total} bytes (${reason}). If the missing part matters, ${filter}.`,
        },
      };
    case 'limit': {
      const scope = spill.limit?.scope === 'registry' ? 'per-registry' : 'per-call';
      return {
        marker: `; only the first ${kept} bytes saved in ${file}: spill limit reached`,
        note: ` Only the first ${kept} of ${total} bytes are in ${file} ${READ_HINT}: the ${scope} spill limit of ${fmt(spill.limit?.bytes ?? spill.keptBytes)} bytes was reached, and the command ran on to its end.`,
        incomplete,
        problem: {
          code: 'OUTPUT_LIMIT_REACHED',
          error: `The output reached the ${scope} spill limit: ${file} holds only the first ${kept} of ${total} bytes; the command was not stopped and ran to its end (its last output is shown). If the missing part matters, ${filter}.`,
        },
      };
    }
  }
}

function isBackgroundResult(result: CliResult | CliBackgroundResult): result is CliBackgroundResult {
  return typeof result.returncode !== 'number';
}

/** The last non-blank line of a text. */
function lastLine(text: string): string {
  const lines = text.trimEnd().split('\n');
  return (lines[lines.length - 1] ?? '').trim();
}

/**
 * The one-line `display` of a cli result, in the terminal's format: `✓ exit=0 · <last line>`,
 * `✗ exit=1 · <last stderr line>`, `✗ exit=127 COMMAND_NOT_FOUND: <message>`, then `[full: FILE]`
 * when output was cut and `[N left running as TASK]` for leftovers; a background handoff reads
 * `background <task id> running|queued`.
 */
export function cliDisplay(result: CliResult | CliBackgroundResult): string {
  if (isBackgroundResult(result)) return `background ${result.background_task_id} ${result.status}`;
  const { returncode: rc, error, error_code: code } = result;
  const exit = rc >= 0 ? `exit=${rc}` : '';
  let head: string;
  if (code && error) head = `✗ ${[exit, code].filter(Boolean).join(' ')}: ${oneLine(error, 100)}`;
  else {
    const last = rc === 0 ? lastLine(result.stdout) : lastLine(result.stderr) || lastLine(result.stdout);
    head = `${rc === 0 ? '✓' : '✗'} ${exit}${last ? ` · ${oneLine(last, 100)}` : ''}`;
  }
  const notes: string[] = [];
  if (result.output_file)
    notes.push(`[${result.output_file_incomplete ? 'partial' : 'full'}: ${result.output_file}]`);
  if (result.left_running?.length) {
    const owner = result.left_running_task_id ? ` as ${result.left_running_task_id}` : '';
    notes.push(`[${result.left_running.length} left running${owner}]`);
  }
  return [head, ...notes].join(' ');
}
