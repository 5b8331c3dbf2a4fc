import { ConchError } from './errors/conch-error.js';
import type { ToolResult } from './define.js';

/**
 * The stable `error_code`s of tool results and thrown errors that more than one tool shares. A
 * code is never renamed or reused for another meaning; hosts match on it, never on `error` text.
 * Packages document the codes only their tools produce (files: `FILE_NOT_FOUND`, `EDIT_NO_MATCH`…).
 */
export const ERROR_CODES = {
  // What a command did
  COMMAND_NOT_FOUND: 'the program is not on PATH (exit 127)',
  NOT_EXECUTABLE: 'the program exists but cannot be executed (exit 126)',
  NO_SUCH_FILE: 'a file or directory the command names does not exist',
  INVALID_CWD: 'the working directory does not exist or is not a directory',
  SPAWN_FAILED: 'the operating system refused to start the process',
  TIMED_OUT: 'the call ran past its time limit and was stopped',
  KILLED: 'the process was ended by a signal conch did not send',
  ABORTED: "the caller's AbortSignal fired; everything the call started was stopped",
  SANDBOX_REFUSED_WRITE:
    'the kernel sandbox refused a write (outside the workspace, or a protected path); call again with sandbox: false and a justification to ask for it',
  SANDBOX_REFUSED_SIGNAL:
    'the command signalled a process outside the sandbox (its own pid namespace shows only what it started, so the process was not found there); call again with sandbox: false and a justification to ask for it',
  SANDBOX_UNAVAILABLE: 'the sandbox the command must run in could not be set up here, so it did not run',
  SECRET_HIDDEN:
    'the command touched a secret the sandbox hides (.env files, ~/.ssh, cloud and registry credentials): neither readable nor writable inside it',
  SUPERVISOR_LOST:
    "conch's process supervisor (or the sandbox it lives in) went away while the command ran, so everything it ran was stopped; the next call starts a new one",
  SUPERVISOR_UNRESPONSIVE:
    "conch's process supervisor stopped answering (stopped or hung) while the call waited on it, so it was killed with everything it ran and replaced; the next call starts a new one",
  NETWORK_BLOCKED:
    'the sandbox refused a network connection (no network, or a destination not on the allow-list)',
  ENGINE_REFUSED:
    "the container engine policy refused a request the sandbox made (a bind outside the workspace, --privileged, added capabilities, host namespaces, a device, the engine's socket, a container the session does not manage): `engine_refusals` names each rule; the engine never saw it. Call again with sandbox: false and a justification to ask a human, or tell the user",
  PLANT_REPORTED:
    "the command left a file the user's own tools would run later outside any sandbox (a git config's fsmonitor or alias, a hook, a yarnPath, history that checks out a .envrc, …): listed in `plants` and kept in registry.status() until a human clears it; conch ran none of it",
  OUT_OF_MEMORY:
    "the command ran out of memory under the sandbox's memory limit (killed by the kernel's OOM killer, or an allocation refused): the result's `limit` says which limit and how it is enforced, `signal` how the command ended",
  PROCESS_LIMIT:
    "the sandbox reached its process limit (a fork loop, or more parallel processes or threads than it allows): the command holding most of them was stopped; the result's `limit` says the limit and how it is enforced",
  // What happened to a command's output
  OUTPUT_NOT_SAVED:
    'output that did not fit the result could not be saved to a file (no writable directory, or writing failed): only its start and end are kept, and the result says how much is lost',
  OUTPUT_TRUNCATED_DISK_FULL:
    'the disk filled up while the output was saved: output_file holds only the first bytes, and the result says how many of how many',
  OUTPUT_INCOMPLETE:
    "the command's processes were all gone but its output pipes did not close within the drain's bound: what was read is shown, more may have been written",
  OUTPUT_LIMIT_REACHED:
    'the output reached a spill-file size limit (per call or per registry): output_file holds only the first bytes, and the result says how many and whether the command was stopped',
  // What the gate decided
  PERMISSION_DENIED: 'the permission gate (a rule, a safety check or the user) refused the call',
  // Sessions, tasks and pools
  UNKNOWN_TASK: 'no background task has this id',
  TASK_EVICTED:
    'the background task finished and was dropped from the task history since (its status, exit code and output file, when it had one, are in the result)',
  UNKNOWN_SESSION: 'no terminal session has this id',
  SESSION_BUSY: 'the terminal session is still running a command',
  POOL_FULL: 'every slot of a bounded pool (terminal sessions, background workers) is taken',
  // The call itself
  INVALID_ARGUMENTS: "the arguments do not match the tool's input schema",
  NO_SUCH_TOOL: 'no exposed tool has this name',
  TOOL_FAILED: 'the tool threw an unexpected error (a plugin bug); the registry keeps working',
} as const satisfies Record<string, string>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The shape of every failed tool result: the message for the model, the code for the host. */
export interface ToolErrorResult extends ToolResult {
  error: string;
  /** A code from {@link ERROR_CODES} or one the tool's package documents. */
  error_code: string;
  /** One line for a UI (validation errors: one more line per issue, see `toToolErrorResult`). */
  display: string;
}

const DISPLAY_MAX = 160;

/** `text` cut to its first line and at most `max` characters, for a `display` summary. */
export function oneLine(text: string, max = DISPLAY_MAX): string {
  const first = text.trim().split('\n', 1)[0] ?? '';
  return first.length > max ? `${first.slice(0, max - 1)}…` : first;
}

/**
 * `text` on one line (every run of whitespace, newlines included, becomes one space) and at most
 * `max` characters, cut with an ellipsis: for `describeCall` lines and other UI summaries. Reads
 * only the start of a long text.
 */
