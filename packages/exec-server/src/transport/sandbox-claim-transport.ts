import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { Logger } from '@conch/core';
import { ExecServerStartError } from '../errors/exec-server-start-error.js';
import { resolveKubectlContext } from './kubectl-context.js';
import { KubectlTransport } from './kubectl-transport.js';
import type { Transport } from './transport.js';
import { clearStaleStat } from '@conch/core';

// kubernetes-sigs/agent-sandbox's API, as its types declare it (api/ and extensions/api/).
const EXTENSIONS_GROUP = 'extensions.agents.x-k8s.io';
const CLAIMS = `sandboxclaims.${EXTENSIONS_GROUP}`;
const SANDBOXES = 'sandboxes.agents.x-k8s.io';
/** On a Sandbox that adopted a warm pool pod: that pod's name (otherwise the pod is named after the Sandbox). */
const POD_NAME_ANNOTATION = 'agents.x-k8s.io/pod-name';
/** On a claim (an annotation from 0.5, a label before): the Sandbox it got. */
const SANDBOX_NAME_KEY = 'agents.x-k8s.io/sandbox-name';

const DEFAULT_READY_TIMEOUT_MS = 300_000;
/** Each create / get / delete: a hung API server must not hold a connection (or dispose) forever. */
const REQUEST_TIMEOUT_S = 30;

export interface SandboxClaimTransportOptions {
  /** A SandboxTemplate: an extensions.agents.x-k8s.io/v1alpha1 claim (`spec.sandboxTemplateRef`). */
  template?: string;
  /** A SandboxWarmPool: an extensions.agents.x-k8s.io/v1beta1 claim (`spec.warmPoolRef`). */
  warmPool?: string;
  /** Default: the kubeconfig context's. */
  namespace?: string;
  /** The container of the sandbox's pod to exec into. Default: kubectl's (the pod's default container). */
  container?: string;
  context?: string;
  kubeconfig?: string;
  /** The kubectl command. Default 'kubectl'. */
  kubectl?: string;
  /** Default 300000. */
  readyTimeoutMs?: number;
  /** Sets `spec.lifecycle.shutdownTime` this long after creation, with shutdownPolicy Delete. */
  shutdownAfterSeconds?: number;
  /** Leave the claim at dispose. */
  keep?: boolean;
  labels?: Record<string, string>;
  /** The claim's name. Default `conch-` and 10 random hex digits. */
  name?: string;
  logger?: Logger | undefined;
}

/** What a Ready claim resolved to. */
export interface SandboxClaimInfo {
  claim: string;
  namespace: string;
  context: string | undefined;
  sandbox: string;
  pod: string;
}

interface Condition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
}

interface KubeObject {
  metadata?: { name?: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  status?: { conditions?: Condition[]; sandbox?: { name?: string } };
}

/**
 * A pod of kubernetes-sigs/agent-sandbox, through the real kubectl (so kubeconfig auth, contexts
 * and namespaces behave as they do for the user): `prepare()` creates a SandboxClaim (`kubectl
 * create -f -`), waits until it is Ready (`kubectl wait --for=condition=Ready`), reads the Sandbox
 * it names and the pod that Sandbox names (a warm pool pod keeps its own name), and from then on
 * every connection is `kubectl exec -i` into that pod. `dispose()` deletes the claim (agent-sandbox
 * then deletes the Sandbox and the pod) unless `keep`; a claim that fails after its creation is
 * deleted before the failure is reported, and a host that exits without disposing starts the
 * delete on its way out. Against a host killed outright, `shutdownAfterSeconds` has agent-sandbox
 * reap the claim by itself.
 *
 * The label is fixed when the transport is made (results and instructions carry it), so it names
 * the claim, which is known then, and not the pod, which is not: `kubernetes:CONTEXT/NAMESPACE/
 * sandboxclaim/NAME`, a form `kubectl get` takes.
 */
export class SandboxClaimTransport implements Transport {
  readonly kind = 'kubernetes' as const;
  readonly target: string;
  readonly claimName: string;
  readonly namespace: string;
  readonly context: string | undefined;
  private readonly options: SandboxClaimTransportOptions;
  private readonly logger: Logger | undefined;
  private pod: KubectlTransport | undefined;
  private resolved: SandboxClaimInfo | undefined;
  private preparing: Promise<void> | undefined;
  /** The claim exists in the cluster (ours to delete), until a delete succeeds. */
  private created = false;
  private disposing: Promise<void> | undefined;
  private readonly abort = new AbortController();

