import type { SandboxProfile } from '@conch/process';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type * as NodePty from '@lydell/node-pty';
import { COOKIE_VAR } from './process-tree.js';

/**
 * The PTY a session's shell runs under, as the session needs it: the same shape as
 * `@conch/process`'s `PtyProcess`, so a session does not care whether node-pty runs in this
 * process or in the registry's supervisor.
 */
export interface SessionPty {
  /** The shell's pid. */
  readonly pid: number;
  /** The env cookie (CONCH_PROC_COOKIE) the shell and everything it starts carry. */
  readonly cookie: string;
  onData(listener: (data: string) => void): () => void;
  /**
   * Called once, when the shell exited. `supervisorLost`: it did not end on its own, its
   * supervisor went away (why, in words; `supervisorUnresponsive` when it stopped answering).
   */
  onExit(
    listener: (e: {
      exitCode: number;
      signal: number;
      supervisorLost?: string;
      supervisorUnresponsive?: true;
    }) => void,
  ): () => void;
  write(data: string): void;
  resize(cols: number, rows: number): void;
  /** Signals the shell process only. */
  kill(signal?: NodeJS.Signals): void;
  /**
   * The shell made no progress while the session waited on it: whether the supervisor that relays
   * its input is not answering or gone (then it is judged now; see `@conch/process` PtyProcess).
   */
  overdue?(): boolean;
}

export interface SessionPtyOptions {
  file: string;
  args: readonly string[];
  cwd: string;
  /** The shell's environment (the cookie is added by the spawner). */
  env: Record<string, string>;
  cols: number;
  rows: number;
  /** The session runs outside the sandbox (a human approved it); default inside. */
  outside?: boolean;
}

/** Starts a PTY: in this process (`spawnLocalPty`) or through a process manager. */
export type SessionPtySpawner = (options: SessionPtyOptions) => SessionPty;

const requireHere = createRequire(import.meta.url);
let nodePty: typeof NodePty | undefined;
/**
 * node-pty, loaded at the first session that spawns in this process rather than at import: its
 * native addon and modules cost a host (and conch-mcp's start, where most sessions spawn through
 * the supervisor anyway) ~5 ms it may never need.
 */
function localPty(): typeof NodePty {
  nodePty ??= requireHere('@lydell/node-pty') as typeof NodePty;
  return nodePty;
}

/** node-pty in this process. The shell does not outlive the host on SIGKILL (no supervisor). */
export const spawnLocalPty: SessionPtySpawner = (options) => {
  const pty = localPty();
  const cookie = `terminal-${randomBytes(8).toString('hex')}`;
  const env: Record<string, string> = { ...options.env, [COOKIE_VAR]: cookie };
  const child = pty.spawn(options.file, [...options.args], {
    name: env.TERM ?? 'xterm-256color',
    cols: options.cols,
    rows: options.rows,
    cwd: options.cwd,
    env,
  });
  let exited = false;
  child.onExit(() => {
    exited = true;
  });
  return {
    pid: child.pid,
    cookie,
    onData(listener) {
      const d = child.onData(listener);
      return () => d.dispose();
    },
    onExit(listener) {
      const d = child.onExit(({ exitCode, signal }) => listener({ exitCode, signal: signal ?? 0 }));
      return () => d.dispose();
    },
    write(data) {
      if (!exited) child.write(data);
    },
    resize(cols, rows) {
      if (exited) return;
      try {
        child.resize(cols, rows);
      } catch {
        // closed meanwhile
      }
    },
    kill(signal = 'SIGHUP') {
      if (exited) return;
      try {
        process.kill(child.pid, signal);
      } catch {
        // gone already
      }
    },
  };
};

/** What a session needs of `@conch/process`'s ProcessManager. */
export interface PtyManager {
  spawnPty(
    options: SessionPtyOptions & { ptyModule: string; label?: string; sandbox?: SandboxProfile },
  ): SessionPty;
}

/**
 * PTYs through the registry's process manager: its supervisor owns them, so a session dies with
 * the host even when the host is SIGKILLed (the manager itself spawns in this process when it has
 * no supervisor). Falls back to node-pty in this process when the manager cannot start one (a
 * supervisor-side node-pty failure), but never after the manager was disposed.
 */
export function managedPtySpawner(
  manager: PtyManager & { readonly disposed?: boolean },
  onFallback: (error: unknown) => void,
  /** The kernel wall around each new session (read when it starts): the sandbox, or protected paths read-only. */
  sandbox: (options: SessionPtyOptions) => SandboxProfile | undefined = () => undefined,
  /** The environment of a session that runs outside the sandbox (see the plugin's `envOutside`). */
  envOutside: (env: Record<string, string>) => Record<string, string> = (env) => env,
): SessionPtySpawner {
  const ptyModule = requireHere.resolve('@lydell/node-pty');
  return (given) => {
    const profile = sandbox(given);
    // A shell that may run outside any sandbox (a human let it out; the gate's sandbox off) finds
    // programs and loads code only where no sandboxed command could have put them.
    const outside =
      profile?.kind === 'protected' || (profile?.kind === 'read-only' && profile.required !== true);
    const options = outside ? { ...given, env: envOutside(given.env) } : given;
    const { outside: _outside, ...ptyOptions } = options;
    try {
      return manager.spawnPty({
        ...ptyOptions,
        ptyModule,
        label: 'terminal session',
        ...(profile ? { sandbox: profile } : {}),
      });
    } catch (error) {
      // A session that must run in the sandbox never falls back to an unsandboxed PTY.
      if (
        manager.disposed ||
        profile?.kind === 'workspace-write' ||
        (profile?.kind === 'read-only' && profile.required)
      )
        throw error;
      onFallback(error);
      return spawnLocalPty(options);
    }
  };
}
