// kind 'kubernetes' with `claim`, through the real kubectl against a stand-in API server playing kubernetes-sigs/agent-sandbox: the whole target suite in a claimed pod, and the claim's lifecycle (created with its template or warm pool in the context's namespace, the pod its Sandbox names, deleted at dispose unless kept, deleted after a failed start), the namespace a label names, and the pod executor through the real kubectl. Not a real cluster.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import 'reflect-metadata';
import { PluginRegistry } from '@conch/core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { executorFromConfig, parseExecutorConfig, type ExecutionTarget } from './execution-target.js';
import { executorPlugin } from './executor-plugin.js';
import { EXECUTION_TARGET } from './tokens.js';
import { memoryLogger, waitFor } from './test-support/helpers.js';
import {
  POD_NAME_ANNOTATION,
  startStandInApiServer,
  type StandInApiServer,
} from './test-support/stand-in-apiserver.js';
import { describeTarget } from './test-support/target-suite.js';

const kubectlAvailable =
  spawnSync('kubectl', ['version', '--client', '-o', 'json'], { stdio: 'ignore' }).status === 0;
// CI runs on a machine whose image has kubectl (>= 1.30: exec over WebSocket); elsewhere it may not.
if (!kubectlAvailable && process.env.CI === 'true') {
  throw new Error('kubectl is not on PATH: the SandboxClaim tests need the real kubectl (>= 1.30)');
}

// What the stand-in's controller does with a claim, by its template or warm pool.
const NEVER_READY = 'never-ready';
/** Not Ready the first time a claim of that name is made, Ready the next. */
const READY_SECOND_TIME = 'ready-second-time';
const attempts = new Map<string, number>();
const WARM_POOL = 'fast-pool';
const podOfWarm = new Map<string, string>();

let server: StandInApiServer | undefined;
let cacheDir: string;
const previousCacheDir = process.env.KUBECACHEDIR;

async function standIn(): Promise<StandInApiServer> {
  if (server) return server;
  // kubectl caches discovery under ~/.kube/cache: a throwaway one instead.
  cacheDir = mkdtempSync(join(tmpdir(), 'conch-kubecache-'));
  process.env.KUBECACHEDIR = cacheDir;
  server = await startStandInApiServer({
    outcome: (claim) => {
      if (claim.spec?.sandboxTemplateRef?.name === NEVER_READY) {
        return {
          ready: false,
          reason: 'DependenciesNotReady',
          message: 'Pod is not ready: ImagePullBackOff (stand-in)',
        };
      }
      if (claim.spec?.sandboxTemplateRef?.name === READY_SECOND_TIME) {
        const name = claim.metadata.name as string;
        attempts.set(name, (attempts.get(name) ?? 0) + 1);
        if (attempts.get(name) === 1) {
          return { ready: false, reason: 'DependenciesNotReady', message: 'first attempt (stand-in)' };
        }
      }
      if (claim.spec?.warmPoolRef?.name === WARM_POOL) {
        // A warm pool's Sandbox and pod were made before the claim, under their own names.
        const suffix = String(claim.metadata.name).slice(-5);
        const pod = `${WARM_POOL}-pod-${suffix}`;
        podOfWarm.set(claim.metadata.name as string, pod);
        return { ready: true, sandboxName: `${WARM_POOL}-${suffix}`, podName: pod };
      }
      return { ready: true };
    },
  });
  return server;
}

afterAll(async () => {
  await server?.close();
  if (cacheDir) rmSync(cacheDir, { recursive: true, force: true });
  if (previousCacheDir === undefined) delete process.env.KUBECACHEDIR;
  else process.env.KUBECACHEDIR = previousCacheDir;
});

const ctx = () => ({ cwd: process.cwd(), logger: memoryLogger().logger });
const label = (s: StandInApiServer, namespace: string, claim: string) =>
  `kubernetes:${s.context}/${namespace}/sandboxclaim/${claim}`;
/** The pod a claim got, as the stand-in's Sandbox names it. */
const podOf = (claim: string) => podOfWarm.get(claim) ?? claim;

