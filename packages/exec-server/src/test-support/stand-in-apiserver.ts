// Test helper: a stand-in Kubernetes API server for the real kubectl. It answers what kubectl
// 1.32 asks of a cluster running kubernetes-sigs/agent-sandbox: discovery (legacy JSON only, so
// kubectl's aggregated-discovery request has to fall back), create / get / list / watch / delete
// of SandboxClaims, Sandboxes and Pods, and pod `exec` over the WebSocket stream protocol
// (v5.channel.k8s.io, v4 accepted; SPDY is refused). It also plays agent-sandbox's controller: a
// created claim gets a Sandbox and a Pod after a short delay, both Ready, and deleting the claim
// cascades to both and kills what runs in the pod. Exec runs the command on this machine in the
// pod's own mount, pid and UTS namespaces (as root), with the pod's /tmp (its workspace and HOME
// live there) persisting across execs like a pod's filesystem.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';

type Obj = Record<string, any>;

interface ResourceType {
  group: string;
  /** Served versions, the preferred (storage) one first. */
  versions: string[];
  plural: string;
  singular: string;
  kind: string;
  shortNames?: string[];
  subresources: string[];
  /** version -> the warning header the real CRD sends for it. */
  deprecated?: Record<string, string>;
}

const AGENTS = 'agents.x-k8s.io';
const EXTENSIONS = 'extensions.agents.x-k8s.io';
/** The annotation agent-sandbox puts on a Sandbox that adopted a warm pool pod of another name. */
export const POD_NAME_ANNOTATION = 'agents.x-k8s.io/pod-name';
/** The annotation agent-sandbox puts on a claim naming the Sandbox it got. */
export const SANDBOX_NAME_ANNOTATION = 'agents.x-k8s.io/sandbox-name';

// What agent-sandbox 0.5 serves: v1beta1 (storage) and the deprecated v1alpha1 of each CRD.
const RESOURCES: ResourceType[] = [
  {
    group: '',
    versions: ['v1'],
    plural: 'pods',
    singular: 'pod',
    kind: 'Pod',
    shortNames: ['po'],
    subresources: ['exec', 'status'],
  },
  {
    group: AGENTS,
    versions: ['v1beta1', 'v1alpha1'],
    plural: 'sandboxes',
    singular: 'sandbox',
    kind: 'Sandbox',
    subresources: ['status'],
  },
  {
    group: EXTENSIONS,
    versions: ['v1beta1', 'v1alpha1'],
    plural: 'sandboxclaims',
    singular: 'sandboxclaim',
    kind: 'SandboxClaim',
    shortNames: ['sandboxclaim'],
    subresources: ['status'],
    deprecated: {
      v1alpha1:
        'extensions.agents.x-k8s.io/v1alpha1 SandboxClaim is deprecated; use extensions.agents.x-k8s.io/v1beta1 SandboxClaim instead',
    },
  },
  {
    group: EXTENSIONS,
    versions: ['v1beta1', 'v1alpha1'],
    plural: 'sandboxtemplates',
    singular: 'sandboxtemplate',
    kind: 'SandboxTemplate',
    subresources: [],
  },
  {
    group: EXTENSIONS,
    versions: ['v1beta1', 'v1alpha1'],
    plural: 'sandboxwarmpools',
    singular: 'sandboxwarmpool',
    kind: 'SandboxWarmPool',
    subresources: ['status'],
  },
];

// The claim spec fields each version's CRD schema knows (strict field validation rejects others).
const CLAIM_SPEC_FIELDS: Record<string, string[]> = {
  v1alpha1: ['sandboxTemplateRef', 'lifecycle', 'warmpool', 'additionalPodMetadata', 'env'],
  v1beta1: ['warmPoolRef', 'lifecycle', 'additionalPodMetadata', 'env', 'volumeClaimTemplates'],
};
const LIFECYCLE_FIELDS = ['shutdownTime', 'ttlSecondsAfterFinished', 'shutdownPolicy'];

