import { spawnSync } from 'node:child_process';
// eslint-disable-next-line no-restricted-imports -- reads the pod's service-account namespace, the kubelet's file
import { readFileSync } from 'node:fs';

export interface KubectlContextOptions {
  kubectl?: string | undefined;
  kubeconfig?: string | undefined;
  context?: string | undefined;
  namespace?: string | undefined;
}

/** The kubeconfig context and namespace kubectl uses, as found when the target was made. */
export interface ResolvedKubectlContext {
  /** The context kubectl resolved (undefined in-cluster, or when kubectl could not say). */
  context: string | undefined;
  namespace: string;
}

// Where kubectl's in-cluster config (no kubeconfig at all, inside a pod) takes its namespace.
const SERVICE_ACCOUNT_NAMESPACE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/**
 * Asks kubectl which context and namespace it would use (`kubectl config view --minify`: the
 * kubeconfig files, KUBECONFIG, `--context`), so that a target's label says the namespace its
 * commands really go to, not `default`, and every later kubectl call is pinned to it (a
 * `kubectl config use-context` in between must not send a claim's delete to another cluster than
 * its create). Reads the kubeconfig only, no API server. Synchronous because a target's label is
 * fixed when it is made; it runs only when the config leaves the namespace to the kubeconfig.
 */
export function resolveKubectlContext(options: KubectlContextOptions): ResolvedKubectlContext {
  const args = [
    ...(options.kubeconfig ? ['--kubeconfig', options.kubeconfig] : []),
    ...(options.context ? ['--context', options.context] : []),
    'config',
    'view',
    '--minify',
    '-o',
    'json',
  ];
  const run = spawnSync(options.kubectl ?? 'kubectl', args, {
    encoding: 'utf8',
    timeout: 10_000,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let view: { 'current-context'?: string; contexts?: { name?: string; context?: { namespace?: string } }[] } =
    {};
  if (run.status === 0) {
    try {
      view = JSON.parse(run.stdout) as typeof view;
    } catch {
      // Not kubectl's JSON (a wrapper, a stand-in): the defaults below.
    }
  }
  const entry = view.contexts?.[0];
  const context = options.context ?? (entry?.name || view['current-context'] || undefined);
  const namespace =
    options.namespace ??
    (entry?.context?.namespace || (entry ? undefined : inClusterNamespace()) || 'default');
  return { context, namespace };
}

/** kubectl without a kubeconfig, in a pod: POD_NAMESPACE, else the service account's namespace. */
function inClusterNamespace(): string | undefined {
  if (!process.env.KUBERNETES_SERVICE_HOST) return undefined;
  if (process.env.POD_NAMESPACE) return process.env.POD_NAMESPACE;
  try {
    return readFileSync(SERVICE_ACCOUNT_NAMESPACE, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
