/**
 * The conch exec protocol: JSON-RPC 2.0 messages, one per line (NDJSON), over one byte stream —
 * the stdin/stdout of `conch-exec-server` as a transport command (ssh, docker/podman exec,
 * kubectl exec) carries it. Types only, shared by the client and the server.
 *
 * Versioning: the server speaks first, a `server.hello` notification naming `PROTOCOL_NAME` and
 * its `version`; the client compares it with its own and refuses a mismatch (a ProtocolVersionError
 * naming both) before sending anything. It then sends `initialize` with its version, which the
 * server checks in turn (error `PROTOCOL_MISMATCH` with both versions). A change to any message
 * below that an older peer would misread bumps `PROTOCOL_VERSION`. Deployed bundles live in a
 * directory named by their content hash, so a host always starts the server it was built with;
 * a mismatch only happens with a server started by `serverCommand` (installed by hand).
 *
 * Binary data (output chunks, stdin, file contents with encoding 'base64') travels base64-encoded.
 */
import type { KernelPolicy, PermissionDecision, PermissionRequest } from '@conch/core';
import type { LeftoverProcess, ProcessManagerStatus, ProcessResult, SandboxProfile } from '@conch/process';
import type { TerminalSessionInfo } from '@conch/terminal';
import type {
  EditResult,
  FileErrorCode,
  GlobResult,
  ListResult,
  ReadResult,
  StatResult,
  WriteResult,
} from '@conch/files';

export const PROTOCOL_NAME = 'conch-exec';
/** Bumped whenever a message changes incompatibly. */
export const PROTOCOL_VERSION = 1;

/** Sent by the server as its first line. */
export interface ServerHello {
  protocol: typeof PROTOCOL_NAME;
  version: number;
  /** The @conch/exec-server version that built the server. */
  serverVersion: string;
  /** The content hash of the bundle the server runs from (null: not from a deployed bundle). */
  bundle: string | null;
  node: string;
  platform: string;
  arch: string;
  pid: number;
  /** Where the server started (the login directory over ssh, the WORKDIR in a container). */
  cwd: string;
  home: string;
  user: string;
  hostname: string;
  tmpdir: string;
  /** Set on a hello sent through the attach socket: the id of the session this server holds. */
  session?: string;
}

export interface InitializeParams {
  version: number;
  client: string;
  /** The workspace in the target (absolute, or relative to the server's start directory; `~` expands). */
  cwd?: string;
  /** The server shuts down (killing everything it started) after this long without a message. */
  idleTimeoutMs: number;
  /** pino level of the server's stderr log. */
  logLevel?: string;
  /** Keep the server's temp dir (spill files, session logs) when it shuts down. */
  keepTempFiles?: boolean;
  /**
   * How long the server keeps running what it started after its stream closes (or goes silent for
   * `idleTimeoutMs`), waiting for a client to re-attach (`session.attach`). 0 or absent: it kills
   * everything at once, as a server without sessions does.
   */
  detachGraceMs?: number;
}

/** A detachable session: what a client needs to re-attach after its stream dropped. */
export interface SessionInfo {
  /** Random id naming the session (and its attach socket). */
  id: string;
  /** The secret a re-attaching client proves (hex, 256 bits). Never logged. */
  key: string;
  /** The unix socket in the target the attach relay connects to (in the server's 0700 temp dir). */
  socket: string;
  /** The grace period the server applies (ms). */
  graceMs: number;
}

export interface InitializeResult {
  /** The workspace (absolute, existing). */
  cwd: string;
  /** The server's private temp dir (spill files, terminal logs); removed when it shuts down. */
  tempDir: string;
  /** Whether terminal sessions can run (node-pty loads for this platform), and why not. */
  pty: { available: boolean; reason?: string };
  /** The server's PATH: what commands get there (a host's extra PATH entries go in front of it). */
  path?: string;
  /** Present when the server keeps its work across a dropped stream (`detachGraceMs` > 0). */
  session?: SessionInfo;
}

