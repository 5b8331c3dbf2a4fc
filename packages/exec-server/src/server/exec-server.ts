import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir, hostname, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import type { Logger } from '@conch/core';
import { ProcessManager } from '@conch/process';
import { resolveTargetPath } from '@conch/files';
import { RpcPeer } from '../json-rpc.js';
import {
  PROTOCOL_NAME,
  PROTOCOL_VERSION,
  type ClientRequests,
  type FsParams,
  type InitializeParams,
  type InitializeResult,
  type ServerHello,
} from '../protocol.js';
import { FileService } from './file-service.js';
import { VERSION } from '../version.js';
import { ProcessService } from './process-service.js';
import { ServerError } from './server-error.js';
import { TerminalHost } from './terminal-host.js';

export interface ExecServerOptions {
  input: Readable;
  output: Writable;
  logger: Logger;
  /** The content hash of the deployed bundle this server runs from, if any. */
  bundle?: string | null;
  /** Called once the server has shut down (everything it started is dead). */
  onShutdown?: (reason: string) => void;
  /**
   * The node-pty entry terminal sessions load (default: the `@lydell/node-pty` beside this code).
   * One that does not load makes the terminal unavailable, as in a target without node-pty.
   */
  ptyModule?: string;
}

type Req<M extends keyof ClientRequests> = ClientRequests[M][0];

/** How long the shutdown waits for the process layer to kill everything before giving up on it. */
const SHUTDOWN_BOUND_MS = 15_000;

function username(): string {
  try {
    return userInfo().username;
  } catch {
    return String(process.getuid?.() ?? 'unknown');
  }
}

/**
 * Temp dirs of servers that died without removing them (a SIGKILLed server cannot): each holds its
 * owner's pid; one whose owner is gone is removed. A pid reused since is left alone (conservative).
 */
function removeStaleTempDirs(): void {
  let names: string[];
  try {
    names = readdirSync(tmpdir()).filter((n) => n.startsWith('conch-exec-'));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = join(tmpdir(), name);
    try {
      const pid = Number(readFileSync(join(dir, '.owner'), 'utf8').trim());
      if (!(pid > 0)) continue;
      try {
        process.kill(pid, 0);
        continue; // alive (or another process now has the pid)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') continue;
      }
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // not ours, unreadable, or removed meanwhile
    }
  }
}

/** Whether a PTY module loads here, and why not. */
export interface PtyProbe {
  available: boolean;
  reason?: string;
}

/**
 * Whether node-pty loads here (terminal sessions need it), and why not. Imported, never
 * `require`d: on node 20 a CommonJS module whose first `require` threw, imported later as ESM
 * (by @conch/terminal), rejects that import *and* raises the same error again as an uncaught
 * exception — which ended the server, and every background task it ran, after the terminal call
 * had already answered TERMINAL_UNAVAILABLE. The answer is kept: when node-pty does not load, the
 * terminal is refused without loading it again.
 */
async function probePty(module: string | undefined): Promise<PtyProbe> {
  try {
    const path = module ?? createRequire(import.meta.url).resolve('@lydell/node-pty');
    const mod = (await import(pathToFileURL(path).href)) as {
      spawn?: unknown;
      default?: { spawn?: unknown };
    };
    if (typeof (mod.spawn ?? mod.default?.spawn) !== 'function')
      return { available: false, reason: `${path} exports no spawn(): it is not node-pty` };
    return { available: true };
  } catch (error) {
    return { available: false, reason: (error as Error).message.split('\n')[0] ?? String(error) };
  }
}

/**
 * conch-exec-server: one connection (its stdin/stdout), one process layer. Speaks first (hello),
 * then serves `initialize`, `proc.*`, `leftovers.*`, `fs.*` and `terminal.*` until the stream
 * closes, the client says `server.shutdown`, nothing is heard for the idle timeout, or a signal
 * arrives — then it kills everything it started (process groups, cookie sweep, PTY trees), removes
 * its temp dir and reports shutdown. It is itself a process layer: a supervisor started by its
 * ProcessManager also kills everything if this process is SIGKILLed.
 */
export class ExecServer {
  private readonly options: ExecServerOptions;
  private readonly peer: RpcPeer;
  private readonly logger: Logger;
  private manager: ProcessManager | undefined;
  private processes: ProcessService | undefined;
  private files: FileService | undefined;
  private terminal: TerminalHost | undefined;
  private tempDir: string | undefined;
  private keepTempFiles = false;
  private idleTimer: NodeJS.Timeout | undefined;
  private lastHeard = Date.now();
  private shuttingDown: Promise<void> | undefined;

  constructor(options: ExecServerOptions) {
    this.options = options;
    this.logger = options.logger;
    options.input.on('data', () => {
      this.lastHeard = Date.now();
    });
    this.peer = new RpcPeer({
      input: options.input,
      output: options.output,
      onNoise: (line) =>
        this.logger.warn({ line: line.slice(0, 200) }, 'exec server: ignored a line that is not JSON-RPC'),
      onClose: (error) => void this.shutdown(error.message),
    });
    this.register();
  }

