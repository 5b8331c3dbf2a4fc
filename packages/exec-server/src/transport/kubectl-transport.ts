import type { Transport } from './transport.js';

export interface KubectlTransportOptions {
  pod: string;
  namespace?: string;
  container?: string;
  context?: string;
  kubeconfig?: string;
  /** The kubectl command. Default 'kubectl'. */
  kubectl?: string;
}

/**
 * `kubectl exec -i` into a pod's container. Untested against a real cluster here (see the README):
 * the protocol runs over it exactly as over the other transports, and a dropped stream that
 * kubectl does not propagate as stdin EOF is caught by the server's idle timeout.
 */
export class KubectlTransport implements Transport {
  readonly kind = 'kubernetes' as const;
  readonly target: string;
  private readonly options: KubectlTransportOptions;

  constructor(options: KubectlTransportOptions) {
    this.options = options;
    const o = options;
    this.target = `kubernetes:${o.context ? `${o.context}/` : ''}${o.namespace ?? 'default'}/${o.pod}${o.container ? `/${o.container}` : ''}`;
  }

  command(argv: readonly string[]): { file: string; args: string[] } {
    const o = this.options;
    return {
      file: o.kubectl ?? 'kubectl',
      args: [
        ...(o.context ? ['--context', o.context] : []),
        ...(o.kubeconfig ? ['--kubeconfig', o.kubeconfig] : []),
        'exec',
        '-i',
        ...(o.namespace ? ['-n', o.namespace] : []),
        o.pod,
        ...(o.container ? ['-c', o.container] : []),
        '--',
        ...argv,
      ],
    };
  }

  describeExit(code: number | null, stderr: string): string | undefined {
    if (/not found|forbidden|unable to upgrade|error:/i.test(stderr)) {
      return `kubectl exec failed: ${stderr.trim().split('\n').at(-1) ?? `exit ${code}`}`;
    }
    return undefined;
  }

  async dispose(): Promise<void> {}
}
