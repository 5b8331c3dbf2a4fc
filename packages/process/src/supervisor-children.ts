import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync } from 'node:fs';
import { constants } from 'node:os';
import { Socket } from 'node:net';
import { groupExists } from './kill-tree.js';
import type { NativeSpawnModule, Spawner } from './native-spawn.js';
import type { SpawnRequest, SupervisorMessage } from './supervisor-protocol.js';

type Send = (message: SupervisorMessage, handle?: Socket) => void;

/** The libuv handle under a net.Socket (node internals; see detachPipe). */
interface PipeHandle {
  readStop(): number;
}

/**
 * Whether this node's child pipes expose the internals detachPipe relies on. The supervisor checks
 * it once at start and, when it fails (a node release changed them), reports `fatal` so the host
 * spawns in-process instead of losing output. The probe child is `node --version` (it exits before
 * any JavaScript starts), killed at once; `gone` settles once node has reaped it, and the supervisor
 * says it is ready only then, so no command it runs ever sees the probe (as a `<defunct>` in `ps`
 * inside the sandbox's own pid namespace).
 */
export function canDetachPipes(): { usable: boolean; gone: Promise<void> } {
  const probe = spawn(process.execPath, ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const gone = new Promise<void>((resolve) => {
    probe.once('exit', () => resolve());
    probe.once('error', () => resolve());
  });
  const handle = (probe.stdout as unknown as { _handle?: Partial<PipeHandle> } | null)?._handle;
  const usable = typeof handle?.readStop === 'function' && Array.isArray(probe.stdio);
  probe.kill('SIGKILL');
  probe.stdout?.destroy();
  return { usable, gone };
}

/**
 * Takes a child's pipe away from node's ChildProcess so its handle can be passed to the host
 * untouched. Relies on node internals, pinned by supervisor.test.ts (run it on every node major):
 *
 * - node wraps each pipe in a net.Socket whose constructor calls `read(0)`, which calls
 *   `_handle.readStart()`: libuv would read the first bytes in this process at the next poll, and
 *   they would be lost to the host. `readStop()` right after `spawn()` (same tick, so before any
 *   poll) undoes it — it is what node itself does for `pauseOnCreate` sockets. `_handle.reading`
 *   stays true, so a later `_read()` never restarts reading.
 * - on exit, ChildProcess `flushStdio` resumes every unread stdio stream and destroys `stdin`;
 *   either would read bytes or close the handle before `process.send` got to pass it (sends are
 *   queued until the host acknowledged the previous handle). Removing the sockets from
 *   `child.stdio` / `child.stdout|stderr|stdin` makes both skip them.
 *
 * After `process.send(message, socket)` node closes its copy of the handle once the host
 * acknowledged it, so the supervisor keeps no fd of the child's pipes.
 */
function detachPipe(child: ChildProcess, fd: 0 | 1 | 2): Socket | undefined {
  const socket = child.stdio[fd] as Socket | null | undefined;
  if (!socket) return undefined;
  if (fd !== 0) (socket as unknown as { _handle: PipeHandle })._handle.readStop();
  (child.stdio as (unknown | null)[])[fd] = null;
  const props = ['stdin', 'stdout', 'stderr'] as const;
  (child as unknown as Record<string, unknown>)[props[fd]] = null;
  return socket;
}

/**
 * How often, and how far apart (growing to 4x), a spawn refused with EAGAIN is tried again: about
 * 30 s in all, long enough for the process-limit watch to free the sandbox on a loaded machine.
 */
const EAGAIN_RETRIES = 150;
const EAGAIN_RETRY_MS = 50;

/**
 * Held output. A short command's output pipes stay here: the supervisor reads what they hold when
 * the child exits and sends it with the `exit` message, so the host gets one message instead of
 * two sockets to wrap, poll, read to their end and close (most of a cheap command's host CPU).
 * Nothing polls a held pipe, so a command still running after HOLD_MS has its pipes handed to the
 * host (`unheld`, with what they held so far, in order): its output streams from then on, and a
 * command that writes more than a socket's buffer in the meantime waits at most that long. The
 * delay decides only when output arrives, never what arrives.
 */
const HOLD_MS = 20;
/** The most read from a held pipe at once (a descendant still writing when the child exited). */
const HOLD_READ_MAX = 1 << 20;

interface HeldPipes {
  /** [the child's fd, this process's end] of stdout and stderr. */
  ends: (readonly [number, number])[];
  timer: NodeJS.Timeout;
}

/** Signal numbers to node's names ('SIGKILL'), for exits the native spawner reports. */
const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, number]) => [number, name]));

