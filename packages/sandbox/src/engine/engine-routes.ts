/**
 * The Docker API endpoints the engine proxy lets through: an allow-list, so an endpoint it does not
 * know (swarm, plugins, secrets, prune, push, podman's libpod API, a newer API's additions) is
 * refused rather than forwarded unjudged.
 */

/** What a request acts on, named as the client named it (an id, an id prefix or a name). */
export interface EngineTarget {
  kind: 'container' | 'image' | 'network' | 'volume' | 'exec';
  ref: string;
}

/**
 * How a route is judged:
 * - `read`: forwarded as is (lists, inspects, version, events);
 * - `manage`: the target must be of the session or of the workspace's compose project;
 * - `run`: like `manage`, and the container's configuration is judged again as it is now (a
 *   container the user created for the project, a bind source swapped for a symlink since create);
 * - the others have their own check of query and body.
 */
export type RouteKind =
  | 'read'
  | 'manage'
  | 'run'
  | 'container-create'
  | 'container-update'
  | 'exec-create'
  | 'exec-run'
  | 'network-create'
  | 'network-connect'
  | 'volume-create'
  | 'build'
  | 'image-pull'
  | 'image-tag';

export interface EngineRoute {
  /** Stable name, e.g. `container.start` (for logs and refusal records). */
  name: string;
  kind: RouteKind;
  target?: EngineTarget;
  /**
   * The engine answers by taking the connection over (`docker attach`, `docker exec`): with
   * `Connection: Upgrade` it switches protocols (101), without it the stream follows a 200.
   */
  hijack?: boolean;
}

interface RouteSpec {
  method: string;
  /** Path segments after the API version; `:container` etc. capture one segment, `*image` the rest. */
  pattern: string;
  name: string;
  kind: RouteKind;
  hijack?: boolean;
}

const SPECS: RouteSpec[] = [
  // The engine and its events.
  { method: 'GET', pattern: '/_ping', name: 'system.ping', kind: 'read' },
  { method: 'GET', pattern: '/version', name: 'system.version', kind: 'read' },
  { method: 'GET', pattern: '/info', name: 'system.info', kind: 'read' },
  { method: 'GET', pattern: '/events', name: 'system.events', kind: 'read' },
  { method: 'GET', pattern: '/system/df', name: 'system.df', kind: 'read' },
  // Containers.
  { method: 'GET', pattern: '/containers/json', name: 'container.list', kind: 'read' },
  { method: 'POST', pattern: '/containers/create', name: 'container.create', kind: 'container-create' },
  { method: 'GET', pattern: '/containers/:container/json', name: 'container.inspect', kind: 'read' },
  { method: 'GET', pattern: '/containers/:container/top', name: 'container.top', kind: 'read' },
  { method: 'GET', pattern: '/containers/:container/stats', name: 'container.stats', kind: 'read' },
  { method: 'GET', pattern: '/containers/:container/changes', name: 'container.changes', kind: 'read' },
  { method: 'GET', pattern: '/containers/:container/logs', name: 'container.logs', kind: 'manage' },
  { method: 'GET', pattern: '/containers/:container/export', name: 'container.export', kind: 'manage' },
  { method: 'GET', pattern: '/containers/:container/archive', name: 'container.archive-get', kind: 'manage' },
  { method: 'PUT', pattern: '/containers/:container/archive', name: 'container.archive-put', kind: 'manage' },
  { method: 'POST', pattern: '/containers/:container/start', name: 'container.start', kind: 'run' },
  { method: 'POST', pattern: '/containers/:container/restart', name: 'container.restart', kind: 'run' },
  { method: 'POST', pattern: '/containers/:container/unpause', name: 'container.unpause', kind: 'run' },
  {
    method: 'POST',
    pattern: '/containers/:container/attach',
    name: 'container.attach',
    kind: 'run',
    hijack: true,
  },
  { method: 'POST', pattern: '/containers/:container/stop', name: 'container.stop', kind: 'manage' },
  { method: 'POST', pattern: '/containers/:container/kill', name: 'container.kill', kind: 'manage' },
  { method: 'POST', pattern: '/containers/:container/pause', name: 'container.pause', kind: 'manage' },
  { method: 'POST', pattern: '/containers/:container/wait', name: 'container.wait', kind: 'manage' },
  { method: 'POST', pattern: '/containers/:container/resize', name: 'container.resize', kind: 'manage' },
  { method: 'POST', pattern: '/containers/:container/rename', name: 'container.rename', kind: 'manage' },
  {
    method: 'POST',
    pattern: '/containers/:container/update',
    name: 'container.update',
    kind: 'container-update',
  },
  { method: 'DELETE', pattern: '/containers/:container', name: 'container.remove', kind: 'manage' },
  { method: 'POST', pattern: '/containers/:container/exec', name: 'exec.create', kind: 'exec-create' },
  // Execs (their container decides).
  { method: 'POST', pattern: '/exec/:exec/start', name: 'exec.start', kind: 'exec-run', hijack: true },
  { method: 'POST', pattern: '/exec/:exec/resize', name: 'exec.resize', kind: 'manage' },
  { method: 'GET', pattern: '/exec/:exec/json', name: 'exec.inspect', kind: 'read' },
  // Images.
  { method: 'GET', pattern: '/images/json', name: 'image.list', kind: 'read' },
  { method: 'POST', pattern: '/build', name: 'image.build', kind: 'build' },
  { method: 'POST', pattern: '/images/create', name: 'image.pull', kind: 'image-pull' },
  { method: 'GET', pattern: '/images/*image/json', name: 'image.inspect', kind: 'read' },
  { method: 'GET', pattern: '/images/*image/history', name: 'image.history', kind: 'read' },
  { method: 'GET', pattern: '/images/*image/get', name: 'image.save', kind: 'read' },
  { method: 'POST', pattern: '/images/*image/tag', name: 'image.tag', kind: 'image-tag' },
  { method: 'DELETE', pattern: '/images/*image', name: 'image.remove', kind: 'manage' },
  // Networks.
  { method: 'GET', pattern: '/networks', name: 'network.list', kind: 'read' },
  { method: 'POST', pattern: '/networks/create', name: 'network.create', kind: 'network-create' },
  { method: 'GET', pattern: '/networks/:network', name: 'network.inspect', kind: 'read' },
  {
    method: 'POST',
    pattern: '/networks/:network/connect',
    name: 'network.connect',
    kind: 'network-connect',
  },
  {
    method: 'POST',
    pattern: '/networks/:network/disconnect',
    name: 'network.disconnect',
    kind: 'network-connect',
  },
  { method: 'DELETE', pattern: '/networks/:network', name: 'network.remove', kind: 'manage' },
  // Volumes.
  { method: 'GET', pattern: '/volumes', name: 'volume.list', kind: 'read' },
  { method: 'POST', pattern: '/volumes/create', name: 'volume.create', kind: 'volume-create' },
  { method: 'GET', pattern: '/volumes/:volume', name: 'volume.inspect', kind: 'read' },
  { method: 'DELETE', pattern: '/volumes/:volume', name: 'volume.remove', kind: 'manage' },
];