  /** Says hello (the client checks the protocol version before anything else). */
  start(): void {
    const hello: ServerHello = {
      protocol: PROTOCOL_NAME,
      version: PROTOCOL_VERSION,
      serverVersion: VERSION,
      bundle: this.options.bundle ?? null,
      node: process.version,
      platform: process.platform,
      arch: process.arch,
      pid: process.pid,
      cwd: process.cwd(),
      home: homedir(),
      user: username(),
      hostname: hostname(),
      tmpdir: tmpdir(),
    };
    this.peer.notify('server.hello', hello);
  }

  /** Kills everything this server started and closes the connection. Idempotent. */
  shutdown(reason: string): Promise<void> {
    this.shuttingDown ??= this.doShutdown(reason);
    return this.shuttingDown;
  }

  private register(): void {
    const peer = this.peer;
    peer.handle('initialize', (p: InitializeParams) => this.initialize(p));
    peer.handle('ping', () => ({ now: Date.now() }));
    peer.handle('server.shutdown', () => {
      // Answer first, then go: the client waits for the stream to end.
      setImmediate(() => void this.shutdown('the client asked'));
      return {};
    });
    peer.handle('server.status', async () => ({
      processes: await this.ready().manager.status(),
      running: this.ready().processes.running,
    }));
    const procs = () => this.ready().processes;
    peer.handle('proc.spawn', (p) => procs().spawn(p));
    peer.handle('proc.write', (p: { id: string; data: string }) => procs().write(p.id, p.data));
    peer.handle('proc.closeStdin', (p: { id: string }) => procs().closeStdin(p.id));
    peer.handle('proc.kill', (p: { id: string }) => procs().kill(p.id));
    peer.handle('proc.abort', (p: { id: string }) => procs().abort(p.id));
    peer.handle('proc.setTimeout', (p: { id: string; ms: number | null }) => procs().setTimeout(p.id, p.ms));
    peer.handle('proc.signal', (p: { id: string; attached: boolean }) => procs().signal(p.id, p.attached));
    peer.handle('proc.stream', (p: { id: string; on: boolean }) => procs().stream(p.id, p.on));
    peer.handle('proc.materialize', (p: { id: string }) => procs().materialize(p.id));
    peer.handle('proc.read', (p: { id: string; offset: number; limit: number }) =>
      procs().read(p.id, p.offset, p.limit),
    );
    peer.handle('proc.adopt', (p: { id: string }) => procs().adopt(p.id));
    peer.handle('proc.killAll', () => procs().killAll());
    peer.handle('leftovers.kill', (p: { id: string }) => procs().killLeftovers(p.id));
    peer.handle('leftovers.read', (p: { id: string; offset: number; limit: number }) =>
      procs().readLeftovers(p.id, p.offset, p.limit),
    );
    peer.onNotification('proc.ack', (p: { id: string; bytes: number }) => this.processes?.ack(p.id, p.bytes));
    const files = (p: FsParams) => this.ready().files.operator(p?.policy);
    peer.handle('fs.read', (p: Req<'fs.read'>) =>
      files(p).read(p.path, {
        ...(p.offset !== undefined ? { offset: p.offset } : {}),
        ...(p.limit !== undefined ? { limit: p.limit } : {}),
      }),
    );
    peer.handle('fs.readBytes', async (p: Req<'fs.readBytes'>) => {
      const r = await files(p).readBytes(p.path, {
        ...(p.offset !== undefined ? { offset: p.offset } : {}),
        ...(p.length !== undefined ? { length: p.length } : {}),
      });
      return { path: r.path, data: r.data.toString('base64'), sizeBytes: r.sizeBytes };
    });
    peer.handle('fs.resolve', (p: Req<'fs.resolve'>) => files(p).resolvePaths(p.operation, p.path));
    peer.handle('fs.write', (p: Req<'fs.write'>) =>
      files(p).write(p.path, p.encoding === 'base64' ? Buffer.from(p.content, 'base64') : p.content, {
        ...(p.createDirs !== undefined ? { createDirs: p.createDirs } : {}),
      }),
    );
    peer.handle('fs.edit', (p: Req<'fs.edit'>) =>
      files(p).edit(p.path, {
        oldString: p.oldString,
        newString: p.newString,
        ...(p.replaceAll !== undefined ? { replaceAll: p.replaceAll } : {}),
      }),
    );
    peer.handle('fs.list', (p: Req<'fs.list'>) =>
      files(p).list(p.path, p.limit !== undefined ? { limit: p.limit } : {}),
    );
    peer.handle('fs.stat', (p: Req<'fs.stat'>) => files(p).stat(p.path));
    peer.handle('fs.glob', (p: Req<'fs.glob'>) =>
      files(p).glob(p.patterns, {
        ...(p.cwd !== undefined ? { cwd: p.cwd } : {}),
        ...(p.dot !== undefined ? { dot: p.dot } : {}),
        ...(p.ignore !== undefined ? { ignore: p.ignore } : {}),
        ...(p.limit !== undefined ? { limit: p.limit } : {}),
      }),
    );
    const terminal = () => this.ready().terminal;
    peer.handle('terminal.open', (p: { config?: Record<string, unknown>; forwardOutput?: boolean }) =>
      terminal().open(p.config ?? {}, p.forwardOutput === true),
    );
    peer.handle('terminal.permission', (p: { callId: string; args: unknown }) =>
      terminal().permission(p.callId, p.args),
    );
    peer.handle('terminal.execute', (p) => terminal().execute(p.callId, p.args, p.decision, p.kernelPolicy));
    peer.handle('terminal.abort', (p: { callId: string }) => terminal().abort(p.callId));
    peer.handle('terminal.list', () => terminal().list());
    peer.handle('terminal.readLog', (p: { id: number; clean?: boolean }) =>
      terminal().readLog(p.id, p.clean),
    );
    peer.handle('terminal.kill', (p: { id: number }) => terminal().kill(p.id));
  }