/** What the stand-in controller does with a new claim. */
export type ClaimOutcome =
  | {
      ready: true;
      /** Default: the claim's name (a cold start). */
      sandboxName?: string;
      /** Default: the Sandbox's name; another name is recorded in the pod-name annotation (a warm pool pod). */
      podName?: string;
      /** Default 'sandbox'. */
      container?: string;
    }
  | { ready: false; reason: string; message: string };

export interface StandInOptions {
  /** How long the "controller" takes to make a claim's Sandbox and Pod. Default 300 ms. */
  readyAfterMs?: number;
  /** Per claim (as created): default, ready with a Sandbox and Pod named after the claim. */
  outcome?: (claim: Obj) => ClaimOutcome;
  /** The kubeconfig context's namespace. Default 'agents'. */
  namespace?: string;
}

export interface LoggedRequest {
  method: string;
  path: string;
  query: string;
  accept: string | undefined;
  upgrade: string | undefined;
  protocols: string | undefined;
}

export interface StandInApiServer {
  url: string;
  /** A kubeconfig (in a throwaway dir) whose one context, `stand-in`, reaches this server as its user. */
  kubeconfig: string;
  context: string;
  /** The context's namespace. */
  namespace: string;
  /** Whether exec'd commands get their own mount/pid/UTS namespaces (root + unshare). */
  isolated: boolean;
  /** The workspace and HOME a pod's exec starts in (in the pod when isolated; host paths otherwise). */
  podWorkdir(pod: string): string;
  podHome(pod: string): string;
  requests(): LoggedRequest[];
  /** Live objects of a resource (plural, e.g. 'sandboxclaims'), in creation order. */
  objects(plural: string): Obj[];
  /** Every claim ever created (as created, with its namespace), deleted ones included. */
  createdClaims(): Obj[];
  /** Claims deleted, by name. */
  deletedClaims(): string[];
  /** Exec sessions: pod and command. */
  execs(): { pod: string; namespace: string; protocol: string; command: string[] }[];
  /** Adds an object as if a controller or another client had (e.g. a pod to exec into). */
  put(obj: Obj): Obj;
  delete(plural: string, namespace: string, name: string): boolean;
  close(): Promise<void>;
}

function canUnshare(): boolean {
  if (process.getuid?.() !== 0) return false;
  return (
    spawnSync('unshare', ['--mount', '--pid', '--uts', '--fork', '--mount-proc', 'true'], { stdio: 'ignore' })
      .status === 0
  );
}

interface Watcher {
  type: ResourceType;
  version: string;
  namespace: string | undefined;
  name: string | undefined;
  res: ServerResponse;
}

interface ExecSession {
  pod: string;
  namespace: string;
  child: ChildProcess;
  ws: WebSocket;
}

const statusObj = (code: number, reason: string, message: string, details?: Obj): Obj => ({
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message,
  reason,
  ...(details ? { details } : {}),
  code,
});