/**
 * A pipe end the native spawner made, as a socket process.send can pass. The constructor of a
 * readable net.Socket starts reading at the next poll: `readStop()` in the same tick stops it
 * before any byte is read here (see detachPipe).
 */
function socketOf(fd: number, readable: boolean): Socket {
  const socket = new Socket({ fd, readable, writable: !readable });
  if (readable) (socket as unknown as { _handle: PipeHandle })._handle.readStop();
  return socket;
}

/**
 * The children one supervisor started: each in its own session and process group (`detached`),
 * pipes handed to the host at once, exit reported by message. Kept until they exit, so the host's
 * death can kill their groups. Started by posix_spawn when the native spawner loaded (see
 * native-spawn.ts), else by node's spawn; the host sees the same messages either way.
 */
export class SupervisorChildren {
  private readonly live = new Map<number, number>(); // request id -> pid
  /** Each live child's env cookie (what finds it from a process of its tree). */
  private readonly cookies = new Map<number, string>();
  /** Called when a child was started (the sandbox's process-limit watch wakes up). */
  onStart: (() => void) | undefined;
  /**
   * A child's leader exited and its process group lives on; called before its `exit` is sent (the
   * process limit's watch may attribute and stop the group: supervisor-limits.ts).
   */
  onGroupLeft: ((id: number, pgid: number) => void) | undefined;
  private readonly send: Send;
  private readonly sandboxed: boolean;
  private readonly native: NativeSpawnModule | undefined;
  /** The env spawn requests are sent against (see SpawnRequest). */
  private envBase: Record<string, string> = {};

  /** The unix socket to the host that pipes travel on (see FD_CHANNEL_VAR), with posix_spawn only. */
  private readonly fdChannel: number | undefined;

  /**
   * Whether each child's pidfd goes to the host with its pipes (a supervisor in its own pid
   * namespace: the host reads the child's host pid from the pidfd instead of searching /proc).
   */
  private readonly pidfds: boolean;

  /** Output pipes kept here, by request id (see HOLD_MS). */
  private readonly held = new Map<number, HeldPipes>();

  /** How long output pipes are held before a running child's are handed over (HOLD_MS; tests set it). */
  private readonly holdMs: number;

  constructor(
    send: Send,
    sandboxed: boolean,
    spawner?: Spawner,
    fdChannel?: number,
    pidfds = false,
    holdMs = HOLD_MS,
  ) {
    this.send = send;
    this.holdMs = holdMs;
    this.sandboxed = sandboxed;
    this.pidfds = pidfds;
    this.fdChannel = spawner?.kind === 'posix_spawn' ? fdChannel : undefined;
    if (spawner?.kind === 'posix_spawn') {
      const native = spawner.module;
      this.native = native;
      // Signals coalesce: each one asks every child still running (usually a handful). With the
      // native spawner every child is one of its own.
      process.on('SIGCHLD', () => {
        for (const [id, pid] of this.live) {
          const status = native.tryWait(pid);
          if (status) this.nativeExit(id, pid, status[0], status[1]);
        }
      });
    }
  }

  /** The complete env of a request: the base (replaced first when it brings one) with its difference. */
  env(request: SpawnRequest): Record<string, string> {
    if (request.envBase) this.envBase = request.envBase;
    const env = { ...this.envBase, ...request.env };
    if (request.envUnset) for (const key of request.envUnset) delete env[key];
    return env;
  }

  /** Whether any child runs. */
  get busy(): boolean {
    return this.live.size > 0;
  }

  /** The request id of the child that leads process group `pgid`, or whose tree carries `cookie`. */
  idOf(pgid: number, cookie: string | undefined): number | undefined {
    for (const [id, pid] of this.live) if (pid === pgid) return id;
    if (cookie) for (const [id, own] of this.cookies) if (own === cookie && this.live.has(id)) return id;
    return undefined;
  }

  spawn(request: SpawnRequest): void {
    // The env is applied to the base once, in the order requests came, whatever retries follow.
    this.start(request, this.env(request), 0);
  }