describeTarget('kubernetes target from a SandboxClaim (real kubectl, stand-in API server)', {
  available: kubectlAvailable,
  start: async () => {
    const s = await standIn();
    const before = s.createdClaims().length;
    // The suite's own target makes the first claim after this point (its first test runs it);
    // the targets a test makes with newTarget() get claims (and pods) of their own.
    const first = () => {
      const claim = s.createdClaims()[before];
      if (!claim) throw new Error('the suite target has not created its claim yet');
      return claim.metadata.name as string;
    };
    return {
      config: { kind: 'kubernetes', claim: { template: 'python' }, kubeconfig: s.kubeconfig },
      get target() {
        return label(s, s.namespace, first());
      },
      get cwd() {
        return s.podWorkdir(podOf(first()));
      },
      get home() {
        return s.podHome(podOf(first()));
      },
      isolated: s.isolated,
      stop: async () => {},
    };
  },
  extra: ({ target }) => {
    test('the claim is made with kubectl create, Ready via kubectl wait, and the pod reached by kubectl exec over WebSocket', async () => {
      const s = await standIn();
      const t = target();
      expect(t.target).toMatch(/^kubernetes:stand-in\/agents\/sandboxclaim\/conch-[0-9a-f]{10}$/);
      const info = await t.info();
      const claim = t.target.split('/').at(-1)!;
      expect(info.sandbox).toEqual({
        claim,
        namespace: 'agents',
        context: 'stand-in',
        sandbox: claim,
        pod: claim,
      });
      if (s.isolated) expect(info.hostname).toBe(claim);
      const paths = s.requests().map((r) => `${r.method} ${r.path}${r.query}`);
      // kubectl asked for aggregated discovery, got plain JSON, and fell back to the legacy lists.
      const api = s.requests().find((r) => r.path === '/api')!;
      expect(api.accept).toContain('as=APIGroupDiscoveryList');
      expect(paths).toContain('GET /apis/extensions.agents.x-k8s.io/v1alpha1?timeout=32s');
      // Strict server-side validation, as against a real CRD.
      expect(
        paths.some(
          (p) =>
            p.startsWith(`POST /apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/agents/sandboxclaims?`) &&
            p.includes('fieldValidation=Strict'),
        ),
      ).toBe(true);
      expect(paths.some((p) => p.includes('/sandboxclaims?') && p.includes('watch=true'))).toBe(true);
      expect(
        paths.some((p) =>
          p.startsWith(`GET /apis/agents.x-k8s.io/v1beta1/namespaces/agents/sandboxes/${claim}?`),
        ),
      ).toBe(true);
      const exec = s.execs().find((e) => e.pod === claim)!;
      expect(exec).toMatchObject({ namespace: 'agents', protocol: 'v5.channel.k8s.io' });
      expect(exec.command.slice(0, 2)).toEqual(['node', '-e']);
      expect(s.requests().some((r) => r.upgrade && r.upgrade.toLowerCase() !== 'websocket')).toBe(false);
    });
  },
});

