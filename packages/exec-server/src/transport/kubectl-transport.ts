import { resolveKubectlContext } from './kubectl-context.js';
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
 * `kubectl exec -i` into a pod's container. Tested against the real kubectl and a stand-in API
 * server, not a real cluster (see the README): the protocol runs over it exactly as over the other
 * transports, and a dropped stream that kubectl does not propagate as stdin EOF is caught by the
 * server's idle timeout.
 */
export class KubectlTransport implements Transport {
  readonly kind = 'kubernetes' as const;
  readonly target: string;
  private readonly options: KubectlTransportOptions;

  constructor(options: KubectlTransportOptions) {
    // Without a namespace, kubectl takes the kubeconfig context's: pin it (and that context), so
    // the label names where commands run and every exec goes there.
    this.options =
      options.namespace === undefined ? { ...options, ...resolveKubectlContext(options) } : options;
    const o = this.options;
    this.target = `kubernetes:${o.context ? `${o.context}/` : ''}${o.namespace}/${o.pod}${o.container ? `/${o.container}` : ''}`;
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