export async function startStandInApiServer(options: StandInOptions = {}): Promise<StandInApiServer> {
  const root = mkdtempSync(join(tmpdir(), 'conch-stand-in-apiserver-'));
  // kubectl sends no bearer token over plain http; the kubeconfig's user impersonates this name
  // instead, so a request without it did not come through the stand-in's kubeconfig.
  const user = `conch-tester-${randomBytes(4).toString('hex')}`;
  const authorized = (req: IncomingMessage) => req.headers['impersonate-user'] === user;
  const namespace = options.namespace ?? 'agents';
  const isolated = canUnshare();
  const readyAfterMs = options.readyAfterMs ?? 300;
  const store = new Map<string, Obj>();
  const log: LoggedRequest[] = [];
  const created: Obj[] = [];
  const deleted: string[] = [];
  const execLog: { pod: string; namespace: string; protocol: string; command: string[] }[] = [];
  const watchers = new Set<Watcher>();
  const sessions = new Set<ExecSession>();
  const timers = new Set<NodeJS.Timeout>();
  let rv = 1;

  const typeOf = (plural: string): ResourceType => RESOURCES.find((r) => r.plural === plural)!;
  const key = (t: ResourceType, ns: string, name: string) => `${t.group}/${t.plural}/${ns}/${name}`;
  const apiVersion = (t: ResourceType, version: string) => (t.group ? `${t.group}/${version}` : version);
  // The stand-in's "conversion" between served versions: only apiVersion changes (what this test
  // reads, metadata and status, has the same shape in both).
  const asVersion = (t: ResourceType, version: string, obj: Obj): Obj => ({
    ...structuredClone(obj),
    apiVersion: apiVersion(t, version),
  });

  function notify(t: ResourceType, type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: Obj): void {
    for (const w of watchers) {
      if (w.type !== t) continue;
      if (w.namespace && w.namespace !== obj.metadata.namespace) continue;
      if (w.name && w.name !== obj.metadata.name) continue;
      w.res.write(`${JSON.stringify({ type, object: asVersion(t, w.version, obj) })}\n`);
    }
  }

  function save(t: ResourceType, obj: Obj, type: 'ADDED' | 'MODIFIED'): Obj {
    obj.metadata.resourceVersion = String(++rv);
    store.set(key(t, obj.metadata.namespace, obj.metadata.name), obj);
    notify(t, type, obj);
    return obj;
  }

  function put(obj: Obj): Obj {
    const t = RESOURCES.find((r) => r.kind === obj.kind)!;
    const metadata = {
      namespace,
      uid: randomUUID(),
      creationTimestamp: new Date().toISOString(),
      generation: 1,
      ...obj.metadata,
    };
    return save(t, { ...obj, metadata }, 'ADDED');
  }

  function remove(t: ResourceType, ns: string, name: string): Obj | undefined {
    const k = key(t, ns, name);
    const obj = store.get(k);
    if (!obj) return undefined;
    store.delete(k);
    obj.metadata.resourceVersion = String(++rv);
    notify(t, 'DELETED', obj);
    if (t.plural === 'sandboxclaims') deleted.push(name);
    // Owner references cascade (the garbage collector's background deletion).
    for (const [, other] of [...store]) {
      const owners = (other.metadata.ownerReferences ?? []) as Obj[];
      if (owners.some((o) => o.uid === obj.metadata.uid)) {
        remove(
          RESOURCES.find((r) => r.kind === other.kind)!,
          other.metadata.namespace,
          other.metadata.name,
        );
      }
    }
    // A deleted pod's processes die with it.
    if (t.plural === 'pods') {
      for (const s of sessions) if (s.pod === name && s.namespace === ns) killSession(s);
    }
    return obj;
  }

  const later = (ms: number, fn: () => void) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, ms);
    timers.add(timer);
  };

  const condition = (status: 'True' | 'False', reason: string, message: string, generation = 1) => ({
    type: 'Ready',
    status,
    reason,
    message,
    lastTransitionTime: new Date().toISOString(),
    observedGeneration: generation,
  });

  const ownerRef = (obj: Obj) => ({
    apiVersion: obj.apiVersion,
    kind: obj.kind,
    name: obj.metadata.name,
    uid: obj.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  });

  // agent-sandbox's claim controller, reduced to what a client sees.
  function reconcileClaim(claim: Obj): void {
    const t = typeOf('sandboxclaims');
    const ns = claim.metadata.namespace as string;
    const name = claim.metadata.name as string;
    claim.status = { conditions: [condition('False', 'SandboxCreatePending', 'Sandbox is being created')] };
    save(t, claim, 'MODIFIED');
    const outcome = options.outcome?.(structuredClone(claim)) ?? { ready: true };
    if (!outcome.ready) {
      // At once: whatever a client waits for, the condition it ends up reading is this one.
      claim.status = { conditions: [condition('False', outcome.reason, outcome.message)] };
      save(t, claim, 'MODIFIED');
      return;
    }
    later(readyAfterMs, () => {
      const current = store.get(key(t, ns, name));
      if (!current || current.metadata.uid !== claim.metadata.uid) return;
      const sandboxName = outcome.sandboxName ?? name;
      const podName = outcome.podName ?? sandboxName;
      const sandbox = put({
        apiVersion: `${AGENTS}/v1beta1`,
        kind: 'Sandbox',
        metadata: {
          name: sandboxName,
          namespace: ns,
          ownerReferences: [ownerRef(current)],
          ...(podName !== sandboxName ? { annotations: { [POD_NAME_ANNOTATION]: podName } } : {}),
        },
        spec: {
          podTemplate: {
            spec: { containers: [{ name: outcome.container ?? 'sandbox', image: 'stand-in' }] },
          },
        },
      });
      sandbox.status = {
        conditions: [condition('True', 'DependenciesReady', 'Pod is Ready')],
        podIPs: ['10.0.0.7'],
      };
      save(typeOf('sandboxes'), sandbox, 'MODIFIED');
      put({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: podName, namespace: ns, ownerReferences: [ownerRef(sandbox)] },
        spec: { containers: [{ name: outcome.container ?? 'sandbox', image: 'stand-in' }] },
        status: { phase: 'Running', podIP: '10.0.0.7', conditions: [{ type: 'Ready', status: 'True' }] },
      });
      current.metadata.annotations = {
        ...current.metadata.annotations,
        [SANDBOX_NAME_ANNOTATION]: sandboxName,
      };
      current.status = {
        conditions: [condition('True', 'DependenciesReady', 'Sandbox is Ready')],
        sandbox: { name: sandboxName, podIPs: ['10.0.0.7'] },
      };
      save(t, current, 'MODIFIED');
    });
  }

  function validateClaim(version: string, claim: Obj): string | undefined {
    const spec = (claim.spec ?? {}) as Obj;
    const known = CLAIM_SPEC_FIELDS[version]!;
    for (const field of Object.keys(spec)) {
      if (!known.includes(field)) return `unknown field "spec.${field}"`;
    }
    for (const field of Object.keys(spec.lifecycle ?? {})) {
      if (!LIFECYCLE_FIELDS.includes(field)) return `unknown field "spec.lifecycle.${field}"`;
    }
    const policy = spec.lifecycle?.shutdownPolicy;
    if (policy !== undefined && !['Delete', 'DeleteForeground', 'Retain'].includes(policy)) {
      return `spec.lifecycle.shutdownPolicy: Unsupported value: "${policy}"`;
    }
    const ref = version === 'v1alpha1' ? spec.sandboxTemplateRef : spec.warmPoolRef;
    if (!ref?.name)
      return `spec.${version === 'v1alpha1' ? 'sandboxTemplateRef' : 'warmPoolRef'}.name: Required value`;
    return undefined;
  }

  // ---- HTTP ----

  const send = (res: ServerResponse, code: number, body: Obj, headers: Record<string, string> = {}) => {
    res.writeHead(code, { 'Content-Type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };

  const discovery = (): Record<string, Obj> => {
    const out: Record<string, Obj> = {};
    const groups = [...new Set(RESOURCES.map((r) => r.group))];
    for (const group of groups) {
      const types = RESOURCES.filter((r) => r.group === group);
      for (const version of types[0]!.versions) {
        const gv = group ? `${group}/${version}` : version;
        out[group ? `/apis/${gv}` : `/api/${gv}`] = {
          kind: 'APIResourceList',
          apiVersion: 'v1',
          groupVersion: gv,
          resources: types.flatMap((t) => [
            {
              name: t.plural,
              singularName: t.singular,
              namespaced: true,
              kind: t.kind,
              verbs: ['create', 'delete', 'get', 'list', 'watch', 'patch', 'update'],
              ...(t.shortNames ? { shortNames: t.shortNames } : {}),
            },
            ...t.subresources.map((sub) => ({
              name: `${t.plural}/${sub}`,
              singularName: '',
              namespaced: true,
              kind: sub === 'exec' ? 'PodExecOptions' : t.kind,
              verbs: sub === 'exec' ? ['create', 'get'] : ['get', 'patch', 'update'],
            })),
          ]),
        };
      }
    }
    const apiGroups = groups.filter(Boolean).map((group) => {
      const versions = RESOURCES.find((r) => r.group === group)!.versions.map((version) => ({
        groupVersion: `${group}/${version}`,
        version,
      }));
      return { name: group, versions, preferredVersion: versions[0] };
    });
    out['/apis'] = { kind: 'APIGroupList', apiVersion: 'v1', groups: apiGroups };
    for (const g of apiGroups) out[`/apis/${g.name}`] = { kind: 'APIGroup', apiVersion: 'v1', ...g };
    // OpenAPI v3, as far as kubectl create reads it: whether a kind's PATCH takes
    // `fieldValidation` (then kubectl asks the server to validate strictly, as with a real CRD).
    const roots: Record<string, Obj> = {};
    for (const group of groups) {
      const types = RESOURCES.filter((r) => r.group === group);
      for (const version of types[0]!.versions) {
        const gvPath = group ? `apis/${group}/${version}` : `api/${version}`;
        roots[gvPath] = { serverRelativeURL: `/openapi/v3/${gvPath}?hash=stand-in` };
        out[`/openapi/v3/${gvPath}`] = {
          openapi: '3.0.0',
          info: { title: 'stand-in', version: version },
          paths: Object.fromEntries(
            types.map((t) => [
              `/${gvPath}/namespaces/{namespace}/${t.plural}/{name}`,
              {
                patch: {
                  'x-kubernetes-group-version-kind': { group, version, kind: t.kind },
                  parameters: [{ name: 'fieldValidation', in: 'query', schema: { type: 'string' } }],
                  responses: { '200': { description: 'OK' } },
                },
              },
            ]),
          ),
        };
      }
    }
    out['/openapi/v3'] = { paths: roots };
    return out;
  };
  const discoveryDocs = discovery();

  function handle(req: IncomingMessage, res: ServerResponse, body: string): void {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const path = url.pathname;
    if (!authorized(req)) {
      send(res, 401, statusObj(401, 'Unauthorized', 'Unauthorized'));
      return;
    }
    if (path === '/version') {
      send(res, 200, { major: '1', minor: '32', gitVersion: 'v1.32.0-stand-in', platform: 'linux/amd64' });
      return;
    }
    // Legacy discovery, always plain JSON: kubectl asks for the aggregated form first and must
    // fall back to this.
    if (path === '/api') {
      send(res, 200, {
        kind: 'APIVersions',
        versions: ['v1'],
        serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: url.host }],
      });
      return;
    }
    const doc = discoveryDocs[path];
    if (doc) {
      send(res, 200, doc);
      return;
    }
    // Every namespace exists (kubectl reads one to explain a NotFound in it).
    const namespaceRead = /^\/api\/v1\/namespaces\/([^/]+)$/.exec(path);
    if (namespaceRead && req.method === 'GET') {
      send(res, 200, {
        kind: 'Namespace',
        apiVersion: 'v1',
        metadata: { name: namespaceRead[1] },
        status: { phase: 'Active' },
      });
      return;
    }
    const m =
      /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+)(?:\/([^/]+))?)?$/.exec(
        path,
      );
    const group = m?.[2] ?? '';
    const version = m?.[1] ?? m?.[3] ?? '';
    const t = m
      ? RESOURCES.find((r) => r.group === group && r.plural === m[5] && r.versions.includes(version))
      : undefined;
    if (!m || !t) {
      send(res, 404, statusObj(404, 'NotFound', 'the server could not find the requested resource'));
      return;
    }
    const ns = m[4];
    const name = m[6];
    const sub = m[7];
    const warning = t.deprecated?.[version];
    const headers: Record<string, string> = warning ? { Warning: `299 - "${warning}"` } : {};
    const notFound = () =>
      send(
        res,
        404,
        statusObj(404, 'NotFound', `${t.plural}${t.group ? `.${t.group}` : ''} "${name}" not found`, {
          name,
          group: t.group,
          kind: t.plural,
        }),
        headers,
      );

    if (req.method === 'GET' && !name) {
      const selector = url.searchParams.get('fieldSelector') ?? '';
      const byName = /metadata\.name==?([^,]+)/.exec(selector)?.[1];
      const items = [...store.values()].filter(
        (o) =>
          o.kind === t.kind &&
          (!ns || o.metadata.namespace === ns) &&
          (!byName || o.metadata.name === byName),
      );
      const watch = url.searchParams.get('watch');
      if (watch === 'true' || watch === '1') {
        res.writeHead(200, {
          'Content-Type': 'application/json',
          'Transfer-Encoding': 'chunked',
          ...headers,
        });
        // Headers now, as an API server sends them: kubectl waits for them before it reads an
        // event, and a watch with nothing to report yet must not look like a hung request.
        res.flushHeaders();
        const from = Number(url.searchParams.get('resourceVersion') ?? '0');
        // A watch from "now" (a list's resourceVersion) sends what changed since; from 0, the
        // current objects first. The stand-in keeps no history: it sends the current state of
        // anything newer than the given version, which is what an informer needs.
        for (const o of items) {
          if (Number(o.metadata.resourceVersion) > from) {
            res.write(`${JSON.stringify({ type: 'ADDED', object: asVersion(t, version, o) })}\n`);
          }
        }
        const w: Watcher = { type: t, version, namespace: ns, name: byName, res };
        watchers.add(w);
        const timeout = Number(url.searchParams.get('timeoutSeconds') ?? '0');
        const end = () => {
          watchers.delete(w);
          res.end();
        };
        if (timeout > 0) later(timeout * 1000, end);
        // (the response's close: the request's fires as soon as its empty body is read)
        res.on('close', () => watchers.delete(w));
        return;
      }
      send(
        res,
        200,
        {
          kind: `${t.kind}List`,
          apiVersion: apiVersion(t, version),
          metadata: { resourceVersion: String(rv) },
          items: items.map((o) => asVersion(t, version, o)),
        },
        headers,
      );
      return;
    }
    if (req.method === 'GET' && name && !sub) {
      const obj = store.get(key(t, ns ?? namespace, name));
      if (!obj) return notFound();
      send(res, 200, asVersion(t, version, obj), headers);
      return;
    }
    if (req.method === 'POST' && !name && ns) {
      let obj: Obj;
      try {
        obj = JSON.parse(body) as Obj;
      } catch {
        send(res, 400, statusObj(400, 'BadRequest', 'the body is not JSON'));
        return;
      }
      if (obj.kind !== t.kind || obj.apiVersion !== apiVersion(t, version)) {
        send(
          res,
          400,
          statusObj(
            400,
            'BadRequest',
            `expected ${apiVersion(t, version)} ${t.kind}, got ${obj.apiVersion} ${obj.kind}`,
          ),
        );
        return;
      }
      obj.metadata ??= {};
      if (obj.metadata.namespace && obj.metadata.namespace !== ns) {
        send(
          res,
          400,
          statusObj(
            400,
            'BadRequest',
            'the namespace of the provided object does not match the namespace sent on the request',
          ),
        );
        return;
      }
      if (!obj.metadata.name && obj.metadata.generateName) {
        obj.metadata.name = `${obj.metadata.generateName}${randomBytes(3).toString('hex').slice(0, 5)}`;
      }
      if (!obj.metadata.name) {
        send(res, 422, statusObj(422, 'Invalid', 'metadata.name: Required value'));
        return;
      }
      if (t.plural === 'sandboxclaims') {
        const invalid = validateClaim(version, obj);
        if (invalid) {
          const strict =
            url.searchParams.get('fieldValidation') === 'Strict' || !invalid.startsWith('unknown');
          if (strict) {
            send(
              res,
              422,
              statusObj(
                422,
                'Invalid',
                `SandboxClaim.${EXTENSIONS} "${obj.metadata.name}" is invalid: ${invalid}`,
              ),
              headers,
            );
            return;
          }
        }
      }
      if (store.has(key(t, ns, obj.metadata.name))) {
        send(
          res,
          409,
          statusObj(409, 'AlreadyExists', `${t.plural}.${t.group} "${obj.metadata.name}" already exists`),
          headers,
        );
        return;
      }
      delete obj.status;
      obj.metadata.namespace = ns;
      const stored = put(obj);
      send(res, 201, asVersion(t, version, stored), headers);
      if (t.plural === 'sandboxclaims') {
        created.push(structuredClone(stored));
        reconcileClaim(stored);
      }
      return;
    }
    if (req.method === 'DELETE' && name && ns && !sub) {
      const obj = remove(t, ns, name);
      if (!obj) return notFound();
      send(res, 200, asVersion(t, version, obj), headers);
      return;
    }
    send(res, 405, statusObj(405, 'MethodNotAllowed', `${req.method} ${path} is not served by the stand-in`));
  }

  // ---- exec over WebSocket ----

  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) =>
      protocols.has('v5.channel.k8s.io')
        ? 'v5.channel.k8s.io'
        : protocols.has('v4.channel.k8s.io')
          ? 'v4.channel.k8s.io'
          : false,
  });

  const refuse = (socket: Duplex, code: number, status: Obj) => {
    const body = JSON.stringify(status);
    socket.end(
      `HTTP/1.1 ${code} ${code === 404 ? 'Not Found' : code === 401 ? 'Unauthorized' : 'Bad Request'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  };

  function podDirs(pod: string): { dir: string; tmp: string } {
    const dir = join(root, 'pods', pod);
    const tmp = join(dir, 'tmp');
    mkdirSync(join(tmp, 'workspace'), { recursive: true });
    mkdirSync(join(tmp, 'home'), { recursive: true });
    return { dir, tmp };
  }

  function killSession(s: ExecSession): void {
    // The unshare (isolated) or sh (not) leads its own process group; --kill-child takes the
    // pod's pid namespace down with it.
    try {
      if (s.child.pid) process.kill(-s.child.pid, 'SIGKILL');
    } catch {
      // gone
    }
    if (s.ws.readyState === s.ws.OPEN) s.ws.close(1000);
  }

  function exec(ws: WebSocket, pod: Obj, command: string[]): void {
    const podName = pod.metadata.name as string;
    const { tmp } = podDirs(podName);
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOSTNAME: podName,
      LANG: 'C.UTF-8',
    };
    const child = isolated
      ? spawn(
          'unshare',
          [
            '--mount',
            '--propagation',
            'private',
            '--pid',
            '--uts',
            '--fork',
            '--kill-child',
            '--mount-proc',
            'sh',
            '-c',
            'mount --bind "$CONCH_POD_TMP" /tmp && hostname "$HOSTNAME" && cd /tmp/workspace && unset CONCH_POD_TMP && exec "$@"',
            'sh',
            ...command,
          ],
          { env: { ...env, HOME: '/tmp/home', CONCH_POD_TMP: tmp }, detached: true, stdio: 'pipe' },
        )
      : spawn('sh', ['-c', 'cd "$HOME/../workspace" && exec "$@"', 'sh', ...command], {
          env: { ...env, HOME: join(tmp, 'home'), TMPDIR: tmp },
          detached: true,
          stdio: 'pipe',
        });
    const session: ExecSession = { pod: podName, namespace: pod.metadata.namespace, child, ws };
    sessions.add(session);
    const out = (channel: number, data: Buffer) => {
      if (ws.readyState === ws.OPEN) ws.send(Buffer.concat([Buffer.from([channel]), data]));
    };
    child.stdout!.on('data', (d: Buffer) => out(1, d));
    child.stderr!.on('data', (d: Buffer) => out(2, d));
    child.stdin!.on('error', () => {});
    ws.on('message', (data: Buffer) => {
      const channel = data[0];
      if (channel === 0) {
        if (data.length > 1 && child.stdin!.writable) child.stdin!.write(data.subarray(1));
      } else if (channel === 255 && data[1] === 0) {
        // v5: the client closed its stdin.
        child.stdin!.end();
      }
    });
    // The client went away (kubectl killed, the link cut): the process sees its stdin end, as
    // in a real container; it is not killed (the exec server cleans up on EOF by itself).
    ws.on('close', () => child.stdin!.end());
    ws.on('error', () => {});
    child.on('error', (error) => {
      out(3, Buffer.from(JSON.stringify({ metadata: {}, status: 'Failure', message: error.message })));
      ws.close(1000);
    });
    child.on('close', (code, signal) => {
      sessions.delete(session);
      const exitCode = code ?? (signal ? 137 : 1);
      const status =
        exitCode === 0
          ? { metadata: {}, status: 'Success' }
          : {
              metadata: {},
              status: 'Failure',
              message: `command terminated with non-zero exit code: exit status ${exitCode}`,
              reason: 'NonZeroExitCode',
              details: { causes: [{ reason: 'ExitCode', message: String(exitCode) }] },
            };
      out(3, Buffer.from(JSON.stringify(status)));
      if (ws.readyState === ws.OPEN) ws.close(1000);
    });
  }

  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    log.push({
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.search,
      accept: req.headers.accept,
      upgrade: req.headers.upgrade,
      protocols: req.headers['sec-websocket-protocol'],
    });
    if (!authorized(req)) return refuse(socket, 401, statusObj(401, 'Unauthorized', 'Unauthorized'));
    if (req.headers.upgrade?.toLowerCase() !== 'websocket') {
      // SPDY/3.1: kubectl only falls back to it when the WebSocket upgrade fails.
      return refuse(
        socket,
        400,
        statusObj(400, 'BadRequest', 'the stand-in serves exec over WebSocket only'),
      );
    }
    const m = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/exec$/.exec(url.pathname);
    const pod = m ? store.get(key(typeOf('pods'), m[1]!, m[2]!)) : undefined;
    if (!m || !pod) {
      return refuse(socket, 404, statusObj(404, 'NotFound', `pods "${m?.[2] ?? '?'}" not found`));
    }
    const command = url.searchParams.getAll('command');
    wss.handleUpgrade(req, socket, head, (ws) => {
      execLog.push({ pod: m[2]!, namespace: m[1]!, protocol: ws.protocol, command });
      exec(ws, pod, command);
    });
  }

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    log.push({
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.search,
      accept: req.headers.accept,
      upgrade: undefined,
      protocols: undefined,
    });
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, res, Buffer.concat(chunks).toString('utf8')));
  });
  server.on('upgrade', upgrade);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;

  // JSON is YAML: kubectl reads this as any kubeconfig.
  const kubeconfig = join(root, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'stand-in', cluster: { server: url } }],
      users: [{ name: 'stand-in', user: { as: user } }],
      contexts: [{ name: 'stand-in', context: { cluster: 'stand-in', user: 'stand-in', namespace } }],
      'current-context': 'stand-in',
    }),
  );

  return {
    url,
    kubeconfig,
    context: 'stand-in',
    namespace,
    isolated,
    podWorkdir: (pod) => (isolated ? '/tmp/workspace' : join(podDirs(pod).tmp, 'workspace')),
    podHome: (pod) => (isolated ? '/tmp/home' : join(podDirs(pod).tmp, 'home')),
    requests: () => [...log],
    objects: (plural) =>
      [...store.values()].filter((o) => o.kind === typeOf(plural).kind).map((o) => structuredClone(o)),
    createdClaims: () => created.map((o) => structuredClone(o)),
    deletedClaims: () => [...deleted],
    execs: () => [...execLog],
    put: (obj) => structuredClone(put(structuredClone(obj))),
    delete: (plural, ns, name) => remove(typeOf(plural), ns, name) !== undefined,
    close: async () => {
      for (const timer of timers) clearTimeout(timer);
      for (const s of sessions) killSession(s);
      for (const w of watchers) w.res.end();
      watchers.clear();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