  private start(request: SpawnRequest, env: Record<string, string>, attempt: number): void {
    this.onStart?.();
    if (this.native) {
      this.spawnNative(request, env, this.native, attempt);
      return;
    }
    const { id } = request;
    const out = request.capture ? 'pipe' : 'ignore';
    let child: ChildProcess;
    try {
      child = spawn(request.file, request.args as string[], {
        cwd: request.cwd,
        env,
        stdio: [request.stdin, out, out],
        detached: true,
      });
    } catch (error) {
      const e = error as NodeJS.ErrnoException;
      this.send({ t: 'spawn-error', id, code: e.code ?? 'ESPAWN', message: e.message });
      return;
    }
    if (child.pid === undefined) {
      // ENOENT / EACCES: node emits 'error' on the next tick; the pipes it made are unused.
      for (const stream of child.stdio) (stream as Socket | null)?.destroy();
      child.once('error', (error: NodeJS.ErrnoException) => {
        if (!this.retryLater(request, env, error, attempt)) this.spawnError(request, error);
      });
      return;
    }
    const pid = child.pid;
    this.track(id, env);
    const pipes: [number, Socket][] = [];
    for (const fd of [1, 2, 0] as const) {
      const socket = detachPipe(child, fd);
      if (socket) pipes.push([fd, socket]);
    }
    this.live.set(id, pid);
    child.on('error', () => {
      // after a successful spawn only kill() can fail here; the host kills by group itself
    });
    child.once('exit', (code, signal) => {
      this.live.delete(id);
      this.cookies.delete(id);
      this.sendExit(id, pid, code, signal);
    });
    const [first, ...rest] = pipes;
    this.send({ t: 'spawned', id, pid, fds: pipes.map(([fd]) => fd) }, first?.[1]);
    for (const [fd, socket] of rest) this.send({ t: 'stream', id, fd }, socket);
  }

  private track(id: number, env: Record<string, string>): void {
    const cookie = env.CONCH_PROC_COOKIE;
    if (cookie) this.cookies.set(id, cookie);
  }

  /**
   * EAGAIN: the sandbox is at its process limit (a fork loop holds every task it may have). The
   * process-limit watch (supervisor-limits.ts) frees them within a few of its looks, so the spawn
   * is tried again rather than failed: a command started beside a fork loop still runs.
   */
  private retryLater(
    request: SpawnRequest,
    env: Record<string, string>,
    error: NodeJS.ErrnoException,
    attempt: number,
  ): boolean {
    if (error.code !== 'EAGAIN' || attempt >= EAGAIN_RETRIES) return false;
    setTimeout(() => this.start(request, env, attempt + 1), EAGAIN_RETRY_MS * Math.min(4, attempt + 1));
    return true;
  }

  private spawnError(request: SpawnRequest, error: NodeJS.ErrnoException): void {
    let message = error.message;
    if (error.code === 'ENOENT' && !existsSync(request.cwd)) {
      message += ` (the working directory ${request.cwd} does not exist${this.sandboxed ? ' inside the sandbox' : ''})`;
    }
    this.send({ t: 'spawn-error', id: request.id, code: error.code ?? 'ESPAWN', message });
  }

  /** spawn() through posix_spawn: the same request, replies and order as node's path above. */
  private spawnNative(
    request: SpawnRequest,
    env: Record<string, string>,
    native: NativeSpawnModule,
    attempt: number,
  ): void {
    const { id, file, args, cwd } = request;
    // No string here holds a NUL byte (C would cut it there): the host refused those at spawn()
    // (spawn-options.ts), and the host's own environment cannot hold one.
    const envp: string[] = [];
    for (const key in env) envp.push(`${key}=${env[key]}`);
    let started: [number, number, number, number, number?];
    const wantPidfd = this.pidfds && this.fdChannel !== undefined;
    try {
      started = native.spawn(
        file,
        [file, ...args],
        cwd,
        envp,
        request.stdin === 'pipe',
        request.capture,
        wantPidfd,
      );
    } catch (error) {
      if (!this.retryLater(request, env, error as NodeJS.ErrnoException, attempt))
        this.spawnError(request, error as NodeJS.ErrnoException);
      return;
    }
    const [pid, stdinFd, stdoutFd, stderrFd, pidfd = -1] = started;
    this.live.set(id, pid);
    this.track(id, env);
    // The child's fds and this process's ends of them, in the order the host expects (see `spawned`).
    const ends = (
      [
        [1, stdoutFd],
        [2, stderrFd],
        [0, stdinFd],
      ] as const
    ).filter(([, own]) => own >= 0);
    if (request.hold && stdinFd < 0 && ends.length > 0 && native.drain) {
      // Its output pipes stay here (see HOLD_MS); `spawned` says which, and carries its pidfd.
      this.held.set(id, { ends: [...ends], timer: setTimeout(() => this.unhold(id), this.holdMs) });
      this.handOver(id, [], pidfd, { t: 'spawned', id, pid, held: ends.map(([fd]) => fd) });
      return;
    }
    this.handOver(id, ends, pidfd, { t: 'spawned', id, pid });
  }

