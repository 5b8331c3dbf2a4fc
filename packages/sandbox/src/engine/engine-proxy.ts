import { createReadStream, createWriteStream, realpathSync } from 'node:fs';
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { connect, type Socket } from 'node:net';
import { basename, join } from 'node:path';
import { createGunzip } from 'node:zlib';
import { makeTempDir, type Logger, removeSync, safeStatSync } from '@conch/core';
import { checkBuildContext, contextCompression, dockerfileCandidates, TarScanner } from './build-context.js';
import {
  composeProjectNames,
  parseEnginePolicy,
  type EnginePolicy,
  type EnginePolicyInput,
} from './engine-policy-config.js';
import {
  checkBuildQuery,
  checkContainerCreate,
  checkContainerUpdate,
  checkExecCreate,
  checkExistingContainer,
  checkImagePull,
  checkNetworkConnect,
  checkNetworkCreate,
  checkVolumeCreate,
  COMPOSE_PROJECT_LABEL,
  isComposeImageName,
  isOwned,
  notOwned,
  parseEngineJson,
  Refused,
  resolveHostPath,
  SESSION_LABEL,
  type EnginePolicyContext,
  type EngineRule,
  type ObjectRef,
  type PolicyRefusal,
} from './engine-policy.js';
import { matchEngineRoute, type EngineRoute, type EngineTarget } from './engine-routes.js';
import { engineAvailable, existingEngineSockets, type EngineAvailability } from './engine-socket.js';

export interface EngineProxyStartOptions {
  /** The sandbox's workspace: bind mounts may come only from inside it (resolved, symlinks followed). */
  workspace: string;
  /** The session's id: what the proxy creates carries it in the `conch.session` label. */
  sessionId: string;
  /** The real engine's unix socket; found when not given (see engineSocketCandidates). */
  engineSocket?: string;
  /** The settable policy (validated: a bad field throws InvalidConfigError naming it). */
  policy?: EnginePolicyInput;
  /** Where the proxy listens; default `<tmpdir>/conch-engine-XXXXXX/docker.sock`. */
  socketPath?: string;
  /** The workspace's COMPOSE_PROJECT_NAME, when it sets one (its `.env` or the sandbox's env). */
  composeProjectName?: string;
  /** The environment to find the engine in (DOCKER_HOST, XDG_RUNTIME_DIR); default process.env. */
  env?: NodeJS.ProcessEnv;
}

export interface EngineProxyOptions {
  logger?: Logger;
  /** Connections from the sandbox held at once (default 256). */
  maxConnections?: number;
}

/** A request the proxy refused (kept for the host to report). */
export interface EngineRefusal {
  /** Date.now() when refused. */
  at: number;
  rule: EngineRule;
  message: string;
  method: string;
  /** The request path, without its query. */
  path: string;
  /** The route's name (`container.create`), when the endpoint is a known one. */
  route?: string;
}

/** The largest JSON body the proxy reads (a create is a few kB). */
const MAX_JSON_BODY = 4 * 1024 * 1024;
/** Refusals kept for refusals(). */
const MAX_REFUSALS = 200;

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

function forwardHeaders(
  headers: IncomingHttpHeaders,
  bodyLength?: number,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    if (bodyLength !== undefined && name === 'content-length') continue;
    out[name] = value;
  }
  if (bodyLength !== undefined) out['content-length'] = String(bodyLength);
  return out;
}

/** What the proxy sends on: the path (ids resolved), the query, and the body. */
interface Forward {
  path: string;
  query: URLSearchParams;
  /** JSON to send instead of the client's body; a file to stream; or the client's body as is. */
  body?: { json: unknown } | { file: string; length: number; contentType?: string };
}

interface Lookup {
  status: number;
  body: unknown;
  raw: Buffer;
}

function errorBody(message: string): string {
  return `${JSON.stringify({ message })}\n`;
}