  private ready(): {
    manager: ProcessManager;
    processes: ProcessService;
    files: FileService;
    terminal: TerminalHost;
  } {
    if (this.shuttingDown) throw new ServerError('SHUTTING_DOWN', 'the exec server is shutting down');
    if (!this.manager || !this.processes || !this.files || !this.terminal) {
      throw new ServerError(
        'NOT_INITIALIZED',
        "expected 'initialize' before any other request; it was not sent",
      );
    }
    return { manager: this.manager, processes: this.processes, files: this.files, terminal: this.terminal };
  }

  private async initialize(params: InitializeParams): Promise<InitializeResult> {
    if (params?.version !== PROTOCOL_VERSION) {
      throw new ServerError(
        'PROTOCOL_MISMATCH',
        `conch exec protocol: this server speaks version ${PROTOCOL_VERSION}; the client speaks version ${String(params?.version)}`,
      );
    }
    if (this.manager)
      throw new ServerError('INVALID_PARAMS', 'initialize: expected once per connection; it was sent again');
    const cwd = resolveTargetPath(params.cwd ?? '.', process.cwd());
    let isDir = false;
    try {
      isDir = statSync(cwd).isDirectory();
    } catch {
      // reported below
    }
    if (!isDir) {
      throw new ServerError(
        'INVALID_PARAMS',
        `initialize 'cwd': expected an existing directory in the target; '${cwd}' is not one`,
      );
    }
    if (params.logLevel) this.logger.level = params.logLevel;
    this.keepTempFiles = params.keepTempFiles === true;
    removeStaleTempDirs();
    const tempDir = mkdtempSync(join(tmpdir(), 'conch-exec-'));
    // Who owns it: a later server removes it if this one died without cleaning up (SIGKILL).
    writeFileSync(join(tempDir, '.owner'), `${process.pid}\n`);
    this.tempDir = tempDir;
    // Before the terminal exists: whether it can run at all (and node-pty is loaded once, here).
    const pty = await probePty(this.options.ptyModule);
    this.manager = new ProcessManager({ cwd, tempDir: () => tempDir, logger: this.logger });
    this.processes = new ProcessService(this.manager, this.peer, this.logger);
    this.files = new FileService(cwd, tempDir);
    this.terminal = new TerminalHost({
      peer: this.peer,
      logger: this.logger,
      cwd,
      tempRoot: tempDir,
      manager: this.manager,
      pty,
    });
    if (params.idleTimeoutMs > 0) this.watchIdle(params.idleTimeoutMs);
    // The supervisor's start (a node boot) overlaps the client's first request instead of delaying it.
    this.manager.warmUp();
    this.logger.debug({ cwd, tempDir }, 'exec server initialized');
    return { cwd, tempDir, pty, ...(process.env.PATH ? { path: process.env.PATH } : {}) };
  }

  /**
   * A connection that stays open but silent (a dead network path the TCP stack has not noticed,
   * a client frozen by SIGSTOP) must not keep the target's processes alive forever: the client
   * pings, and silence longer than the idle timeout ends the server like a closed stream does.
   */
  private watchIdle(idleTimeoutMs: number): void {
    this.idleTimer = setInterval(
      () => {
        if (Date.now() - this.lastHeard > idleTimeoutMs) {
          void this.shutdown(`nothing heard from the client for ${idleTimeoutMs} ms`);
        }
      },
      Math.max(50, Math.min(idleTimeoutMs / 4, 5000)),
    );
  }

  private async doShutdown(reason: string): Promise<void> {
    this.logger.debug({ reason }, 'exec server shutting down');
    if (this.idleTimer) clearInterval(this.idleTimer);
    this.processes?.close();
    const work = (async () => {
      await this.terminal
        ?.dispose()
        .catch((error: unknown) => this.logger.warn({ err: error }, 'terminal dispose failed'));
      await this.manager?.dispose();
    })();
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([
      work,
      new Promise<void>((resolve) => (bound = setTimeout(resolve, SHUTDOWN_BOUND_MS))),
    ]);
    clearTimeout(bound);
    if (this.tempDir && !this.keepTempFiles) rmSync(this.tempDir, { recursive: true, force: true });
    this.peer.close(`shut down: ${reason}`);
    this.options.onShutdown?.(reason);
  }
}