describe.skipIf(!kubectlAvailable)('SandboxClaim lifecycle (real kubectl, stand-in API server)', () => {
  let s: StandInApiServer;
  const targets: ExecutionTarget[] = [];
  const make = (config: Record<string, unknown>) => {
    const t = executorFromConfig({ kind: 'kubernetes', kubeconfig: s.kubeconfig, ...config }, ctx());
    targets.push(t);
    return t;
  };
  const claimName = (t: ExecutionTarget) => t.target.split('/')[3]!;
  const liveClaims = () => s.objects('sandboxclaims').map((c) => c.metadata.name as string);

  beforeAll(async () => {
    s = await standIn();
  });
  afterAll(async () => {
    await Promise.all(targets.map((t) => t.dispose()));
  });

  test('a template claim: created on first use in the context namespace with its template, labels and shutdown time; commands run in the pod; dispose deletes it', async () => {
    const t = make({ claim: { template: 'python', labels: { team: 'agents' }, shutdownAfterSeconds: 600 } });
    const name = claimName(t);
    expect(t.target).toBe(label(s, 'agents', name));
    // Making the target creates nothing.
    expect(s.createdClaims().some((c) => c.metadata.name === name)).toBe(false);
    const startedAt = Date.now();
    const result = await t.processes.spawn('echo "$HOSTNAME $PWD"', [], { shell: '/bin/bash' }).result;
    expect(result.exitCode).toBe(0);
    expect(result.stdout.head).toBe(`${name} ${s.podWorkdir(name)}\n`);
    expect((result as { target?: string }).target).toBe(t.target);
    const claim = s.createdClaims().find((c) => c.metadata.name === name)!;
    expect(claim).toMatchObject({
      apiVersion: 'extensions.agents.x-k8s.io/v1alpha1',
      kind: 'SandboxClaim',
      metadata: { namespace: 'agents', labels: { team: 'agents', 'app.kubernetes.io/managed-by': 'conch' } },
      spec: { sandboxTemplateRef: { name: 'python' }, lifecycle: { shutdownPolicy: 'Delete' } },
    });
    const shutdown = Date.parse(claim.spec.lifecycle.shutdownTime as string);
    expect(shutdown).toBeGreaterThanOrEqual(Math.floor(startedAt / 1000) * 1000 + 600_000);
    expect(shutdown).toBeLessThanOrEqual(Date.now() + 600_000);
    expect(s.objects('pods').map((p) => p.metadata.name)).toContain(name);

    await t.dispose();
    expect(s.deletedClaims()).toContain(name);
    expect(liveClaims()).not.toContain(name);
    // agent-sandbox's owner references took the Sandbox and the pod with it.
    expect(s.objects('sandboxes').map((o) => o.metadata.name)).not.toContain(name);
    expect(s.objects('pods').map((o) => o.metadata.name)).not.toContain(name);
  });

  test('a warm pool claim (v1beta1): the pod is the one the Sandbox names in its pod-name annotation, in the claim namespace', async () => {
    const t = make({ claim: { warmPool: WARM_POOL, namespace: 'team-b' }, container: 'sandbox' });
    const name = claimName(t);
    expect(t.target).toBe(`${label(s, 'team-b', name)}/sandbox`);
    const info = await t.info();
    const pod = podOf(name);
    expect(pod).not.toBe(name);
    const sandbox = s
      .objects('sandboxes')
      .find(
        (o) => o.metadata.namespace === 'team-b' && o.metadata.annotations?.[POD_NAME_ANNOTATION] === pod,
      )!;
    expect(info.sandbox).toEqual({
      claim: name,
      namespace: 'team-b',
      context: 'stand-in',
      sandbox: sandbox.metadata.name,
      pod,
    });
    expect(s.createdClaims().find((c) => c.metadata.name === name)).toMatchObject({
      apiVersion: 'extensions.agents.x-k8s.io/v1beta1',
      metadata: { namespace: 'team-b' },
      spec: { warmPoolRef: { name: WARM_POOL } },
    });
    const result = await t.processes.spawn('hostname').result;
    if (s.isolated) expect(result.stdout.head).toBe(`${pod}\n`);
    expect(
      s
        .execs()
        .filter((e) => e.namespace === 'team-b')
        .map((e) => e.pod),
    ).toEqual([pod]);
    await t.dispose();
    expect(liveClaims()).not.toContain(name);
  });

  test('through the executor plugin: status says the claim, Sandbox and pod; disposing the registry deletes the claim', async () => {
    const registry = new PluginRegistry({ plugins: [executorPlugin] });
    let name: string | undefined;
    try {
      await registry.expose('executor', {
        kind: 'kubernetes',
        kubeconfig: s.kubeconfig,
        claim: { template: 'python' },
      });
      const target = registry.resolveOptional(EXECUTION_TARGET)!;
      name = claimName(target);
      expect(registry.systemInstructions()).toContain(`run on ${label(s, 'agents', name)}`);
      expect((await target.processes.spawn('echo', ['in the sandbox']).result).stdout.head).toBe(
        'in the sandbox\n',
      );
      const status = (await registry.status()) as unknown as { executor: Record<string, unknown> };
      expect(status.executor).toMatchObject({
        connected: true,
        target: label(s, 'agents', name),
        sandbox: { claim: name, namespace: 'agents', context: 'stand-in', sandbox: name, pod: name },
      });
    } finally {
      await registry.dispose();
    }
    expect(liveClaims()).not.toContain(name);
  });

  test('keep: dispose leaves the claim (and its pod) to its shutdown time', async () => {
    const t = make({ claim: { template: 'python', keep: true, shutdownAfterSeconds: 60 } });
    const name = claimName(t);
    expect((await t.processes.spawn('true').result).exitCode).toBe(0);
    await t.dispose();
    expect(liveClaims()).toContain(name);
    expect(s.objects('pods').map((o) => o.metadata.name)).toContain(name);
    s.delete('sandboxclaims', 'agents', name);
  });

  test('a claim that never becomes Ready fails the call with the claim and its last condition, and is deleted', async () => {
    const t = make({ claim: { template: NEVER_READY, readyTimeoutMs: 2000 } });
    const name = claimName(t);
    const error = await t.client!.connect().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: 'EXEC_SERVER_START_FAILED', stage: 'claim', target: t.target });
    expect((error as Error).message).toBe(
      `exec server on ${t.target}: expected it to start; SandboxClaim ${name} in namespace agents did not become Ready within 2 s; its last Ready condition: False (DependenciesNotReady): Pod is not ready: ImagePullBackOff (stand-in)`,
    );
    expect(s.deletedClaims()).toContain(name);
    expect(liveClaims()).not.toContain(name);
    // A command is a result naming the failure, as any start failure is.
    const result = await t.processes.spawn('true').result;
    expect(result.spawnError).toMatchObject({ code: 'EXEC_SERVER_START_FAILED' });
    expect(result.spawnError?.message).toContain('did not become Ready');
    expect(liveClaims()).not.toContain(name);
  });

  test('the call after a failed start claims again under the same name, and dispose deletes the claim that worked', async () => {
    const t = make({ claim: { template: READY_SECOND_TIME, readyTimeoutMs: 2000 } });
    const name = claimName(t);
    const first = await t.processes.spawn('true').result;
    expect(first.spawnError?.message).toContain('first attempt (stand-in)');
    expect(liveClaims()).not.toContain(name);
    const second = await t.processes.spawn('echo', ['again']).result;
    expect(second.stdout.head).toBe('again\n');
    expect(s.createdClaims().filter((c) => c.metadata.name === name)).toHaveLength(2);
    await t.dispose();
    expect(s.deletedClaims().filter((n) => n === name)).toHaveLength(2);
    expect(liveClaims()).not.toContain(name);
  });

  test('dispose while the claim is becoming Ready ends the wait (a command waiting on it fails) and deletes the claim', async () => {
    // A deadline far past the test's timeout: only giving the wait up lets dispose return.
    const t = make({ claim: { template: NEVER_READY, readyTimeoutMs: 600_000 } });
    const name = claimName(t);
    const connecting = t.client!.connect().then(
      () => undefined,
      (e: unknown) => e,
    );
    const waiting = t.processes.spawn('true').result;
    await waitFor(() => liveClaims().includes(name), 30_000, 'the claim created');
    await t.dispose();
    expect(await connecting).toMatchObject({ code: 'EXEC_SERVER_START_FAILED', stage: 'claim' });
    expect((await waiting).spawnError?.code).toBe('EXEC_SERVER_START_FAILED');
    expect(liveClaims()).not.toContain(name);
  });

  test('a claim kubectl cannot create is reported with kubectl’s error, and nothing is left', async () => {
    const t = make({ claim: { template: 'python', namespace: 'agents' }, context: 'no-such-context' });
    const error = await t.client!.connect().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: 'EXEC_SERVER_START_FAILED', stage: 'claim' });
    expect((error as Error).message).toMatch(
      /could not create SandboxClaim conch-[0-9a-f]+ in namespace agents: .*no-such-context/,
    );
    expect(liveClaims()).not.toContain(claimName(t));
  });

  test('without a namespace the label names the kubeconfig context’s, for a pod too; a target never used claims nothing', async () => {
    expect(make({ pod: 'dev-box' }).target).toBe('kubernetes:stand-in/agents/dev-box');
    expect(make({ pod: 'dev-box', namespace: 'other' }).target).toBe('kubernetes:other/dev-box');
    const claimed = make({ claim: { template: 'python' } });
    expect(claimed.target).toBe(label(s, 'agents', claimName(claimed)));
    await claimed.dispose();
    expect(s.createdClaims().map((c) => c.metadata.name)).not.toContain(claimName(claimed));
  });

  test('the pod executor through the real kubectl: an existing pod, its namespace from the kubeconfig; a missing pod is a transport failure', async () => {
    s.put({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'dev-box', namespace: 'agents' },
      spec: { containers: [{ name: 'main', image: 'stand-in' }] },
      status: { phase: 'Running' },
    });
    const t = make({ pod: 'dev-box' });
    const result = await t.processes.spawn('echo "$HOSTNAME $PWD"', [], { shell: '/bin/bash' }).result;
    expect(result.stdout.head).toBe(`dev-box ${s.podWorkdir('dev-box')}\n`);
    expect(s.execs().filter((e) => e.pod === 'dev-box')[0]).toMatchObject({
      namespace: 'agents',
      protocol: 'v5.channel.k8s.io',
    });
    const missing = make({ pod: 'no-such-pod' });
    const error = await missing.client!.connect().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: 'EXEC_SERVER_START_FAILED', stage: 'transport' });
    expect((error as Error).message).toMatch(/kubectl exec failed: .*not found/);
  });
});

describe('the kubernetes config: exactly one of pod or claim', () => {
  test.each([
    [{ kind: 'kubernetes' }, /pod: one of `pod` \(an existing pod\) or `claim`/],
    [{ kind: 'kubernetes', pod: 'p', claim: { template: 't' } }, /claim: either `pod` or `claim`, not both/],
    [
      { kind: 'kubernetes', claim: {} },
      /claim\.template: one of `template` \(a SandboxTemplate name\) or `warmPool`/,
    ],
    [
      { kind: 'kubernetes', claim: { template: 't', warmPool: 'w' } },
      /claim\.warmPool: either `template` or `warmPool`, not both/,
    ],
    [
      { kind: 'kubernetes', claim: { template: 't' }, namespace: 'n' },
      /namespace: no top-level namespace with `claim`/,
    ],
    [{ kind: 'kubernetes', claim: { template: 't', ttl: 5 } }, /claim\.ttl/],
    [{ kind: 'kubernetes', claim: { template: 't', readyTimeoutMs: 10 } }, /claim\.readyTimeoutMs/],
  ])('%j is refused naming the field', (config, message) => {
    expect(() => parseExecutorConfig(config)).toThrow(message);
  });
});