function labelsOf(info: unknown): unknown {
  if (typeof info !== 'object' || info === null) return undefined;
  const record = info as { Config?: { Labels?: unknown }; Labels?: unknown };
  return record.Config?.Labels ?? record.Labels;
}

function splitUrl(url: string): { path: string; query: URLSearchParams } {
  const q = url.indexOf('?');
  return q < 0
    ? { path: url, query: new URLSearchParams() }
    : { path: url.slice(0, q), query: new URLSearchParams(url.slice(q + 1)) };
}

function encodeRef(kind: EngineTarget['kind'] | ObjectRef['kind'] | 'image', ref: string): string {
  return kind === 'image' ? ref.split('/').map(encodeURIComponent).join('/') : encodeURIComponent(ref);
}

/**
 * The container engine through a policy: a Docker API server on a unix socket (bind it into the
 * sandbox at /var/run/docker.sock) that forwards to the real engine only what the policy allows —
 * read calls; build, create, start, stop, remove, logs and exec of the session's containers,
 * images, networks and volumes (label `conch.session`) or the workspace's compose project's — and
 * answers the rest with 403 `{"message": "conch: <rule>: <why>"}`. Streams (build output, logs -f,
 * events) pass through as they come; `docker attach` / `docker exec` switch protocols
 * (`Upgrade: tcp`) and are then piped both ways. Written here rather than taken from a Docker proxy
 * package: it must judge bodies as the engine will read them and rewrite them before forwarding.
 */
export class EngineProxy {
  private readonly options: EngineProxyOptions;
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private readonly refused: EngineRefusal[] = [];
  private readonly listeners = new Set<(refusal: EngineRefusal) => void>();
  private ctx: EnginePolicyContext | undefined;
  private engine: EngineAvailability | undefined;
  private start_: EngineProxyStartOptions | undefined;
  private socketPath: string | undefined;
  private ownDir: string | undefined;
  private spoolDir: string | undefined;
  private saidNoEngine = false;
  private redetect: Promise<EngineAvailability> | undefined;
  /** Ids of the containers created through this proxy. */
  private readonly created = new Set<string>();

  constructor(options: EngineProxyOptions = {}) {
    this.options = options;
  }

  /** Whether an engine answers (the one given to start(), or the first found); never throws. */
  engineAvailable(
    options: { engineSocket?: string; env?: NodeJS.ProcessEnv } = {},
  ): Promise<EngineAvailability> {
    return engineAvailable({
      ...((options.engineSocket ?? this.start_?.engineSocket)
        ? { engineSocket: (options.engineSocket ?? this.start_?.engineSocket)! }
        : {}),
      ...((options.env ?? this.start_?.env) ? { env: (options.env ?? this.start_?.env)! } : {}),
      ...(this.socketPath ? { exclude: [this.socketPath] } : {}),
    });
  }

