import type { Transport } from './transport.js';

export interface ContainerTransportOptions {
  engine: 'docker' | 'podman';
  /** Container name or id (running). */
  container: string;
  /** `--user` for the exec (default: the container's user). */
  user?: string;
  /** The engine's command (default: `engine`), e.g. an absolute path. */
  command?: string;
  /** Global engine arguments placed before `exec` (e.g. podman's `--runtime runc`). */
  engineArgs?: readonly string[];
}

/** `docker exec -i` / `podman exec -i` into a running container. */
export class ContainerTransport implements Transport {
  readonly kind = 'container' as const;
  readonly target: string;
  private readonly options: ContainerTransportOptions;

  constructor(options: ContainerTransportOptions) {
    this.options = options;
    this.target = `${options.engine}:${options.container}`;
  }

  command(argv: readonly string[]): { file: string; args: string[] } {
    const o = this.options;
    return {
      file: o.command ?? o.engine,
      args: [
        ...(o.engineArgs ?? []),
        'exec',
        '-i',
        ...(o.user ? ['--user', o.user] : []),
        o.container,
        ...argv,
      ],
    };
  }

  describeExit(code: number | null, stderr: string): string | undefined {
    if (code === 127 && /node/.test(stderr))
      return "node was not found in the container (set the executor's `node`)";
    if (code === 125 || code === 126 || /no such container|is not running/i.test(stderr)) {
      return `${this.options.engine} exec failed: ${stderr.trim().split('\n').at(-1) ?? `exit ${code}`}`;
    }
    return undefined;
  }

  async dispose(): Promise<void> {}
}