  /**
   * Sends `message` with the pipes `ends` (the child's fd, this process's end) and the child's
   * pidfd (-1: none), which belong to the host from then on. All of them go in one message on the
   * fd channel, sent before `message` so the host finds them queued when it reads it, the pidfd
   * last (`channel`, `pidfd`). A full channel (or none) falls back to handle passing: the first
   * pipe with `message`, each other in a `stream` message; the pidfd is closed then (the host
   * finds the child's pid the slow way).
   */
  private handOver(
    id: number,
    ends: readonly (readonly [number, number])[],
    pidfd: number,
    message:
      | Omit<Extract<SupervisorMessage, { t: 'spawned' }>, 'fds'>
      | Omit<Extract<SupervisorMessage, { t: 'unheld' }>, 'fds'>,
  ): void {
    const fds = ends.map(([fd]) => fd);
    const owned = ends.map(([, own]) => own);
    if (pidfd >= 0) owned.push(pidfd);
    if (owned.length > 0 && this.fdChannel !== undefined && this.native!.sendFds(this.fdChannel, id, owned)) {
      this.send({
        ...message,
        fds,
        channel: true,
        ...(pidfd >= 0 ? { pidfd: true as const } : {}),
      } as SupervisorMessage);
      return;
    }
    if (pidfd >= 0) {
      try {
        closeSync(pidfd);
      } catch {
        // closed already
      }
    }
    const [first, ...rest] = ends.map(([fd, own]) => [fd, socketOf(own, fd !== 0)] as const);
    this.send({ ...message, fds } as SupervisorMessage, first?.[1]);
    for (const [fd, socket] of rest) this.send({ t: 'stream', id, fd }, socket);
  }

  /**
   * What a child's held pipes hold now (base64), and the pipes still open; undefined when it has
   * none held. They are no longer held after this.
   */
  private takeHeld(
    id: number,
  ): { out?: string; err?: string; open: (readonly [number, number])[] } | undefined {
    const held = this.held.get(id);
    const drain = this.native?.drain;
    if (!held || !drain) return undefined;
    this.held.delete(id);
    clearTimeout(held.timer);
    const taken: { out?: string; err?: string; open: (readonly [number, number])[] } = { open: [] };
    for (const end of held.ends) {
      const [bytes, eof] = drain(end[1], HOLD_READ_MAX);
      if (bytes) taken[end[0] === 1 ? 'out' : 'err'] = bytes.toString('base64');
      if (!eof) taken.open.push(end);
    }
    return taken;
  }

  /** Hands a child's held pipes to the host, after what they held so far (`taken`: read already). */
  private unhold(id: number, taken = this.takeHeld(id)): void {
    if (!taken) return;
    const { open, ...data } = taken;
    this.handOver(id, open, -1, { t: 'unheld', id, ...data });
  }

  private nativeExit(id: number, pid: number, code: number | null, signal: number | null): void {
    this.live.delete(id);
    this.cookies.delete(id);
    const name = signal === null ? null : (SIGNAL_NAMES.get(signal) ?? `SIG${signal}`);
    // Everything the child wrote is in its pipes now; a process it left running may still hold
    // them, and then they go to the host like a long command's (its output streams on).
    const taken = this.takeHeld(id);
    let last: { out?: string; err?: string } | undefined;
    if (taken && taken.open.length > 0) this.unhold(id, taken);
    else if (taken) last = { out: taken.out, err: taken.err };
    this.sendExit(id, pid, code, name, last);
  }

  private sendExit(
    id: number,
    pid: number,
    code: number | null,
    signal: string | null,
    last?: { out?: string; err?: string },
  ): void {
    let group = groupExists(pid);
    if (group && this.onGroupLeft) {
      this.onGroupLeft(id, pid);
      group = groupExists(pid);
    }
    const message: Extract<SupervisorMessage, { t: 'exit' }> = { t: 'exit', id, code, signal, group };
    if (last?.out) message.out = last.out;
    if (last?.err) message.err = last.err;
    this.send(message);
  }

  /** SIGKILLs the process group of every child still running. */
  killAll(): void {
    for (const pid of this.live.values()) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }
}
