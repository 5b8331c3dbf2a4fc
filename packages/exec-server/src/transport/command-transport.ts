import type { Transport } from './transport.js';

/**
 * Any command that runs its trailing argv in a target with stdin/stdout passed through (e.g.
 * `['lxc', 'exec', 'box', '--']`, or `[]` for this machine). The other transports are this with
 * their flags worked out.
 */
export class CommandTransport implements Transport {
  readonly kind = 'command' as const;
  readonly target: string;
  private readonly prefix: readonly string[];

  constructor(options: { command: readonly string[]; target: string }) {
    this.prefix = options.command;
    this.target = options.target;
  }

  command(argv: readonly string[]): { file: string; args: string[] } {
    const [file, ...args] = [...this.prefix, ...argv];
    return { file: file!, args };
  }

  async dispose(): Promise<void> {}
}
