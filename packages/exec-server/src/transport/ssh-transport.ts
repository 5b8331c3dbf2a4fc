import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { makeTempDir, removeSync, clearStaleStat } from '@conch/core';
import { shellJoin } from '@conch/shell-syntax';
import type { Transport } from './transport.js';

export interface SshTransportOptions {
  host: string;
  port?: number;
  user?: string;
  /** Private key file (`-i`; IdentitiesOnly is then set so ssh-agent keys do not exhaust MaxAuthTries). */
  identityFile?: string;
  /** Extra ssh options as `Key=Value` (each passed with `-o`), e.g. 'StrictHostKeyChecking=accept-new'. */
  options?: readonly string[];
  /** The ssh client. Default 'ssh'. */
  ssh?: string;
  /** Seconds the control master stays up after its last session. Default 600. */
  controlPersistSeconds?: number;
}

/**
 * ssh with a persistent control connection: every session (the server's connection, a reconnect)
 * is multiplexed over one authenticated master (`ControlMaster=auto`, `ControlPersist`), so only
 * the first pays the handshake. The control socket lives in a private directory of this transport,
 * so dispose (`ssh -O exit`) ends only this transport's master, never another host's.
 *
 * The remote command is run by the remote user's login shell: argv is quoted for POSIX shells
 * (sh, bash, dash, zsh, ksh), and the boot script travels base64-encoded so no shell sees its text.
 */
export class SshTransport implements Transport {
  readonly kind = 'ssh' as const;
  readonly target: string;
  private readonly options: SshTransportOptions;
  private controlDir: string | undefined;
  /** Control dirs of masters given up by `reset` that are still being ended. */
  private readonly retired = new Set<Promise<void>>();

  constructor(options: SshTransportOptions) {
    this.options = options;
    const user = options.user ? `${options.user}@` : '';
    this.target = `ssh:${user}${options.host}${options.port !== undefined ? `:${options.port}` : ''}`;
  }

  /** The ssh arguments that select this host and its control connection (before the command). */
  baseArgs(): string[] {
    this.controlDir ??= makeTempDir('conch-ssh-');
    const o = this.options;
    const args = [
      '-o',
      'BatchMode=yes',
      '-o',
      'ControlMaster=auto',
      // %C: a hash of the connection's parameters, short enough for a socket path.
      '-o',
      `ControlPath=${join(this.controlDir, '%C')}`,
      '-o',
      `ControlPersist=${o.controlPersistSeconds ?? 600}`,
      // A dead network path is noticed by the client within ~45 s.
      '-o',
      'ServerAliveInterval=15',
      '-o',
      'ServerAliveCountMax=3',
    ];
    if (o.port !== undefined) args.push('-p', String(o.port));
    if (o.user) args.push('-l', o.user);
    if (o.identityFile) args.push('-i', o.identityFile, '-o', 'IdentitiesOnly=yes');
    for (const option of o.options ?? []) args.push('-o', option);
    return args;
  }

  command(argv: readonly string[]): { file: string; args: string[] } {
    const words = argv.map((word, i) =>
      // `node -e <script>`: the script (quotes, newlines) goes as base64, decoded by node itself.
      i > 0 && argv[i - 1] === '-e'
        ? `eval(Buffer.from("${Buffer.from(word).toString('base64')}","base64").toString())`
        : word,
    );
    return {
      file: this.options.ssh ?? 'ssh',
      // -T: no tty (a byte stream, not a terminal); the command replaces the login shell (exec).
      args: ['-T', ...this.baseArgs(), '--', this.options.host, `exec ${shellJoin(words)}`],
    };
  }

  describeExit(code: number | null, stderr: string): string | undefined {
    if (code === 255) return `ssh could not connect: ${lastLine(stderr) ?? 'no message'}`;
    if (code === 127)
      return "node was not found on the remote PATH (set the executor's `node` to its absolute path)";
    return undefined;
  }

  /**
   * A session through the master went silent: the master may sit on a dead network path (it
   * notices only after ServerAliveInterval x ServerAliveCountMax), and every reconnect through it
   * would hang. The next connection gets a master of its own (a new control dir); the old one is
   * asked to exit (bounded: a master that cannot answer is killed by ssh's own keepalive later).
   */
  reset(): void {
    const dir = this.controlDir;
    if (!dir) return;
    this.controlDir = undefined;
    const ending = this.endMaster(dir).finally(() => this.retired.delete(ending));
    this.retired.add(ending);
  }

  async dispose(): Promise<void> {
    const dir = this.controlDir;
    this.controlDir = undefined;
    await Promise.all([...this.retired, ...(dir ? [this.endMaster(dir)] : [])]);
  }

  private async endMaster(dir: string): Promise<void> {
    // Loaded on first use, not at import (see ExecClient.start).
    clearStaleStat(); // a lazy import of a linked package: see @conch/core's stale-stat.ts
    const { execa } = await import('execa');
    await execa(this.options.ssh ?? 'ssh', [...this.exitArgs(dir)], {
      reject: false,
      timeout: 5000,
      stdin: 'ignore',
    });
    removeSync(dir, { recursive: true, force: true });
  }

  disposeSync(): void {
    const dir = this.controlDir;
    if (!dir) return;
    this.controlDir = undefined;
    spawnSync(this.options.ssh ?? 'ssh', this.exitArgs(dir), { timeout: 5000, stdio: 'ignore' });
    removeSync(dir, { recursive: true, force: true });
  }

  private exitArgs(dir: string): string[] {
    const o = this.options;
    const args = ['-o', `ControlPath=${join(dir, '%C')}`, '-O', 'exit'];
    if (o.port !== undefined) args.push('-p', String(o.port));
    if (o.user) args.push('-l', o.user);
    for (const option of o.options ?? []) args.push('-o', option);
    return [...args, '--', o.host];
  }
}

function lastLine(text: string): string | undefined {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .at(-1);
}
