import { COOKIE_VAR } from './kill-tree.js';
import { killTreeSync } from './process-tree.js';
import { loadPtyModule, type NodePty } from './pty-module.js';
import type { PtySpawnReply, PtySpawnRequest, SupervisorMessage } from './supervisor-protocol.js';

type Send = (message: SupervisorMessage, onSent?: () => void) => void;

/** Relayed chunks the host has not taken yet before a PTY is paused (the program then blocks on the tty). */
const PAUSE_AT = 256;
const RESUME_AT = 32;

interface Pty {
  pty: NodePty;
  cookie: string;
  inFlight: number;
  paused: boolean;
}

/**
 * PTYs one supervisor started with node-pty: output relayed to the host as `pty-data` messages
 * (with flow control: a PTY whose output the host has not taken is paused), input and resizes
 * taken from the host (signals the host sends itself: pids are the host's). Their whole trees die with the host.
 */
export class SupervisorPtys {
  private readonly ptys = new Map<number, Pty>();
  private readonly send: Send;
  /** Called when a PTY is started (the sandbox's process-limit watch wakes up). */
  onStart: (() => void) | undefined;

  constructor(send: Send) {
    this.send = send;
  }

  spawn(request: PtySpawnRequest): PtySpawnReply {
    const { id } = request;
    this.onStart?.();
    let pty: NodePty;
    try {
      pty = loadPtyModule(request.ptyModule).spawn(request.file, [...request.args], {
        name: request.env.TERM ?? 'xterm-256color',
        cols: request.cols,
        rows: request.rows,
        cwd: request.cwd,
        env: request.env,
      });
    } catch (error) {
      const e = error as NodeJS.ErrnoException;
      return { id, error: { code: e.code ?? 'EPTY', message: e.message } };
    }
    const entry: Pty = { pty, cookie: request.env[COOKIE_VAR] ?? '', inFlight: 0, paused: false };
    this.ptys.set(id, entry);
    pty.onData((data) => {
      entry.inFlight++;
      if (entry.inFlight >= PAUSE_AT && !entry.paused) {
        entry.paused = true;
        pty.pause();
      }
      this.send({ t: 'pty-data', id, data }, () => {
        entry.inFlight--;
        if (entry.paused && entry.inFlight <= RESUME_AT) {
          entry.paused = false;
          pty.resume();
        }
      });
    });
    pty.onExit(({ exitCode, signal }) => {
      this.ptys.delete(id);
      this.send({ t: 'pty-exit', id, exitCode, signal: signal ?? 0 });
    });
    return { id, pid: pty.pid };
  }

  write(id: number, data: string): void {
    this.ptys.get(id)?.pty.write(data);
  }

  resize(id: number, cols: number, rows: number): void {
    try {
      this.ptys.get(id)?.pty.resize(cols, rows);
    } catch {
      // the pty closed meanwhile
    }
  }

  /** SIGKILLs every PTY's whole tree (a shell's jobs are in their own groups: walk by ppid + cookie). */
  killAll(): void {
    for (const { pty, cookie } of this.ptys.values()) killTreeSync(pty.pid, cookie || undefined);
  }
}