  constructor(options: SandboxClaimTransportOptions) {
    if ((options.template === undefined) === (options.warmPool === undefined)) {
      throw new TypeError('SandboxClaimTransport: expected exactly one of `template` or `warmPool`');
    }
    this.options = options;
    this.logger = options.logger;
    // Pinned now: the create, the wait, the exec and the delete all go to the same place.
    const where =
      options.namespace !== undefined && options.context !== undefined
        ? { context: options.context, namespace: options.namespace }
        : resolveKubectlContext(options);
    this.namespace = where.namespace;
    this.context = where.context;
    this.claimName = options.name ?? `conch-${randomBytes(5).toString('hex')}`;
    this.target = `kubernetes:${this.context ? `${this.context}/` : ''}${this.namespace}/sandboxclaim/${this.claimName}${options.container ? `/${options.container}` : ''}`;
  }

  /** The Sandbox and pod the claim got (after `prepare()`). */
  get info(): SandboxClaimInfo | undefined {
    return this.resolved;
  }

  prepare(): Promise<void> {
    if (this.pod) return Promise.resolve();
    if (this.disposing || this.abort.signal.aborted) {
      return Promise.reject(this.startError('the executor was disposed before its SandboxClaim was Ready'));
    }
    // A failed attempt deleted its claim: the next call may try again (under the same name).
    this.preparing ??= this.claim().finally(() => {
      this.preparing = undefined;
    });
    return this.preparing;
  }

  command(argv: readonly string[]): { file: string; args: string[] } {
    // The client prepares before it starts a server (ExecClient.start); this is the guard if not.
    if (!this.pod) throw this.startError('its SandboxClaim is not Ready yet (prepare() was not called)');
    return this.pod.command(argv);
  }

  describeExit(code: number | null, stderr: string): string | undefined {
    const hint = this.pod?.describeExit(code, stderr);
    if (hint && /not found/i.test(stderr)) {
      return `${hint} (the pod of SandboxClaim ${this.claimName}: the claim may have expired or been deleted)`;
    }
    return hint;
  }

  cancelPrepare(): void {
    // Ends a kubectl create or wait in progress; the claim's failure path then deletes it.
    this.abort.abort();
  }

  dispose(): Promise<void> {
    this.disposing ??= (async () => {
      // A wait in progress ends now; its failure path deletes the claim.
      this.abort.abort();
      await this.preparing?.catch(() => {});
      if (this.created && !this.options.keep) await this.deleteClaim(false);
      else if (this.created && this.options.keep) {
        this.logger?.info(
          { claim: this.claimName, namespace: this.namespace },
          'executor: SandboxClaim kept (keep: true)',
        );
      }
    })();
    return this.disposing;
  }

  disposeSync(): void {
    if (!this.created || this.options.keep) return;
    // The host is exiting: start the delete and leave it running (the API server completes it).
    try {
      const child = spawn(
        this.kubectlFile(),
        this.kubectlArgs(['delete', this.ref(), '--ignore-not-found', '--wait=false']),
        {
          detached: true,
          stdio: 'ignore',
        },
      );
      child.on('error', () => {});
      child.unref();
      this.created = false;
    } catch {
      // exiting: nothing left to report to
    }
  }

  // ---- the claim ----

  private async claim(): Promise<void> {
    const created = await this.kubectl(['create', '-f', '-', '-o', 'name'], {
      input: JSON.stringify(this.manifest()),
    });
    if (created.exitCode !== 0) {
      const stderr = String(created.stderr);
      // The create may have reached the API server before it failed (a timeout): make sure no
      // claim of ours is left. An existing claim of that name is someone else's: leave it.
      if (!/AlreadyExists|already exists/.test(stderr)) await this.deleteClaim(true, { quiet: true });
      throw this.startError(
        `could not create SandboxClaim ${this.claimName} in namespace ${this.namespace}: ${lastLine(stderr, created.exitCode)}${installHint(stderr)}`,
      );
    }
    this.created = true;
    try {
      const claim = await this.waitReady();
      this.resolved = await this.readSandbox(claim);
      this.pod = new KubectlTransport({
        pod: this.resolved.pod,
        namespace: this.namespace,
        ...(this.context !== undefined ? { context: this.context } : {}),
        ...(this.options.container !== undefined ? { container: this.options.container } : {}),
        ...(this.options.kubeconfig !== undefined ? { kubeconfig: this.options.kubeconfig } : {}),
        ...(this.options.kubectl !== undefined ? { kubectl: this.options.kubectl } : {}),
      });
      this.logger?.debug({ target: this.target, ...this.resolved }, 'executor: SandboxClaim ready');
    } catch (error) {
      // Whatever failed after the claim was made, the claim must not outlive the failure (keep
      // is for a sandbox that worked).
      await this.deleteClaim(true);
      throw error;
    }
  }