const TARGET_OF: Record<string, EngineTarget['kind']> = {
  ':container': 'container',
  ':exec': 'exec',
  ':network': 'network',
  ':volume': 'volume',
  '*image': 'image',
};

/** The parts of a request's target the routes and the policy look at. */
export interface ParsedEnginePath {
  /** The API version prefix (`1.41`), when there was one. */
  version?: string;
  /** Decoded path segments after the version. */
  segments: string[];
}

/**
 * Splits a request path (no query) into its API version and decoded segments; undefined for a path
 * the engine might read differently than the proxy: empty or dot segments, `//`, a `%2F` that would
 * make a new segment, control characters, a bad escape. Such a request is refused, never guessed at.
 */
export function parseEnginePath(path: string): ParsedEnginePath | undefined {
  if (!path.startsWith('/') || path.length > 8192) return undefined;
  const raw = path.slice(1).split('/');
  let version: string | undefined;
  const versionMatch = /^v(\d+(?:\.\d+)*)$/.exec(raw[0] ?? '');
  if (versionMatch) {
    version = versionMatch[1]!;
    raw.shift();
  }
  const segments: string[] = [];
  for (const [i, part] of raw.entries()) {
    // A trailing slash: the engines' routers do not clean paths, so `/containers/json/` is not
    // `/containers/json` to them either; refused like any other path the proxy would have to guess.
    if (part === '' && i === raw.length - 1 && raw.length > 1) return undefined;
    let decoded: string;
    try {
      decoded = decodeURIComponent(part);
    } catch {
      return undefined;
    }
    if (decoded === '' || decoded === '.' || decoded === '..') return undefined;
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f\\/]/.test(decoded)) return undefined;
    segments.push(decoded);
  }
  return { ...(version === undefined ? {} : { version }), segments };
}

/**
 * The route a request takes, or undefined when it is not on the allow-list. HEAD is matched as GET
 * (the engines answer HEAD on their GET routes: `HEAD /_ping`, `HEAD /containers/x/archive`).
 */
export function matchEngineRoute(method: string, path: string): EngineRoute | undefined {
  const parsed = parseEnginePath(path);
  if (!parsed) return undefined;
  const verb = method.toUpperCase() === 'HEAD' ? 'GET' : method.toUpperCase();
  for (const spec of SPECS) {
    if (spec.method !== verb) continue;
    const want = spec.pattern.slice(1).split('/');
    const got = parsed.segments;
    let target: EngineTarget | undefined;
    let ok = true;
    const star = want.findIndex((w) => w.startsWith('*'));
    if (star >= 0) {
      // `*image` takes every segment between the fixed head and tail (image names have slashes).
      const head = want.slice(0, star);
      const tail = want.slice(star + 1);
      if (got.length < head.length + tail.length + 1) continue;
      ok =
        head.every((w, i) => w === got[i]) && tail.every((w, i) => w === got[got.length - tail.length + i]);
      if (ok) {
        const ref = got.slice(head.length, got.length - tail.length).join('/');
        target = { kind: TARGET_OF[want[star]!]!, ref };
      }
    } else {
      if (want.length !== got.length) continue;
      for (const [i, w] of want.entries()) {
        if (w.startsWith(':')) {
          // One segment: an id or a name (a `/` here would have been a new segment).
          target = { kind: TARGET_OF[w]!, ref: got[i]! };
        } else if (w !== got[i]) {
          ok = false;
          break;
        }
      }
    }
    if (!ok) continue;
    // `/containers/json` is the list, not a container named `json`: the fixed routes come first.
    return {
      name: spec.name,
      kind: spec.kind,
      ...(target ? { target } : {}),
      ...(spec.hijack ? { hijack: true } : {}),
    };
  }
  return undefined;
}