  /**
   * Starts listening. Without an engine it still listens (so the sandbox's docker says why) and
   * answers every request with 503 `conch: no-engine: …`, said once in the log and the refusals;
   * an engine that starts later is found on the next request.
   */
  async start(options: EngineProxyStartOptions): Promise<{ socketPath: string; engine: EngineAvailability }> {
    if (this.server) throw new Error('EngineProxy.start: already started');
    if (!options.sessionId || /[\s"]/.test(options.sessionId)) {
      throw new Error(
        `EngineProxy.start: sessionId must be a non-empty word; received ${JSON.stringify(options.sessionId)}`,
      );
    }
    const policy: EnginePolicy = parseEnginePolicy(options.policy ?? {});
    const workspace = realpathSync(options.workspace);
    if (!safeStatSync(workspace).isDirectory())
      throw new Error(`EngineProxy.start: workspace ${workspace} is not a directory`);
    this.start_ = options;
    if (options.socketPath) {
      this.socketPath = options.socketPath;
    } else {
      this.ownDir = makeTempDir('conch-engine-');
      this.socketPath = join(this.ownDir, 'docker.sock');
    }
    this.spoolDir = makeTempDir('conch-engine-spool-');
    const env = options.env ?? process.env;
    const projectName = options.composeProjectName ?? env.COMPOSE_PROJECT_NAME;
    const composeProjects = [
      ...new Set([
        ...composeProjectNames(basename(options.workspace), projectName),
        ...composeProjectNames(basename(workspace)),
        ...policy.composeProjects,
      ]),
    ];
    this.ctx = {
      workspace,
      bindRoots: [workspace, ...policy.bindRoots.map((root) => resolveHostPath(root))],
      engineSockets: [],
      sessionId: options.sessionId,
      composeProjects,
      policy,
    };

    const server = createServer((req, res) => void this.handle(req, res));
    this.server = server;
    server.maxConnections = this.options.maxConnections ?? 256;
    // Builds upload for minutes, logs -f and events stream for hours: no request timeout.
    server.requestTimeout = 0;
    server.on(
      'upgrade',
      (req: IncomingMessage, socket: Socket, head: Buffer) => void this.upgrade(req, socket, head),
    );
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    server.on('clientError', (_error, socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.engine = await this.engineAvailable();
    this.ctx.engineSockets = existingEngineSockets(
      [
        this.socketPath,
        ...(this.engine.socket ? [this.engine.socket] : []),
        ...(options.engineSocket ? [options.engineSocket] : []),
      ],
      env,
    );
    if (!this.engine.available) this.sayNoEngine();
    else
      this.options.logger?.info(
        { engine: this.engine.engine, socket: this.engine.socket },
        'engine proxy: forwarding to the container engine',
      );
    return { socketPath: this.socketPath, engine: this.engine };
  }

  /** Stops listening, ends every connection (streams included) and removes its files. */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
    if (this.ownDir) removeSync(this.ownDir, { recursive: true, force: true });
    else if (this.socketPath) removeSync(this.socketPath, { force: true });
    if (this.spoolDir) removeSync(this.spoolDir, { recursive: true, force: true });
    this.ownDir = undefined;
    this.spoolDir = undefined;
  }

  /** Requests refused since start (the last 200), oldest first. */
  refusals(): readonly EngineRefusal[] {
    return [...this.refused];
  }

  /** Calls `listener` on each refusal; returns the function that removes it. */
  onRefusal(listener: (refusal: EngineRefusal) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private record(refusal: PolicyRefusal, method: string, path: string, route?: EngineRoute): EngineRefusal {
    const entry: EngineRefusal = {
      at: Date.now(),
      rule: refusal.rule,
      message: refusal.message,
      method,
      path,
      ...(route ? { route: route.name } : {}),
    };
    this.refused.push(entry);
    if (this.refused.length > MAX_REFUSALS) this.refused.splice(0, this.refused.length - MAX_REFUSALS);
    this.options.logger?.info(
      { rule: entry.rule, method, path, route: entry.route },
      'engine proxy: refused',
    );
    for (const listener of this.listeners) {
      try {
        listener(entry);
      } catch (error) {
        this.options.logger?.warn({ err: error }, 'engine proxy: a refusal listener threw');
      }
    }
    return entry;
  }

  private sayNoEngine(): void {
    if (this.saidNoEngine) return;
    this.saidNoEngine = true;
    const reason = this.engine?.reason ?? 'no container engine on this host';
    this.options.logger?.warn({ reason }, 'engine proxy: no container engine on this host');
    this.record({ rule: 'no-engine', message: reason }, '-', '-');
  }

  /** The engine to forward to (looked for again while there is none, once for concurrent requests). */
  private async engineSocket(): Promise<string | undefined> {
    if (this.engine?.available) return this.engine.socket;
    this.redetect ??= this.engineAvailable().then((engine) => {
      this.redetect = undefined;
      this.engine = engine;
      if (engine.available) {
        this.options.logger?.info(
          { engine: engine.engine, socket: engine.socket },
          'engine proxy: a container engine is now available',
        );
        this.ctx!.engineSockets = [
          ...new Set([...this.ctx!.engineSockets, ...existingEngineSockets([engine.socket!])]),
        ];
      }
      return engine;
    });
    const engine = await this.redetect;
    if (engine.available) return engine.socket;
    this.sayNoEngine();
    return undefined;
  }

  // --- Judging --------------------------------------------------------------------------------

  /** GET on the engine (for ownership lookups). */
  private lookup(path: string): Promise<Lookup> {
    const socketPath = this.engine!.socket!;
    return new Promise((resolve, reject) => {
      const req = httpRequest({ socketPath, path, method: 'GET', agent: false }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size <= MAX_JSON_BODY) chunks.push(c);
        });
        res.on('end', () => {
          const raw = Buffer.concat(chunks);
          let body: unknown;
          try {
            body = JSON.parse(raw.toString('utf8'));
          } catch {
            body = undefined;
          }
          resolve({ status: res.statusCode ?? 502, body, raw });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
  }

  private async inspect(kind: EngineTarget['kind'] | ObjectRef['kind'], ref: string): Promise<Lookup> {
    const encoded = encodeRef(kind, ref);
    const path = {
      container: `/containers/${encoded}/json`,
      exec: `/exec/${encoded}/json`,
      network: `/networks/${encoded}`,
      volume: `/volumes/${encoded}`,
      image: `/images/${encoded}/json`,
    }[kind];
    return this.lookup(path);
  }

  /**
   * The target must be the session's (or the project's); returns its id for containers (so the
   * engine acts on the object that was judged, whatever a name points to a moment later).
   */
  private async owned(
    kind: EngineTarget['kind'] | ObjectRef['kind'],
    ref: string,
    field?: string,
  ): Promise<{ id: string; info: unknown } | Lookup> {
    const found = await this.inspect(kind, ref);
    if (found.status !== 200) return found;
    const info = found.body as { Id?: string; ID?: string; Name?: string; ContainerID?: string } | undefined;
    const ctx = this.ctx!;
    if (kind === 'exec') {
      const container = info?.ContainerID;
      if (!container)
        throw new Refused('not-session-object', `exec ${JSON.stringify(ref)} names no container`);
      const owner = await this.owned('container', container, field ?? 'exec');
      if (!('id' in owner)) return owner;
      checkExistingContainer(owner.info, ctx);
      return { id: ref, info: owner.info };
    }
    const labels = labelsOf(info);
    let mine = isOwned(labels, ctx);
    if (mine && kind === 'container' && !this.created.has(info?.Id ?? '')) {
      // A container takes its image's labels: one the user ran from an image this session built
      // carries the session's label without having been made by the session. A label counts only
      // when the container's own value differs from its image's (or the proxy made the container).
      mine = await this.labelsNotInherited(
        labels as Record<string, unknown>,
        (info as { Image?: unknown }).Image,
      );
    }
    if (!mine && kind === 'image') mine = isComposeImageName(ref, ctx);
    if (!mine) {
      const refusal = notOwned(kind, ref, field);
      throw new Refused(refusal.rule, refusal.message);
    }
    return { id: info?.Id ?? info?.ID ?? info?.Name ?? ref, info };
  }

  /** Whether the labels that make a container owned are its own rather than its image's. */
  private async labelsNotInherited(labels: Record<string, unknown>, image: unknown): Promise<boolean> {
    if (typeof image !== 'string' || image === '') return true;
    const found = await this.inspect('image', image);
    if (found.status === 404) return true;
    const inherited = labelsOf(found.body);
    const imageLabels =
      typeof inherited === 'object' && inherited !== null ? (inherited as Record<string, unknown>) : {};
    const ctx = this.ctx!;
    const own = (key: string) => labels[key] !== undefined && labels[key] !== imageLabels[key];
    return (
      (own(SESSION_LABEL) && labels[SESSION_LABEL] === ctx.sessionId) ||
      (own(COMPOSE_PROJECT_LABEL) && ctx.composeProjects.includes(String(labels[COMPOSE_PROJECT_LABEL])))
    );
  }

  /** Checks each object a body refers to: the session's, or (for networks) a predefined one. */
  private async checkRefs(refs: readonly ObjectRef[]): Promise<Lookup | undefined> {
    for (const ref of refs) {
      const result = await this.owned(ref.kind, ref.ref, ref.field);
      if ('id' in result) continue;
      // Not the engine's 404: docker run takes a 404 from create for a missing image and pulls.
      if (result.status === 404) {
        const raw = Buffer.from(errorBody(`${ref.field}: no such ${ref.kind} ${JSON.stringify(ref.ref)}`));
        return { status: 400, body: undefined, raw };
      }
      return result;
    }
    return undefined;
  }

  /** A named volume a container mounts: the session's, or created now with the session's label. */
  private async ensureVolumes(names: readonly string[]): Promise<Lookup | undefined> {
    for (const name of names) {
      const found = await this.inspect('volume', name);
      if (found.status === 200) {
        if (!isOwned(labelsOf(found.body), this.ctx!)) {
          const refusal = notOwned('volume', name, 'a mount');
          throw new Refused(refusal.rule, refusal.message);
        }
        continue;
      }
      if (found.status !== 404) return found;
      const created = await this.send('POST', '/volumes/create', {
        Name: name,
        Labels: { [SESSION_LABEL]: this.ctx!.sessionId },
      });
      if (created.status !== 201 && created.status !== 200) return created;
    }
    return undefined;
  }

  /** A tag a build or tag request writes must not take over another's image. */
  private async checkTags(tags: readonly string[]): Promise<Lookup | undefined> {
    for (const tag of tags) {
      if (isComposeImageName(tag, this.ctx!)) continue;
      const found = await this.inspect('image', tag);
      if (found.status === 404) continue;
      if (found.status !== 200) return found;
      if (!isOwned(labelsOf(found.body), this.ctx!)) {
        throw new Refused(
          'image-tag',
          `tag ${JSON.stringify(tag)} names an image this session did not build; writing it would replace that image for everyone on the host`,
        );
      }
    }
    return undefined;
  }

  private send(method: string, path: string, json: unknown): Promise<Lookup> {
    const socketPath = this.engine!.socket!;
    const data = Buffer.from(JSON.stringify(json));
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        {
          socketPath,
          path,
          method,
          agent: false,
          headers: { 'content-type': 'application/json', 'content-length': data.length },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const raw = Buffer.concat(chunks);
            let body: unknown;
            try {
              body = JSON.parse(raw.toString('utf8'));
            } catch {
              body = undefined;
            }
            resolve({ status: res.statusCode ?? 502, body, raw });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(data);
    });
  }

  private readJson(req: IncomingMessage): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_JSON_BODY) {
          req.destroy();
          reject(new Refused('malformed-request', `the request body is larger than ${MAX_JSON_BODY} bytes`));
          return;
        }
        chunks.push(c);
      });
      req.on('end', () => {
        try {
          resolve(parseEngineJson(Buffer.concat(chunks).toString('utf8')));
        } catch (error) {
          reject(error as Error);
        }
      });
      req.on('error', reject);
    });
  }

  /** Spools a build context to a file while reading its Dockerfiles, then judges them. */
  private async spoolContext(
    req: IncomingMessage,
    dockerfile: string | undefined,
  ): Promise<{ file: string; length: number }> {
    const file = join(this.spoolDir!, `context-${process.hrtime.bigint()}.tar`);
    const out = createWriteStream(file, { mode: 0o600 });
    const scanner = new TarScanner(dockerfileCandidates(dockerfile));
    let length = 0;
    let gunzip: ReturnType<typeof createGunzip> | undefined;
    let unreadable: string | undefined;
    let first = true;
    const gunzipped = new Promise<void>((resolve) => {
      req.on('end', () => {
        if (!gunzip) return resolve();
        gunzip.once('end', () => resolve());
        gunzip.once('error', () => resolve());
        gunzip.end();
      });
    });
    try {
      await new Promise<void>((resolve, reject) => {
        req.on('data', (chunk: Buffer) => {
          if (first) {
            first = false;
            const compression = contextCompression(chunk);
            if (compression === 'gzip') {
              gunzip = createGunzip();
              gunzip.on('data', (c: Buffer) => scanner.push(c));
              gunzip.on(
                'error',
                (error) => (unreadable = `the gzip build context is corrupt (${error.message})`),
              );
            } else if (compression !== 'none') {
              unreadable = `a ${compression}-compressed build context cannot be read by the proxy; send a plain or gzip tar`;
            }
          }
          length += chunk.length;
          if (gunzip) gunzip.write(chunk);
          else if (!unreadable) scanner.push(chunk);
          if (!out.write(chunk)) {
            req.pause();
            out.once('drain', () => req.resume());
          }
        });
        req.on('end', () => resolve());
        req.on('error', reject);
        out.on('error', reject);
      });
      await gunzipped;
      await new Promise<void>((resolve, reject) =>
        out.end((error?: Error | null) => (error ? reject(error) : resolve())),
      );
      if (unreadable) throw new Refused('build-context', unreadable);
      scanner.finish();
      const refusal = checkBuildContext(scanner, dockerfile);
      if (refusal) throw new Refused(refusal.rule, refusal.message);
      return { file, length };
    } catch (error) {
      out.destroy();
      removeSync(file, { force: true });
      throw error;
    }
  }

  /** Decides a request; a refusal is thrown (Refused), an engine answer to pass on is returned. */
  private async decide(
    route: EngineRoute,
    req: IncomingMessage,
    path: string,
    query: URLSearchParams,
  ): Promise<Forward | Lookup> {
    const ctx = this.ctx!;
    const forward: Forward = { path, query };
    const target = route.target;
    const retarget = (id: string) => {
      if (!target || target.kind === 'image') return;
      const keyword = { container: 'containers', exec: 'exec', network: 'networks', volume: 'volumes' }[
        target.kind
      ];
      const segments = path.split('/');
      const at = segments.indexOf(keyword);
      if (at > 0 && at + 1 < segments.length) segments[at + 1] = encodeURIComponent(id);
      forward.path = segments.join('/');
    };
    const ownTarget = async (): Promise<{ id: string; info: unknown } | Lookup> => {
      const result = await this.owned(target!.kind, target!.ref);
      if ('id' in result) retarget(result.id);
      return result;
    };
    switch (route.kind) {
      case 'read':
        return forward;
      case 'manage': {
        const result = await ownTarget();
        return 'id' in result ? forward : result;
      }
      case 'run':
      case 'exec-run': {
        const result = await ownTarget();
        if (!('id' in result)) return result;
        if (route.kind === 'run') checkExistingContainer(result.info, ctx);
        return forward;
      }
      case 'container-create': {
        const plan = checkContainerCreate(await this.readJson(req), ctx);
        const refsAnswer = await this.checkRefs(plan.refs);
        if (refsAnswer) return refsAnswer;
        const volumesAnswer = await this.ensureVolumes(plan.volumes);
        if (volumesAnswer) return volumesAnswer;
        forward.body = { json: plan.body };
        return forward;
      }
      case 'container-update': {
        const body = checkContainerUpdate(await this.readJson(req), ctx);
        const result = await ownTarget();
        if (!('id' in result)) return result;
        forward.body = { json: body };
        return forward;
      }
      case 'exec-create': {
        const body = checkExecCreate(await this.readJson(req));
        const result = await ownTarget();
        if (!('id' in result)) return result;
        checkExistingContainer(result.info, ctx);
        forward.body = { json: body };
        return forward;
      }
      case 'network-create': {
        forward.body = { json: checkNetworkCreate(await this.readJson(req), ctx) };
        return forward;
      }
      case 'network-connect': {
        const { body, refs } = checkNetworkConnect(await this.readJson(req));
        if (!['bridge', 'podman'].includes(target!.ref)) {
          const result = await ownTarget();
          if (!('id' in result)) return result;
        }
        const refsAnswer = await this.checkRefs(refs);
        if (refsAnswer) return refsAnswer;
        forward.body = { json: body };
        return forward;
      }
      case 'volume-create': {
        forward.body = { json: checkVolumeCreate(await this.readJson(req), ctx) };
        return forward;
      }
      case 'image-pull': {
        checkImagePull(query, ctx);
        return forward;
      }
      case 'image-tag': {
        const repo = query.get('repo') ?? '';
        const tag = query.get('tag') || 'latest';
        const answer = await this.checkTags(repo ? [`${repo}:${tag}`] : []);
        return answer ?? forward;
      }
      case 'build': {
        const plan = checkBuildQuery(query, ctx);
        const answer = await this.checkTags(plan.tags);
        if (answer) return answer;
        forward.query = plan.query;
        const spooled = await this.spoolContext(req, plan.dockerfile);
        const contentType = req.headers['content-type'];
        forward.body = { ...spooled, ...(contentType ? { contentType } : {}) };
        return forward;
      }
    }
  }

  // --- Serving --------------------------------------------------------------------------------

  private refuse(
    res: ServerResponse | Socket,
    refusal: PolicyRefusal,
    method: string,
    path: string,
    route?: EngineRoute,
    status = 403,
  ): void {
    if (refusal.rule !== 'no-engine') this.record(refusal, method, path, route);
    const body = errorBody(`conch: ${refusal.rule}: ${refusal.message}`);
    if ('writeHead' in res) {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      res
        .writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
        .end(body);
    } else {
      const reason = status === 403 ? 'Forbidden' : 'Service Unavailable';
      res.end(
        `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
  }

  private answerLookup(res: ServerResponse | Socket, answer: Lookup): void {
    if ('writeHead' in res) {
      res
        .writeHead(answer.status, { 'content-type': 'application/json', 'content-length': answer.raw.length })
        .end(answer.raw);
    } else {
      res.end(
        `HTTP/1.1 ${answer.status} Engine\r\nContent-Type: application/json\r\nContent-Length: ${answer.raw.length}\r\nConnection: close\r\n\r\n${answer.raw.toString('utf8')}`,
      );
    }
  }

  /** Route + judgement shared by plain requests and upgrades; undefined when answered already. */
  private async judge(
    req: IncomingMessage,
    res: ServerResponse | Socket,
  ): Promise<{ forward: Forward; route: EngineRoute } | undefined> {
    const method = req.method ?? 'GET';
    const { path, query } = splitUrl(req.url ?? '/');
    const route = matchEngineRoute(method, path);
    if (!route) {
      this.refuse(
        res,
        {
          rule: 'unknown-endpoint',
          message: `${method} ${path} is not an endpoint the sandbox's engine policy allows`,
        },
        method,
        path,
      );
      return undefined;
    }
    const socket = await this.engineSocket();
    if (!socket) {
      this.refuse(
        res,
        { rule: 'no-engine', message: this.engine?.reason ?? 'no container engine on this host' },
        method,
        path,
        route,
        503,
      );
      return undefined;
    }
    try {
      const decided = await this.decide(route, req, path, query);
      if ('status' in decided) {
        this.answerLookup(res, decided);
        return undefined;
      }
      return { forward: decided, route };
    } catch (error) {
      if (error instanceof Refused) {
        this.refuse(res, { rule: error.rule, message: error.message }, method, path, route);
        return undefined;
      }
      this.options.logger?.warn({ err: error, method, path }, 'engine proxy: a request failed');
      const body = errorBody(`conch: the engine proxy failed: ${(error as Error).message}`);
      if ('writeHead' in res) {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
        res.end(body);
      } else {
        res.end(
          `HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${body}`,
        );
      }
      return undefined;
    }
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    req.on('error', () => res.destroy());
    res.on('error', () => undefined);
    const judged = await this.judge(req, res);
    if (!judged) {
      req.resume();
      return;
    }
    const { forward } = judged;
    const search = forward.query.toString();
    const body = forward.body;
    let json: Buffer | undefined;
    let length: number | undefined;
    if (body && 'json' in body) {
      json = Buffer.from(JSON.stringify(body.json));
      length = json.length;
    } else if (body && 'file' in body) {
      length = body.length;
    }
    const headers = forwardHeaders(req.headers, length);
    if (json) headers['content-type'] = 'application/json';
    const upstream = httpRequest(
      {
        socketPath: this.engine!.socket!,
        // A connection of its own per request: nothing of one request's stream outlives it.
        agent: false,
        method: req.method,
        path: `${forward.path}${search ? `?${search}` : ''}`,
        headers,
      },
      (answer) => {
        const out: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(answer.headers)) {
          if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
        }
        // podman's /_ping has no OSType, without which docker's CLI refuses --device before
        // asking (so the policy could not name its rule).
        if (judged.route.name === 'system.ping' && out.ostype === undefined) out.ostype = 'linux';
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
        // Streams (logs -f, events, build output) go on as they come.
        res.flushHeaders();
        if (judged.route.name === 'container.create' && answer.statusCode === 201) {
          // The id of what this proxy created: owned whatever labels its image has.
          const chunks: Buffer[] = [];
          answer.on('data', (c: Buffer) => chunks.push(c));
          answer.on('end', () => {
            const raw = Buffer.concat(chunks);
            try {
              const id = (JSON.parse(raw.toString('utf8')) as { Id?: unknown }).Id;
              if (typeof id === 'string') this.created.add(id);
            } catch {
              // not JSON: passed on as it came
            }
            res.end(raw);
          });
          return;
        }
        answer.pipe(res);
        answer.on('error', () => res.destroy());
      },
    );
    upstream.on('socket', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    upstream.on('error', (error) => {
      if (!res.headersSent) {
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end(errorBody(`conch: the container engine did not answer: ${error.message}`));
      } else res.destroy();
    });
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    if (json) {
      upstream.end(json);
    } else if (body && 'file' in body) {
      const file = body.file;
      const stream = createReadStream(file);
      stream.pipe(upstream);
      const cleanup = () => removeSync(file, { force: true });
      upstream.on('close', cleanup);
      stream.on('error', () => upstream.destroy());
    } else {
      req.pipe(upstream);
    }
  }

  /**
   * `Connection: Upgrade` (docker attach, docker exec): judged like any request, then the request
   * goes to the engine on a connection of its own and the two connections are piped both ways
   * (the engine answers 101 and the stream follows), half-closes passed on.
   */
  private async upgrade(req: IncomingMessage, client: Socket, head: Buffer): Promise<void> {
    client.on('error', () => client.destroy());
    // The body of an upgrade request (exec start's `{"Detach":false,"Tty":false}`) is not read by
    // the judgement: it arrives in `head` and on the socket and is forwarded as it comes.
    const method = req.method ?? 'POST';
    const { path } = splitUrl(req.url ?? '/');
    const route = matchEngineRoute(method, path);
    if (route && !route.hijack) {
      this.refuse(
        client,
        {
          rule: 'unknown-endpoint',
          message: `${method} ${path} does not take over the connection (Connection: Upgrade is for attach and exec start)`,
        },
        method,
        path,
        route,
      );
      return;
    }
    const judged = await this.judge(req, client);
    if (!judged) return;
    const { forward } = judged;
    const search = forward.query.toString();
    const upstream = connect({ path: this.engine!.socket!, allowHalfOpen: true });
    this.sockets.add(upstream);
    upstream.on('close', () => this.sockets.delete(upstream));
    upstream.on('error', () => {
      client.destroy();
    });
    client.on('close', () => upstream.destroy());
    upstream.once('connect', () => {
      const lines = [`${req.method} ${forward.path}${search ? `?${search}` : ''} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2)
        lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
  }
}
