/**
 * The messages between a ProcessManager (the host) and its supervisor process. Types only: the
 * host and the supervisor script both import them, and nothing of this file exists at run time.
 *
 * Transport: node's IPC channel (JSON, one message per `send`), except PTY spawns, whose request
 * and reply travel as JSON lines over a second socket (fd 4 in the supervisor) that the host reads
 * synchronously (see blocking-read.ts), so `spawnPty()` can return a pid like node-pty does.
 */

/**
 * One command to start. Its environment travels as a difference: the supervisor holds a base env
 * (the last `envBase` it was sent; empty before the first), and the child gets that base with
 * `env` set over it and `envUnset` removed — nothing else (the supervisor's own env never leaks in).
 * The host sends the whole env as `envBase` on its first spawn and again whenever the difference
 * would grow past a quarter of the base; requests are applied in the order sent.
 */
export interface SpawnRequest {
  t: 'spawn';
  id: number;
  file: string;
  args: readonly string[];
  cwd: string;
  /** Keys added to or changed from the base (all of them when `envBase` comes with it: none). */
  env: Record<string, string>;
  /** Keys of the base this child does not get. */
  envUnset?: string[];
  /** Replaces the supervisor's base before this request is applied (and for every later one). */
  envBase?: Record<string, string>;
  stdin: 'ignore' | 'pipe';
  /** false: stdout/stderr go to /dev/null and no handle is passed. */
  capture: boolean;
  /**
   * The supervisor may hold the output pipes (see `held` below) instead of passing them at once:
   * asked for captured output without a stdin pipe.
   */
  hold?: true;
}

/** A file operation run inside the supervisor's sandbox (see supervisor-fs.ts). */
export type FsOp =
  | 'stat'
  | 'lstat'
  | 'realpath'
  | 'readlink'
  | 'readdir'
  | 'mkdirp'
  | 'write'
  | 'open'
  | 'read'
  | 'fstat'
  | 'close';

export interface FsRequest {
  t: 'fs';
  id: number;
  op: FsOp;
  /** The path first (or a handle id for read/fstat/close); data travels as base64. */
  args: readonly unknown[];
}

export interface FsStats {
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  mode: number;
  mtimeMs: number;
}

export type FsReply =
  | { t: 'fs-result'; id: number; value: unknown; error?: undefined }
  | {
      t: 'fs-result';
      id: number;
      value?: undefined;
      error: { code: string; message: string; syscall?: string; path?: string };
    };

/** Host -> supervisor over IPC. */
export type HostMessage =
  | SpawnRequest
  | FsRequest
  /** A health check (supervisor-health.ts): answered with `pong` at once by a supervisor whose event loop runs. */
  | { t: 'ping'; id: number }
  | { t: 'pty-write'; id: number; data: string }
  | { t: 'pty-resize'; id: number; cols: number; rows: number }
  | PortConnectRequest;

/**
 * Opens a TCP connection to a loopback port inside the supervisor's network namespace, for the
 * host's port forwarding (port-forwarder.ts): answered with `port-connected` carrying the connected
 * socket as its handle, or `port-error`. The supervisor connects to nothing but these two addresses.
 */
export interface PortConnectRequest {
  t: 'port-connect';
  id: number;
  host: '127.0.0.1' | '::1';
  port: number;
}

/** How a supervisor starts commands: posix_spawn (the native addon) or node's spawn, and why. */
export type SpawnerStatus = { kind: 'posix_spawn' } | { kind: 'node'; reason: string };

/**
 * Supervisor -> host over IPC. `spawned` carries the child's stdout (or, without capture, stdin)
 * as its handle; each further pipe follows in its own `stream` message (node passes one handle
 * per message and queues every later message until the host acknowledged the handle, so the
 * order below is the order the host sees).
 */
export type SupervisorMessage =
  | { t: 'ready'; pid: number; node: string; spawner: SpawnerStatus }
  /**
   * `channel`: the pipes are on the fd channel (in `fds` order); `pidfd`: the child's pidfd follows
   * them there (a supervisor in its own pid namespace). `held`: the child's output pipes the
   * supervisor keeps (not in `fds`): what they carry comes base64 in `out` / `err` of the `exit`
   * message, or of an `unheld` message that hands them over after all (see supervisor-children.ts).
   */
  | {
      t: 'spawned';
      id: number;
      pid: number;
      fds: number[];
      channel?: true;
      pidfd?: true;
      held?: number[];
    }
  | { t: 'stream'; id: number; fd: number }
  /**
   * Held pipes handed over: `out` / `err` (base64) first, then the pipes still open (`fds`) as with
   * `spawned` (on the fd channel when `channel`, else the first as this message's handle and the
   * others in `stream` messages).
   */
  | { t: 'unheld'; id: number; fds: number[]; channel?: true; out?: string; err?: string }
  | { t: 'spawn-error'; id: number; code: string; message: string }
  /**
   * `group`: whether the child's process group still had a member when the child was reaped (what
   * it started in the background) — read inside the supervisor's pid namespace, where the host
   * cannot look by the child's pid.
   */
  | {
      t: 'exit';
      id: number;
      code: number | null;
      signal: string | null;
      group: boolean;
      /** The last output of held pipes (base64), which ended with the child. */
      out?: string;
      err?: string;
    }
  | { t: 'pty-data'; id: number; data: string }
  | { t: 'pty-exit'; id: number; exitCode: number; signal: number }
  | FsReply
  | { t: 'pong'; id: number }
  /** The answer to a `port-connect`: the connected TCP socket is the message's handle. */
  | { t: 'port-connected'; id: number }
  | { t: 'port-error'; id: number; code: string; message: string }
  /**
   * The sandbox reached its process limit and the process group holding the most tasks was
   * SIGKILLed (supervisor-limits.ts); sent before the kill, so before that child's `exit`. `id`: the
   * child whose group (or whose cookie's tree) it was, when it was one of this supervisor's.
   */
  | { t: 'limit'; id?: number; kind: 'processes'; tasks: number; groupTasks: number; limit: number }
  | { t: 'fatal'; message: string };

/** A PTY spawn, sent as one JSON line on the synchronous channel. */
export interface PtySpawnRequest {
  t: 'pty-spawn';
  id: number;
  ptyModule: string;
  file: string;
  args: readonly string[];
  cwd: string;
  env: Record<string, string>;
  cols: number;
  rows: number;
}

/** The reply to a PtySpawnRequest, one JSON line. */
export type PtySpawnReply =
  { id: number; pid: number } | { id: number; error: { code: string; message: string } };