/** `session.attach`: sent instead of `initialize` on a stream reaching a detached server. */
export interface AttachParams {
  version: number;
  client: string;
  session: string;
  key: string;
  /**
   * Processes the client still waits on (running, or leftovers being watched): the server sends
   * their state again (`proc.started`, `proc.progress`, `proc.exited`, `leftovers.*`) before it
   * answers, and names the ids it never saw (a spawn lost with the old stream).
   */
  processes: string[];
  /**
   * Per streamed process, the output bytes the client has accounted for (chunks received plus
   * `skipped` counts): what the old stream carried off and never delivered is counted as skipped,
   * so streamed plus skipped still adds up to every byte (the spill file has them all).
   */
  streamed?: Record<string, number>;
}

export interface AttachResult {
  init: InitializeResult;
  /** Ids of `processes` the server does not know. */
  unknown: string[];
  /** How long the server had been without a client (0: it had not noticed the old stream drop). */
  detachedMs: number;
}

/** `proc.spawn`: ProcessManager.spawn's options as data. `env` null values unset a variable. */
export interface SpawnParams {
  /** The client's id for this process (unique per connection). */
  id: string;
  command: string;
  args: string[];
  cwd?: string;
  env?: Record<string, string | null>;
  extendEnv?: boolean;
  shell?: boolean | string;
  timeoutMs?: number;
  capture?:
    | false
    | {
        headBytes?: number;
        tailBytes?: number;
        spill?: 'separate' | 'combined' | 'none';
        spillFile?: 'auto' | 'always';
      };
  stdin?: 'ignore' | 'pipe';
  killGraceMs?: number;
  drainMs?: number;
  keepLeftoverOutput?: boolean;
  sandbox?: SandboxProfile;
  label?: string;
  /** Stream output chunks (`proc.output`) to the client. */
  stream?: boolean;
  /** The client has an abort signal for it: `proc.abort` ends it with reason 'aborted'. */
  abortable?: boolean;
}

/** What a process's output looks like while it runs (sent at most every PROGRESS_MS while it changes). */
export interface ProcessProgress {
  id: string;
  /** Output bytes so far (stdout + stderr). */
  bytes: number;
  /** The combined spill file, once there is one. */
  outputFile?: string;
  lastLine?: string;
}

/** The result of a run in the target: @conch/process's ProcessResult (paths are the target's). */
export type WireProcessResult = ProcessResult;

export interface LeftoverProgress {
  id: string;
  pids: number[];
  bytes: number;
  outputFile?: string;
  lastLine?: string;
}

/**
 * Where file operations may go in the target, sent with every `fs.*` call (the server keeps one
 * operator per distinct policy): @conch/files' files config, roots being target paths (`~` is the
 * target user's home). Reads may also use the server's temp dir; writes (`fs.write`, `fs.edit`,
 * `fs.resolve`) only the working dir and `allowedRoots`, and never a protected path, judged by the
 * server with the target's home and workspace (see server/file-service.ts).
 */
export interface FilesPolicy {
  /** The working directory (default: the workspace). */
  root?: string;
  allowedRoots?: string[];
  /** Any path (protected paths stay refused for writes). */
  allowOutside?: boolean;
  maxReadBytes?: number;
  maxReadLines?: number;
  maxResults?: number;
  maxEditBytes?: number;
}

export interface FsParams {
  policy?: FilesPolicy;
}

