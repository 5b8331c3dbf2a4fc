import { createRequire } from 'node:module';

/**
 * The part of node-pty (`@lydell/node-pty` or `node-pty`) conch uses. @conch/process does not depend
 * on node-pty: the caller resolves the module and passes its absolute path, which is loaded here
 * (in the supervisor, or in the host when there is no supervisor).
 */
export interface PtyModule {
  spawn(
    file: string,
    args: string[],
    options: { name: string; cols: number; rows: number; cwd: string; env: Record<string, string> },
  ): NodePty;
}

export interface NodePty {
  readonly pid: number;
  onData(listener: (data: string) => void): { dispose(): void };
  onExit(listener: (event: { exitCode: number; signal?: number }) => void): { dispose(): void };
  write(data: string): void;
  resize(cols: number, rows: number): void;
  kill(signal?: string): void;
  pause(): void;
  resume(): void;
}

const require = createRequire(import.meta.url);
const loaded = new Map<string, PtyModule>();

/** Loads (once per path) the node-pty entry at `path`. Throws what `require` throws. */
export function loadPtyModule(path: string): PtyModule {
  let mod = loaded.get(path);
  if (!mod) {
    mod = require(path) as PtyModule;
    if (typeof mod?.spawn !== 'function') {
      // A plain Error on purpose: this module runs inside the supervisor, which imports node
      // built-ins only (no @conch/core); callers on the host report it as their own ConchError.
      throw new Error(`${path} does not export spawn(): expected the node-pty entry point`);
    }
    loaded.set(path, mod);
  }
  return mod;
}