  private manifest(): Record<string, unknown> {
    const o = this.options;
    const lifecycle =
      o.shutdownAfterSeconds !== undefined
        ? {
            lifecycle: {
              // RFC 3339 in whole seconds, as metav1.Time writes it.
              shutdownTime: new Date(Date.now() + o.shutdownAfterSeconds * 1000)
                .toISOString()
                .replace(/\.\d+Z$/, 'Z'),
              shutdownPolicy: 'Delete',
            },
          }
        : {};
    return {
      // v1alpha1 refers to a template; v1beta1 (agent-sandbox 0.5) to a warm pool only.
      apiVersion: `${EXTENSIONS_GROUP}/${o.template !== undefined ? 'v1alpha1' : 'v1beta1'}`,
      kind: 'SandboxClaim',
      metadata: {
        name: this.claimName,
        namespace: this.namespace,
        labels: { ...o.labels, 'app.kubernetes.io/managed-by': 'conch' },
      },
      spec: {
        ...(o.template !== undefined
          ? { sandboxTemplateRef: { name: o.template } }
          : { warmPoolRef: { name: o.warmPool } }),
        ...lifecycle,
      },
    };
  }

  /** `kubectl wait --for=condition=Ready`, then the claim as it was when Ready. */
  private async waitReady(): Promise<KubeObject> {
    const timeoutMs = this.options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
    const seconds = Math.max(1, Math.ceil(timeoutMs / 1000));
    const waited = await this.kubectl(
      ['wait', '--for=condition=Ready', `--timeout=${seconds}s`, this.ref(), '-o', 'json'],
      // kubectl's own --timeout ends it; this only catches a kubectl that hangs past it.
      { timeoutMs: timeoutMs + 60_000, requestTimeout: false },
    );
    if (waited.exitCode === 0) {
      try {
        return JSON.parse(String(waited.stdout)) as KubeObject;
      } catch {
        return this.getJson(this.ref());
      }
    }
    if (this.abort.signal.aborted) {
      throw this.startError(
        `the executor was disposed while SandboxClaim ${this.claimName} was becoming Ready`,
      );
    }
    // Why not: the claim's own Ready condition says it better than kubectl's timeout.
    const last = await this.getJson(this.ref()).catch(() => undefined);
    const ready = last?.status?.conditions?.find((c) => c.type === 'Ready');
    const why = ready
      ? `its last Ready condition: ${ready.status ?? '?'}${ready.reason ? ` (${ready.reason})` : ''}${ready.message ? `: ${ready.message}` : ''}`
      : `no Ready condition reported${last ? '' : ' (the claim could not be read back)'}; kubectl: ${lastLine(String(waited.stderr), waited.exitCode)}`;
    throw this.startError(
      `SandboxClaim ${this.claimName} in namespace ${this.namespace} did not become Ready within ${seconds} s; ${why}`,
    );
  }

  private async readSandbox(claim: KubeObject): Promise<SandboxClaimInfo> {
    const sandboxName =
      claim.status?.sandbox?.name ||
      claim.metadata?.annotations?.[SANDBOX_NAME_KEY] ||
      claim.metadata?.labels?.[SANDBOX_NAME_KEY];
    if (!sandboxName) {
      throw this.startError(
        `SandboxClaim ${this.claimName} is Ready but names no Sandbox (status.sandbox.name is empty)`,
      );
    }
    const sandbox = await this.getJson(`${SANDBOXES}/${sandboxName}`);
    // A warm pool pod is adopted under its own name, recorded on the Sandbox.
    const pod = sandbox.metadata?.annotations?.[POD_NAME_ANNOTATION] || sandbox.metadata?.name || sandboxName;
    return {
      claim: this.claimName,
      namespace: this.namespace,
      context: this.context,
      sandbox: sandboxName,
      pod,
    };
  }