/** Client -> server requests: method -> [params, result]. */
export interface ClientRequests {
  initialize: [InitializeParams, InitializeResult];
  ping: [Record<string, never>, { now: number }];
  'session.attach': [AttachParams, AttachResult];
  'server.status': [Record<string, never>, { processes: ProcessManagerStatus; running: number }];
  'server.shutdown': [Record<string, never>, Record<string, never>];
  'proc.spawn': [SpawnParams, Record<string, never>];
  'proc.write': [{ id: string; data: string }, { written: boolean }];
  'proc.closeStdin': [{ id: string }, Record<string, never>];
  'proc.kill': [{ id: string }, Record<string, never>];
  'proc.abort': [{ id: string }, Record<string, never>];
  'proc.setTimeout': [{ id: string; ms: number | null }, Record<string, never>];
  'proc.signal': [{ id: string; attached: boolean }, Record<string, never>];
  'proc.stream': [{ id: string; on: boolean }, Record<string, never>];
  'proc.materialize': [{ id: string }, { path: string | null }];
  'proc.read': [{ id: string; offset: number; limit: number }, { data: string }];
  'proc.adopt': [{ id: string }, LeftoverProgress];
  'proc.killAll': [Record<string, never>, Record<string, never>];
  'leftovers.kill': [{ id: string }, Record<string, never>];
  'leftovers.read': [{ id: string; offset: number; limit: number }, { data: string }];
  'fs.read': [FsParams & { path: string; offset?: number; limit?: number }, ReadResult];
  'fs.readBytes': [
    FsParams & { path: string; offset?: number; length?: number },
    { path: string; data: string; sizeBytes: number },
  ];
  /** Where a write (or edit) of `path` would go in the target, refused as the write would be. */
  'fs.resolve': [FsParams & { operation: string; path: string }, { abs: string; real: string }];
  'fs.write': [
    FsParams & { path: string; content: string; encoding: 'utf8' | 'base64'; createDirs?: boolean },
    WriteResult,
  ];
  'fs.edit': [
    FsParams & { path: string; oldString: string; newString: string; replaceAll?: boolean },
    EditResult,
  ];
  'fs.list': [FsParams & { path: string; limit?: number }, ListResult];
  'fs.stat': [FsParams & { path: string }, StatResult];
  'fs.glob': [
    FsParams & { patterns: string[]; cwd?: string; dot?: boolean; ignore?: string[]; limit?: number },
    GlobResult,
  ];
  'terminal.open': [
    { config: Record<string, unknown>; forwardOutput?: boolean },
    { name: string; description: string; instructions?: string },
  ];
  'terminal.permission': [{ callId: string; args: unknown }, { request: PermissionRequest | null }];
  'terminal.execute': [
    {
      callId: string;
      args: unknown;
      decision?: PermissionDecision;
      kernelPolicy?: KernelPolicy | null;
    },
    { result: Record<string, unknown> },
  ];
  'terminal.abort': [{ callId: string }, Record<string, never>];
  'terminal.list': [Record<string, never>, { sessions: TerminalSessionInfo[] }];
  /** From `offset` (bytes of the raw log) when given; `size` is the raw log's size (the next offset). */
  'terminal.readLog': [{ id: number; clean?: boolean; offset?: number }, { text: string; size: number }];
  /** The result of a terminal call whose connection dropped while it ran (waits for it to finish). */
  'terminal.result': [{ callId: string }, { result: Record<string, unknown> }];
  'terminal.kill': [{ id: number }, { killed: boolean }];
}

/** Server -> client notifications. */
export interface ServerNotifications {
  'server.hello': ServerHello;
  'proc.started': { id: string; pid: number; cookie: string; sandbox: string };
  /** A chunk of output (`data` base64). `skipped`: bytes not streamed before it (they are in the spill file). */
  'proc.output': { id: string; stream: 'stdout' | 'stderr'; data: string; skipped?: number };
  'proc.progress': ProcessProgress;
  'proc.exited': { id: string; result: WireProcessResult };
  'leftovers.progress': LeftoverProgress;
  'leftovers.done': { id: string };
  /** An event of the server's registry (terminal.*), re-emitted on the host's bus. */
  event: { name: string; payload: unknown };
}

/** Client -> server notifications. */
export interface ClientNotifications {
  /** Output bytes of a process the client has taken (flow control credit). */
  'proc.ack': { id: string; bytes: number };
}

export type ClientMethod = keyof ClientRequests;

/** Stable error codes in `error.data.code` of JSON-RPC error responses. */
export type RemoteErrorCode =
  | 'PROTOCOL_MISMATCH'
  | 'NOT_INITIALIZED'
  | 'INVALID_PARAMS'
  | 'UNKNOWN_PROCESS'
  | 'INVALID_SPAWN_OPTION'
  | 'TERMINAL_UNAVAILABLE'
  | 'TERMINAL_NOT_OPEN'
  | FileErrorCode
  | 'INVALID_FILE_ARGUMENT'
  | 'SHUTTING_DOWN'
  | 'ATTACH_REFUSED'
  | 'UNKNOWN_CALL'
  | 'INTERNAL';

/** Output bytes the server streams ahead of the client's acks before it stops streaming a process. */
export const STREAM_WINDOW_BYTES = 4 * 1024 * 1024;
/** How often progress (bytes, last line, spill path) of a running process is sent at most. */
export const PROGRESS_MS = 250;

/** A process's leftovers as the client sees them. */
export type { LeftoverProcess };