export function compactText(text: string, max = DISPLAY_MAX): string {
  const read = max * 4 + 1024;
  const head = text.length > read ? text.slice(0, read) : text;
  const flat = head.replace(/\s+/g, ' ').trim();
  return flat.length > max || head.length < text.length
    ? `${flat.slice(0, Math.max(0, max - 1)).trimEnd()}…`
    : flat;
}

/**
 * How many characters of an error message a result keeps (`error` of every result, the message of
 * a thrown error): a message never carries a large argument whole, however a tool wrote it.
 */
export const ERROR_TEXT_MAX = 8000;

/** How many characters a result's `display` keeps (one line, or a few for validation issues). */
export const DISPLAY_TEXT_MAX = 2000;

/**
 * `text` when it has at most `max` characters, else its first `max` and a note of how many more
 * there were: the bounded prefix errors, logs and audit entries show of a text that may be large.
 */
export function boundedText(text: string, max = ERROR_TEXT_MAX): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}… (${text.length - max} more characters not shown)`;
}

/** How many issues the `display` of an `INVALID_ARGUMENTS` / `INVALID_CONFIG` result lists. */
const DISPLAY_MAX_ISSUES = 5;

/**
 * A thrown error (unknown tool, bad arguments, a plugin crash) as the result a model reads. MCP
 * (`isError` content) and the AI SDK adapter (`error-json`) both send exactly this. The `display`
 * is one line, except for an error with validation issues (`INVALID_ARGUMENTS`, `INVALID_CONFIG`):
 * then a header line and one line per issue (`  field: expected; received …`), at most 5 issues
 * and a `… and N more` line.
 */
export function toToolErrorResult(error: unknown): ToolErrorResult {
  const code = ConchError.isInstance(error) ? error.code : 'TOOL_FAILED';
  const message = boundedText(errorMessage(error));
  const issues = issuesOf(error);
  if (issues.length > 0) {
    const lines = [`✗ ${code}: ${oneLine(message).replace(/:$/, '')}`];
    for (const issue of issues.slice(0, DISPLAY_MAX_ISSUES)) {
      lines.push(`  ${oneLine(`${issue.path}: ${issue.expected}; received ${issue.received}`)}`);
    }
    if (issues.length > DISPLAY_MAX_ISSUES) lines.push(`  … and ${issues.length - DISPLAY_MAX_ISSUES} more`);
    return { error: message, error_code: code, display: lines.join('\n') };
  }
  return { error: message, error_code: code, display: `✗ ${code}: ${oneLine(message)}` };
}

/** The message of anything thrown; never throws itself (a hostile getter, a symbol). */
function errorMessage(error: unknown): string {
  try {
    if (error instanceof Error)
      return typeof error.message === 'string' ? error.message : String(error.message);
    return String(error);
  } catch {
    return 'an error whose message cannot be read';
  }
}

function issuesOf(error: unknown): { path: string; expected: string; received: string }[] {
  if (!ConchError.isInstance(error)) return [];
  const issues = (error as { issues?: unknown }).issues;
  if (!Array.isArray(issues)) return [];
  return issues.filter(
    (i): i is { path: string; expected: string; received: string } =>
      typeof i === 'object' &&
      i !== null &&
      typeof (i as Record<string, unknown>).path === 'string' &&
      typeof (i as Record<string, unknown>).expected === 'string' &&
      typeof (i as Record<string, unknown>).received === 'string',
  );
}

/**
 * The result with the two fields every result carries once it leaves the registry: `error_code`
 * next to any `error` (`TOOL_FAILED` when a third-party tool gave none) and a one-line `display`
 * (`✓` / `✗ CODE: message` when the tool wrote none). `error` keeps at most ERROR_TEXT_MAX
 * characters and `display` DISPLAY_TEXT_MAX (a message that quoted a large argument is cut, with
 * a note). Returns the same object when nothing changes.
 */
export function withResultSummary(result: ToolResult): ToolResult {
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return result;
  const error = typeof result.error === 'string' && result.error.length > 0 ? result.error : undefined;
  const needsCode = error !== undefined && typeof result.error_code !== 'string';
  const needsDisplay = typeof result.display !== 'string';
  const longError = error !== undefined && error.length > ERROR_TEXT_MAX;
  const longDisplay = !needsDisplay && (result.display as string).length > DISPLAY_TEXT_MAX;
  if (!needsCode && !needsDisplay && !longError && !longDisplay) return result;
  const code = needsCode ? 'TOOL_FAILED' : (result.error_code as string | undefined);
  return {
    ...result,
    ...(longError ? { error: boundedText(error) } : {}),
    ...(needsCode ? { error_code: code } : {}),
    ...(needsDisplay ? { display: error === undefined ? '✓' : `✗ ${code}: ${oneLine(error)}` } : {}),
    ...(longDisplay ? { display: compactLines(result.display as string) } : {}),
  };
}

/** A display past DISPLAY_TEXT_MAX: its first lines, each one line of at most DISPLAY_MAX characters. */
function compactLines(display: string): string {
  const lines = display.slice(0, DISPLAY_TEXT_MAX * 2).split('\n', 8);
  const out = lines.map((line) => (line.length > DISPLAY_MAX ? `${line.slice(0, DISPLAY_MAX - 1)}…` : line));
  const text = out.join('\n');
  return text.length > DISPLAY_TEXT_MAX ? `${text.slice(0, DISPLAY_TEXT_MAX - 1)}…` : `${text}…`;
}