  private async getJson(ref: string): Promise<KubeObject> {
    const got = await this.kubectl(['get', ref, '-o', 'json']);
    if (got.exitCode !== 0) {
      throw this.startError(
        `could not read ${ref} in namespace ${this.namespace}: ${lastLine(String(got.stderr), got.exitCode)}`,
      );
    }
    return JSON.parse(String(got.stdout)) as KubeObject;
  }

  /**
   * Deletes the claim (agent-sandbox's owner references take the Sandbox and pod with it). After a
   * failure it waits until the claim is gone, so a retry can reuse the name; at dispose it does not
   * hold the host up for the cluster's garbage collection. A delete that fails is logged with what
   * to run by hand, never thrown from dispose.
   */
  private async deleteClaim(wait: boolean, { quiet = false } = {}): Promise<void> {
    const deleted = await this.kubectl(
      [
        'delete',
        this.ref(),
        '--ignore-not-found',
        `--wait=${wait}`,
        ...(wait ? [`--timeout=${REQUEST_TIMEOUT_S}s`] : []),
      ],
      { cancellable: false },
    ).catch((error: unknown) => ({ exitCode: -1, stderr: (error as Error).message, stdout: '' }));
    if (deleted.exitCode === 0) {
      this.created = false;
      return;
    }
    // After a create that failed, whether there is anything to delete is unknown: no warning.
    this.logger?.[quiet ? 'debug' : 'warn'](
      {
        claim: this.claimName,
        namespace: this.namespace,
        stderr: lastLine(String(deleted.stderr), deleted.exitCode ?? null),
      },
      `executor: could not delete SandboxClaim ${this.claimName}; delete it with: kubectl delete ${this.ref()} -n ${this.namespace}`,
    );
  }

  // ---- kubectl ----

  private ref(): string {
    return `${CLAIMS}/${this.claimName}`;
  }

  private kubectlFile(): string {
    return this.options.kubectl ?? 'kubectl';
  }

  private kubectlArgs(args: readonly string[], requestTimeout = true): string[] {
    const o = this.options;
    return [
      ...(this.context !== undefined ? ['--context', this.context] : []),
      ...(o.kubeconfig !== undefined ? ['--kubeconfig', o.kubeconfig] : []),
      '--namespace',
      this.namespace,
      ...(requestTimeout ? [`--request-timeout=${REQUEST_TIMEOUT_S}s`] : []),
      ...args,
    ];
  }

  private async kubectl(
    args: readonly string[],
    options: { input?: string; timeoutMs?: number; requestTimeout?: boolean; cancellable?: boolean } = {},
  ) {
    const argv = this.kubectlArgs(args, options.requestTimeout ?? true);
    this.logger?.debug({ target: this.target, kubectl: argv.join(' ') }, 'executor: kubectl');
    // Loaded on first use: execa and its dependencies are ~100 modules a host that never claims a
    // sandbox (conch-mcp's start among them) would otherwise load at import.
    clearStaleStat(); // a lazy import of a linked package: see @conch/core's stale-stat.ts
    const { execa } = await import('execa');
    return await execa(this.kubectlFile(), argv, {
      ...(options.input !== undefined ? { input: options.input } : { stdin: 'ignore' as const }),
      reject: false,
      timeout: options.timeoutMs ?? (REQUEST_TIMEOUT_S + 30) * 1000,
      ...(options.cancellable === false ? {} : { cancelSignal: this.abort.signal }),
      encoding: 'utf8',
    });
  }

  private startError(detail: string): ExecServerStartError {
    return new ExecServerStartError(this.target, 'claim', detail);
  }
}

function lastLine(stderr: string, code: number | null | undefined): string {
  const lines = stderr
    .trim()
    .split('\n')
    .filter((l) => l.trim() && !l.startsWith('Warning: '));
  return lines.at(-1)?.trim() ?? `kubectl exited with ${code ?? 'a signal'}`;
}

function installHint(stderr: string): string {
  return /no matches for kind|doesn't have a resource type|could not find the requested resource/i.test(
    stderr,
  )
    ? ' (is agent-sandbox installed with its extensions? `template` needs the v1alpha1 SandboxClaim, `warmPool` the v1beta1 one of agent-sandbox 0.5 or later)'
    : '';
}
