import { realpathSync } from 'node:fs';
import { dirname, isAbsolute, join, posix, sep } from 'node:path';
import type { EnginePolicy } from './engine-policy-config.js';

/**
 * The container-engine policy as pure functions over parsed Docker API requests: each returns an
 * allow (with the body the engine is to get, and the objects a request refers to that the proxy
 * must look up) or a refusal naming its rule. The proxy (engine-proxy.ts) does the I/O.
 *
 * Bodies are judged as the engine will read them. Go's encoding/json matches struct fields without
 * regard to case and keeps the last of duplicated keys, so a body is refused when it has a key
 * twice in one object, struct keys are folded to their canonical spelling (last wins), and the
 * engine gets the body re-serialised from what was judged — never the bytes the client sent. A key
 * the proxy does not know is refused when it carries a value and dropped when it is empty.
 */

/** The rules a refusal names (stable strings: `conch: <rule>: <why>`). */
export type EngineRule =
  | 'unknown-endpoint'
  | 'malformed-request'
  | 'not-session-object'
  | 'privileged'
  | 'capabilities'
  | 'devices'
  | 'host-namespace'
  | 'security-opt'
  | 'engine-socket'
  | 'bind-outside-workspace'
  | 'mount-type'
  | 'volume-options'
  | 'network-options'
  | 'log-driver'
  | 'runtime'
  | 'cgroup-parent'
  | 'unknown-field'
  | 'publish-address'
  | 'image-tag'
  | 'image-pull'
  | 'build-option'
  | 'build-context'
  | 'build-mount'
  | 'no-engine';

export interface PolicyRefusal {
  rule: EngineRule;
  message: string;
}

/** The label the proxy puts on what it creates: its value is the session's id. */
export const SESSION_LABEL = 'conch.session';
/** The label compose puts on a project's containers, networks and volumes. */
export const COMPOSE_PROJECT_LABEL = 'com.docker.compose.project';

/** Networks every engine has, which any container may join (`host` is judged as a namespace). */
const PREDEFINED_NETWORKS = new Set(['bridge', 'podman', 'none', 'default']);

export interface EnginePolicyContext {
  /** The workspace, as a real path. */
  workspace: string;
  /** Real paths bind mounts may come from: the workspace and the policy's bindRoots. */
  bindRoots: readonly string[];
  /** Real paths of engine sockets (and the proxy's own): never mounted into a container. */
  engineSockets: readonly string[];
  sessionId: string;
  /** Compose project names that count as the workspace's. */
  composeProjects: readonly string[];
  policy: EnginePolicy;
  /** Resolves a host path as the kernel would follow it (default: {@link resolveHostPath}). */
  resolve?: (path: string) => string;
}

/** An object a request names that the proxy must find to be the session's (or predefined). */
export interface ObjectRef {
  kind: 'container' | 'network' | 'volume';
  ref: string;
  /** Where the request named it, for the refusal (`HostConfig.NetworkMode`). */
  field: string;
}

export class Refused extends Error {
  readonly rule: EngineRule;
  constructor(rule: EngineRule, message: string) {
    super(message);
    this.rule = rule;
  }
}

function refuse(rule: EngineRule, message: string): never {
  throw new Refused(rule, message);
}

/** Runs a check, turning a thrown refusal into a value. */
export function judged<T>(check: () => T): { ok: true; value: T } | { ok: false; refusal: PolicyRefusal } {
  try {
    return { ok: true, value: check() };
  } catch (error) {
    if (error instanceof Refused) return { ok: false, refusal: { rule: error.rule, message: error.message } };
    throw error;
  }
}

// --- JSON as Go reads it --------------------------------------------------------------------------

/** Whether a (valid) JSON text has the same key twice in one object. */
function hasDuplicateKeys(text: string): boolean {
  const stack: (Set<string> | null)[] = [];
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      const top = stack[stack.length - 1];
      if (top && expectKey) {
        const key = JSON.parse(text.slice(i, j + 1)) as string;
        if (top.has(key)) return true;
        top.add(key);
        expectKey = false;
      }
      i = j;
    } else if (c === '{') {
      stack.push(new Set());
      expectKey = true;
    } else if (c === '[') {
      stack.push(null);
    } else if (c === '}' || c === ']') {
      stack.pop();
      expectKey = false;
    } else if (c === ',') {
      expectKey = stack[stack.length - 1] != null;
    } else if (c === ':') {
      expectKey = false;
    }
  }
  return false;
}

/** Parses a request body; refuses what is not JSON or has a duplicated key. Empty: `{}`. */
export function parseEngineJson(text: string): unknown {
  if (text.trim() === '') return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    refuse('malformed-request', 'the request body is not JSON');
  }
  if (hasDuplicateKeys(text)) {
    refuse(
      'malformed-request',
      'the request body has a key twice in one object (the engine would read the last)',
    );
  }
  return value;
}

/** How Go folds a key for its case-insensitive match (the Kelvin sign and the long s fold too). */
function foldKey(key: string): string {
  return key.replace(/\u017f/g, 's').toLowerCase();
}

function isEmpty(value: unknown): boolean {
  if (value === null || value === undefined || value === false || value === 0 || value === '') return true;
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === 'object') return Object.keys(value).length === 0;
  return false;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A struct-typed object with its keys in canonical spelling (Go's case-insensitive match, the last
 * of two spellings winning); unknown keys refused when set, dropped when empty.
 */
function fold(value: unknown, fields: readonly string[], where: string): Record<string, unknown> {
  if (value === null || value === undefined) return {};
  if (!isObject(value)) refuse('malformed-request', `${where} is not an object`);
  const canonical = new Map(fields.map((f) => [foldKey(f), f]));
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const name = canonical.get(foldKey(key));
    if (name) {
      out[name] = v;
    } else if (!isEmpty(v)) {
      refuse(
        'unknown-field',
        `${where}.${key} is a field the proxy does not know, so it is not passed to the engine`,
      );
    }
  }
  return out;
}

function stringField(value: unknown, where: string): string {
  if (value === null || value === undefined) return '';
  if (typeof value !== 'string') refuse('malformed-request', `${where} is not a string`);
  return value;
}

function stringList(value: unknown, where: string): string[] {
  if (value === null || value === undefined) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) {
    refuse('malformed-request', `${where} is not a list of strings`);
  }
  return value as string[];
}

function stringMap(value: unknown, where: string): Record<string, string> {
  if (value === null || value === undefined) return {};
  if (!isObject(value) || Object.values(value).some((v) => typeof v !== 'string')) {
    refuse('malformed-request', `${where} is not a map of strings`);
  }
  return value as Record<string, string>;
}

/** Refuses a boolean field that is set to anything but false. */
function mustBeOff(value: unknown, rule: EngineRule, message: string): void {
  if (value === undefined || value === null || value === false) return;
  refuse(rule, message);
}

// --- Field lists (Docker Engine API 1.41–1.50, and podman's compat additions) ----------------------

// prettier-ignore
const CONFIG_FIELDS = [
  'Hostname', 'Domainname', 'User', 'AttachStdin', 'AttachStdout', 'AttachStderr', 'ExposedPorts',
  'Tty', 'OpenStdin', 'StdinOnce', 'Env', 'Cmd', 'Healthcheck', 'ArgsEscaped', 'Image', 'Volumes',
  'WorkingDir', 'Entrypoint', 'NetworkDisabled', 'MacAddress', 'OnBuild', 'Labels', 'StopSignal',
  'StopTimeout', 'Shell', 'HostConfig', 'NetworkingConfig',
  // podman's compat create
  'EnvMerge', 'UnsetEnv', 'UnsetEnvAll',
] as const;

// prettier-ignore
const RESOURCE_FIELDS = [
  'CpuShares', 'Memory', 'NanoCpus', 'CgroupParent', 'BlkioWeight', 'BlkioWeightDevice',
  'BlkioDeviceReadBps', 'BlkioDeviceWriteBps', 'BlkioDeviceReadIOps', 'BlkioDeviceWriteIOps',
  'CpuPeriod', 'CpuQuota', 'CpuRealtimePeriod', 'CpuRealtimeRuntime', 'CpusetCpus', 'CpusetMems',
  'Devices', 'DeviceCgroupRules', 'DeviceRequests', 'KernelMemory', 'KernelMemoryTCP',
  'MemoryReservation', 'MemorySwap', 'MemorySwappiness', 'OomKillDisable', 'Init', 'PidsLimit',
  'Ulimits', 'CpuCount', 'CpuPercent', 'IOMaximumIOps', 'IOMaximumBandwidth',
] as const;

// prettier-ignore
const HOST_CONFIG_FIELDS = [
  ...RESOURCE_FIELDS,
  'Binds', 'ContainerIDFile', 'LogConfig', 'NetworkMode', 'PortBindings', 'RestartPolicy',
  'AutoRemove', 'VolumeDriver', 'VolumesFrom', 'Mounts', 'ConsoleSize', 'Annotations', 'CapAdd',
  'CapDrop', 'CgroupnsMode', 'Dns', 'DnsOptions', 'DnsSearch', 'ExtraHosts', 'GroupAdd', 'IpcMode',
  'Cgroup', 'Links', 'OomScoreAdj', 'PidMode', 'Privileged', 'PublishAllPorts', 'ReadonlyRootfs',
  'SecurityOpt', 'StorageOpt', 'Tmpfs', 'UTSMode', 'UsernsMode', 'ShmSize', 'Sysctls', 'Runtime',
  'Isolation', 'MaskedPaths', 'ReadonlyPaths',
] as const;

// prettier-ignore
const MOUNT_FIELDS = [
  'Type', 'Source', 'Target', 'ReadOnly', 'Consistency', 'BindOptions', 'VolumeOptions',
  'TmpfsOptions', 'ImageOptions', 'ClusterOptions',
] as const;
// prettier-ignore
const BIND_OPTION_FIELDS = [
  'Propagation', 'NonRecursive', 'CreateMountpoint', 'ReadOnlyNonRecursive', 'ReadOnlyForceRecursive',
] as const;
const VOLUME_OPTION_FIELDS = ['NoCopy', 'Labels', 'Subpath', 'DriverConfig'] as const;
const DRIVER_CONFIG_FIELDS = ['Name', 'Options'] as const;
const LOG_CONFIG_FIELDS = ['Type', 'Config'] as const;
const PORT_BINDING_FIELDS = ['HostIp', 'HostPort'] as const;
const NETWORKING_CONFIG_FIELDS = ['EndpointsConfig'] as const;
// prettier-ignore
const ENDPOINT_FIELDS = [
  'IPAMConfig', 'Links', 'Aliases', 'MacAddress', 'DriverOpts', 'GwPriority', 'NetworkID',
  'EndpointID', 'Gateway', 'IPAddress', 'IPPrefixLen', 'IPv6Gateway', 'GlobalIPv6Address',
  'GlobalIPv6PrefixLen', 'DNSNames',
] as const;
// prettier-ignore
const EXEC_FIELDS = [
  'AttachStdin', 'AttachStdout', 'AttachStderr', 'ConsoleSize', 'DetachKeys', 'Tty', 'Env', 'Cmd',
  'Privileged', 'User', 'WorkingDir',
] as const;
const VOLUME_CREATE_FIELDS = ['Name', 'Driver', 'DriverOpts', 'Labels', 'ClusterVolumeSpec'] as const;
// prettier-ignore
const NETWORK_CREATE_FIELDS = [
  'Name', 'CheckDuplicate', 'Driver', 'Scope', 'Internal', 'Attachable', 'Ingress', 'ConfigOnly',
  'ConfigFrom', 'IPAM', 'EnableIPv4', 'EnableIPv6', 'Options', 'Labels',
] as const;
const IPAM_FIELDS = ['Driver', 'Config', 'Options'] as const;
const NETWORK_CONNECT_FIELDS = ['Container', 'EndpointConfig', 'Force'] as const;

/** Security options a container may carry: only ones that take privileges away. */
const SAFE_SECURITY_OPTS = new Set(['no-new-privileges', 'no-new-privileges:true', 'no-new-privileges=true']);

const LOG_DRIVERS = new Set(['', 'json-file', 'local', 'journald', 'k8s-file', 'none']);
const LOG_OPTIONS = new Set([
  'max-size',
  'max-file',
  'compress',
  'mode',
  'max-buffer-size',
  'tag',
  'labels',
  'labels-regex',
  'env',
  'env-regex',
]);

const NETWORK_OPTIONS = new Set([
  'com.docker.network.bridge.enable_icc',
  'com.docker.network.bridge.enable_ip_masquerade',
  'com.docker.network.driver.mtu',
  'com.docker.network.enable_ipv6',
  'mtu',
  'isolate',
]);

// --- Paths -----------------------------------------------------------------------------------------

/**
 * Where a host path leads: the realpath of its longest existing prefix (symbolic links followed as
 * the kernel would) with the rest appended, lexically normalised. The engines create a missing
 * bind source (`-v ./new:/x`), so a path that does not exist yet is judged by where it would be.
 */
export function resolveHostPath(path: string): string {
  // realpath of the path as given first: `link/..` is where the kernel goes (the link's parent),
  // not where a lexical normalisation would (`.`).
  let head = path;
  const rest: string[] = [];
  for (;;) {
    try {
      // The native realpath(3): node's own realpathSync folds `link/..` lexically first.
      const real = realpathSync.native(head);
      return rest.length === 0 ? real : join(real, ...rest.reverse());
    } catch {
      const parent = dirname(head);
      if (parent === head) return posix.normalize(path);
      rest.push(head.slice(parent === '/' ? 1 : parent.length + 1));
      head = parent;
    }
  }
}

function within(path: string, root: string): boolean {
  return path === root || path.startsWith(root === '/' ? '/' : `${root}${sep}`);
}

/** Judges a bind mount's source: never an engine socket, only from the workspace (or bindRoots). */
function checkBindSource(source: string, field: string, ctx: EnginePolicyContext): string {
  if (!isAbsolute(source))
    refuse('malformed-request', `${field}: bind source ${JSON.stringify(source)} is not absolute`);
  const resolved = (ctx.resolve ?? resolveHostPath)(source);
  const socketMessage = (socket: string) =>
    `${field}: ${JSON.stringify(source)} ${resolved === socket ? 'is' : 'holds'} the container engine's socket (${socket}), which would hand the container the whole engine`;
  const exact = ctx.engineSockets.find((socket) => socket === resolved);
  if (exact) refuse('engine-socket', socketMessage(exact));
  if (!ctx.bindRoots.some((root) => within(resolved, root))) {
    const via = resolved === posix.normalize(source) ? '' : ` (it resolves to ${resolved})`;
    refuse(
      'bind-outside-workspace',
      `${field}: bind mount of ${JSON.stringify(source)}${via} is outside the workspace ${ctx.workspace}; only paths inside it may be mounted`,
    );
  }
  const held = ctx.engineSockets.find((socket) => within(socket, resolved));
  if (held) refuse('engine-socket', socketMessage(held));
  return resolved;
}

const VOLUME_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

/** Volume driver options that cannot mount host paths or remote filesystems: a tmpfs at most. */
function checkVolumeDriver(driver: string, options: Record<string, string>, field: string): void {
  if (driver !== '' && driver !== 'local') {
    refuse('volume-options', `${field}: volume driver ${JSON.stringify(driver)} (only the local driver)`);
  }
  const keys = Object.keys(options);
  if (keys.length === 0) return;
  const tmpfs =
    options.type === 'tmpfs' &&
    (options.device === undefined || options.device === 'tmpfs') &&
    keys.every((k) => ['type', 'device', 'o'].includes(k)) &&
    (options.o ?? '')
      .split(',')
      .filter((o) => o !== '')
      .every((o) => /^(size|mode|uid|gid|nr_inodes|nr_blocks)=[0-9a-zA-Z%]+$/.test(o));
  if (!tmpfs) {
    refuse(
      'volume-options',
      `${field}: local volume options ${JSON.stringify(options)} would mount a host path or device (only type=tmpfs with size/mode/uid/gid)`,
    );
  }
}

// --- Namespaces ------------------------------------------------------------------------------------

interface ModeRule {
  field: string;
  allowed: (mode: string) => boolean;
  /** Whether `container:<ref>` may be used (the container must be the session's). */
  container: boolean;
}

const MODES: ModeRule[] = [
  { field: 'PidMode', allowed: (m) => m === '' || m === 'private', container: true },
  {
    field: 'IpcMode',
    allowed: (m) => ['', 'private', 'shareable', 'none'].includes(m),
    container: true,
  },
  { field: 'UTSMode', allowed: (m) => m === '' || m === 'private', container: true },
  {
    field: 'UsernsMode',
    allowed: (m) => ['', 'private', 'auto', 'keep-id', 'nomap'].includes(m.split(':')[0]!),
    container: true,
  },
  { field: 'CgroupnsMode', allowed: (m) => m === '' || m === 'private', container: false },
  { field: 'Cgroup', allowed: (m) => m === '', container: true },
];

function checkModes(hc: Record<string, unknown>, refs: ObjectRef[], where: string, running: boolean): void {
  for (const rule of MODES) {
    const field = `${where}.${rule.field}`;
    const mode = stringField(hc[rule.field], field);
    if (rule.allowed(mode)) continue;
    if (rule.container && mode.startsWith('container:')) {
      refs.push({ kind: 'container', ref: mode.slice('container:'.length), field });
      continue;
    }
    // docker on a cgroup v1 host reports its own default, 'host', for every container.
    if (running && rule.field === 'CgroupnsMode') continue;
    refuse(
      'host-namespace',
      mode === 'host'
        ? `${field} 'host' shares the host's ${rule.field.replace(/Mode$/, '').toLowerCase()} namespace`
        : `${field} ${JSON.stringify(mode)} is not a private namespace`,
    );
  }
  const network = stringField(hc.NetworkMode, `${where}.NetworkMode`);
  if (network === 'host')
    refuse('host-namespace', `${where}.NetworkMode 'host' shares the host's network namespace`);
  if (network.startsWith('ns:') || network.startsWith('slirp4netns:') || network.startsWith('pasta:')) {
    refuse('host-namespace', `${where}.NetworkMode ${JSON.stringify(network)} is not a private network`);
  }
  if (network.startsWith('container:')) {
    refs.push({ kind: 'container', ref: network.slice('container:'.length), field: `${where}.NetworkMode` });
  } else if (
    !['', 'private', 'slirp4netns', 'pasta'].includes(network) &&
    !PREDEFINED_NETWORKS.has(network)
  ) {
    refs.push({ kind: 'network', ref: network, field: `${where}.NetworkMode` });
  }
}

// --- HostConfig ------------------------------------------------------------------------------------

export interface HostConfigPlan {
  refs: ObjectRef[];
  /** Named volumes the container mounts: the proxy makes sure each is the session's (or creates it). */
  volumes: string[];
}

function checkSecurityOpts(opts: string[], field: string, running: boolean): void {
  for (const opt of opts) {
    if (SAFE_SECURITY_OPTS.has(opt)) continue;
    if (running) {
      // What an engine reports for a default container (its own AppArmor / SELinux profile).
      const [key, value = ''] = opt.split(/[=:](.*)/s);
      const relaxed = /unconfined|disable|spc_t|insecure/i.test(value);
      if ((key === 'apparmor' || key === 'label' || key === 'seccomp') && !relaxed) continue;
    }
    refuse(
      'security-opt',
      `${field} ${JSON.stringify(opt.length > 60 ? `${opt.slice(0, 60)}…` : opt)}: only no-new-privileges may be set (no seccomp, AppArmor or SELinux relaxation, no custom profile)`,
    );
  }
}

/**
 * Judges a HostConfig (a create's, an update's, or an existing container's as the engine reports
 * it: `running`, where the engine's own defaults are not the client's choices). Returns the
 * HostConfig the engine is to get (sources resolved, published ports on loopback).
 */
export function checkHostConfig(
  input: unknown,
  ctx: EnginePolicyContext,
  where = 'HostConfig',
  running = false,
): { hostConfig: Record<string, unknown>; plan: HostConfigPlan } {
  const hc = running ? (isObject(input) ? { ...input } : {}) : fold(input, [...HOST_CONFIG_FIELDS], where);
  const plan: HostConfigPlan = { refs: [], volumes: [] };

  mustBeOff(
    hc.Privileged,
    'privileged',
    `${where}.Privileged: a privileged container has every capability and every device of the host`,
  );
  const caps = stringList(hc.CapAdd, `${where}.CapAdd`);
  for (const cap of caps) {
    const name = cap.toUpperCase().replace(/^CAP_/, '');
    if (name === 'ALL' || !ctx.policy.capabilities.includes(name)) {
      refuse(
        'capabilities',
        `${where}.CapAdd ${JSON.stringify(cap)}: added capabilities are not allowed by the policy`,
      );
    }
  }
  for (const field of ['Devices', 'DeviceCgroupRules', 'DeviceRequests'] as const) {
    if (!isEmpty(hc[field])) {
      refuse('devices', `${where}.${field}: host devices (and GPU requests) are not given to containers`);
    }
  }
  checkModes(hc, plan.refs, where, running);
  checkSecurityOpts(stringList(hc.SecurityOpt, `${where}.SecurityOpt`), `${where}.SecurityOpt`, running);
  for (const field of ['MaskedPaths', 'ReadonlyPaths'] as const) {
    const value = hc[field];
    if (value === undefined || value === null) continue;
    // A list given at create replaces the engine's; an existing container's may be the engine's
    // own default list, and only an empty one unmasks /proc (`--security-opt systempaths=unconfined`).
    if (!running || (Array.isArray(value) && value.length === 0)) {
      refuse(
        'security-opt',
        `${where}.${field}: the engine's masked and read-only /proc paths may not be changed`,
      );
    }
  }
  if (!running) {
    if (!isEmpty(hc.Annotations)) {
      refuse(
        'security-opt',
        `${where}.Annotations: runtime annotations can change how the container is confined`,
      );
    }
    const runtime = stringField(hc.Runtime, `${where}.Runtime`);
    if (runtime !== '')
      refuse('runtime', `${where}.Runtime ${JSON.stringify(runtime)}: only the engine's default runtime`);
    const isolation = stringField(hc.Isolation, `${where}.Isolation`);
    if (isolation !== '' && isolation !== 'default') {
      refuse('runtime', `${where}.Isolation ${JSON.stringify(isolation)}: only the default isolation`);
    }
  }
  const cgroupParent = stringField(hc.CgroupParent, `${where}.CgroupParent`);
  if (cgroupParent !== '') {
    refuse(
      'cgroup-parent',
      `${where}.CgroupParent ${JSON.stringify(cgroupParent)}: containers stay in the engine's own cgroup`,
    );
  }
  // The CLI writes --cidfile itself; an engine that honoured the field would write a host file.
  if (!running) delete hc.ContainerIDFile;
  const volumeDriver = stringField(hc.VolumeDriver, `${where}.VolumeDriver`);
  if (volumeDriver !== '' && volumeDriver !== 'local') {
    refuse('volume-options', `${where}.VolumeDriver ${JSON.stringify(volumeDriver)}: only the local driver`);
  }

  if (!running && hc.LogConfig !== undefined && hc.LogConfig !== null) {
    const log = fold(hc.LogConfig, LOG_CONFIG_FIELDS, `${where}.LogConfig`);
    const type = stringField(log.Type, `${where}.LogConfig.Type`);
    if (!LOG_DRIVERS.has(type)) {
      refuse(
        'log-driver',
        `${where}.LogConfig.Type ${JSON.stringify(type)}: only local log drivers (json-file, local, journald, k8s-file, none)`,
      );
    }
    for (const key of Object.keys(stringMap(log.Config, `${where}.LogConfig.Config`))) {
      if (!LOG_OPTIONS.has(key)) {
        refuse(
          'log-driver',
          `${where}.LogConfig.Config.${key}: not a log option the policy allows (a log path would write a host file)`,
        );
      }
    }
    hc.LogConfig = log;
  }

  // Bind mounts and volumes: HostConfig.Binds ("src:dst[:opts]") and HostConfig.Mounts.
  const binds = stringList(hc.Binds, `${where}.Binds`);
  const newBinds: string[] = [];
  for (const [i, bind] of binds.entries()) {
    const field = `${where}.Binds[${i}]`;
    const colon = bind.indexOf(':');
    const source = colon < 0 ? bind : bind.slice(0, colon);
    if (source.startsWith('/')) {
      const resolved = checkBindSource(source, field, ctx);
      newBinds.push(colon < 0 ? resolved : `${resolved}${bind.slice(colon)}`);
    } else if (colon < 0) {
      newBinds.push(bind);
    } else {
      if (!VOLUME_NAME.test(source)) {
        refuse(
          'malformed-request',
          `${field}: ${JSON.stringify(source)} is neither an absolute path nor a volume name`,
        );
      }
      plan.volumes.push(source);
      newBinds.push(bind);
    }
  }
  if (hc.Binds !== undefined && hc.Binds !== null) hc.Binds = newBinds;

  if (hc.Mounts !== undefined && hc.Mounts !== null) {
    if (!Array.isArray(hc.Mounts)) refuse('malformed-request', `${where}.Mounts is not a list`);
    hc.Mounts = hc.Mounts.map((raw, i) => {
      const field = `${where}.Mounts[${i}]`;
      const mount = running ? (isObject(raw) ? { ...raw } : {}) : fold(raw, MOUNT_FIELDS, field);
      const type = stringField(mount.Type, `${field}.Type`).toLowerCase();
      const source = stringField(mount.Source, `${field}.Source`);
      if (type === 'bind') {
        if (!running && mount.BindOptions !== undefined && mount.BindOptions !== null) {
          mount.BindOptions = fold(mount.BindOptions, BIND_OPTION_FIELDS, `${field}.BindOptions`);
        }
        mount.Source = checkBindSource(source, `${field}.Source`, ctx);
      } else if (type === 'volume') {
        if (source !== '') {
          if (!VOLUME_NAME.test(source))
            refuse('malformed-request', `${field}.Source ${JSON.stringify(source)} is not a volume name`);
          plan.volumes.push(source);
        }
        if (!running && mount.VolumeOptions !== undefined && mount.VolumeOptions !== null) {
          const options = fold(mount.VolumeOptions, VOLUME_OPTION_FIELDS, `${field}.VolumeOptions`);
          const subpath = stringField(options.Subpath, `${field}.VolumeOptions.Subpath`);
          if (isAbsolute(subpath) || subpath.split('/').includes('..')) {
            refuse(
              'volume-options',
              `${field}.VolumeOptions.Subpath ${JSON.stringify(subpath)} leaves the volume`,
            );
          }
          if (options.DriverConfig !== undefined && options.DriverConfig !== null) {
            const driver = fold(
              options.DriverConfig,
              DRIVER_CONFIG_FIELDS,
              `${field}.VolumeOptions.DriverConfig`,
            );
            checkVolumeDriver(
              stringField(driver.Name, `${field}.VolumeOptions.DriverConfig.Name`),
              stringMap(driver.Options, `${field}.VolumeOptions.DriverConfig.Options`),
              `${field}.VolumeOptions.DriverConfig`,
            );
            options.DriverConfig = driver;
          }
          mount.VolumeOptions = options;
        }
      } else if (type !== 'tmpfs' && type !== 'image') {
        refuse(
          'mount-type',
          `${field}.Type ${JSON.stringify(type)}: only bind (from the workspace), volume, tmpfs and image mounts`,
        );
      }
      return mount;
    });
  }

  for (const [i, from] of stringList(hc.VolumesFrom, `${where}.VolumesFrom`).entries()) {
    plan.refs.push({
      kind: 'container',
      ref: from.replace(/:(ro|rw)$/, ''),
      field: `${where}.VolumesFrom[${i}]`,
    });
  }

  if (!running) {
    if (hc.PortBindings !== undefined && hc.PortBindings !== null) {
      if (!isObject(hc.PortBindings)) refuse('malformed-request', `${where}.PortBindings is not a map`);
      const ports: Record<string, unknown> = {};
      for (const [port, list] of Object.entries(hc.PortBindings)) {
        if (list === null) {
          ports[port] = list;
          continue;
        }
        if (!Array.isArray(list)) refuse('malformed-request', `${where}.PortBindings.${port} is not a list`);
        ports[port] = list.map((b, i) => {
          const binding = fold(b, PORT_BINDING_FIELDS, `${where}.PortBindings.${port}[${i}]`);
          binding.HostIp = publishAddress(
            stringField(binding.HostIp, `${where}.PortBindings.${port}[${i}].HostIp`),
            `${where}.PortBindings.${port}[${i}].HostIp`,
            ctx,
          );
          return binding;
        });
      }
      hc.PortBindings = ports;
    }
    if (ctx.policy.publish === 'loopback' && hc.PublishAllPorts !== undefined) {
      mustBeOff(
        hc.PublishAllPorts,
        'publish-address',
        `${where}.PublishAllPorts publishes every port on all of the host's addresses; publish ports one by one (they listen on 127.0.0.1)`,
      );
    }
  }
  return { hostConfig: hc, plan };
}

const LOOPBACK = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|localhost)$/;

function publishAddress(address: string, field: string, ctx: EnginePolicyContext): string {
  if (ctx.policy.publish === 'any') return address;
  const bare = address.replace(/^\[(.*)\]$/, '$1');
  if (bare === '' || bare === '0.0.0.0' || bare === '::') return '127.0.0.1';
  if (LOOPBACK.test(bare)) return address;
  refuse(
    'publish-address',
    `${field} ${JSON.stringify(address)}: published ports listen on the host's loopback only (policy publish: 'loopback')`,
  );
}

// --- Requests ----------------------------------------------------------------------------------

/** Adds the session label to a labels map (any value the client gave it is replaced). */
function withSessionLabel(labels: unknown, where: string, ctx: EnginePolicyContext): Record<string, string> {
  return { ...stringMap(labels, where), [SESSION_LABEL]: ctx.sessionId };
}

export interface ContainerCreatePlan extends HostConfigPlan {
  /** The body the engine gets. */
  body: Record<string, unknown>;
}

/** POST /containers/create. */
export function checkContainerCreate(input: unknown, ctx: EnginePolicyContext): ContainerCreatePlan {
  const body = fold(input, CONFIG_FIELDS, 'body');
  const { hostConfig, plan } = checkHostConfig(body.HostConfig, ctx);
  body.HostConfig = hostConfig;
  body.Labels = withSessionLabel(body.Labels, 'Labels', ctx);
  if (body.NetworkingConfig !== undefined && body.NetworkingConfig !== null) {
    const networking = fold(body.NetworkingConfig, NETWORKING_CONFIG_FIELDS, 'NetworkingConfig');
    if (networking.EndpointsConfig !== undefined && networking.EndpointsConfig !== null) {
      if (!isObject(networking.EndpointsConfig))
        refuse('malformed-request', 'NetworkingConfig.EndpointsConfig is not a map');
      const endpoints: Record<string, unknown> = {};
      for (const [name, settings] of Object.entries(networking.EndpointsConfig)) {
        const field = `NetworkingConfig.EndpointsConfig.${name}`;
        if (name === 'host') refuse('host-namespace', `${field}: the host's network`);
        if (!PREDEFINED_NETWORKS.has(name)) plan.refs.push({ kind: 'network', ref: name, field });
        const endpoint = fold(settings, ENDPOINT_FIELDS, field);
        const id = stringField(endpoint.NetworkID, `${field}.NetworkID`);
        if (id !== '') plan.refs.push({ kind: 'network', ref: id, field: `${field}.NetworkID` });
        endpoints[name] = endpoint;
      }
      networking.EndpointsConfig = endpoints;
    }
    body.NetworkingConfig = networking;
  }
  return { body, refs: plan.refs, volumes: plan.volumes };
}

/** POST /containers/{id}/update: resources and restart policy, judged like a create's. */
export function checkContainerUpdate(input: unknown, ctx: EnginePolicyContext): Record<string, unknown> {
  const { hostConfig } = checkHostConfig(input, ctx, 'body');
  return hostConfig;
}

/**
 * An existing container, from its inspect: judged again before it is started, attached to or
 * exec'd into, so a container the user created for the project with privileges, or whose bind
 * source was swapped for a symlink since it was created, is refused.
 */
export function checkExistingContainer(inspect: unknown, ctx: EnginePolicyContext): void {
  const info = isObject(inspect) ? inspect : {};
  checkHostConfig(info.HostConfig, ctx, 'HostConfig', true);
  const mounts = Array.isArray(info.Mounts) ? info.Mounts : [];
  for (const [i, mount] of mounts.entries()) {
    if (!isObject(mount) || String(mount.Type).toLowerCase() !== 'bind') continue;
    checkBindSource(stringField(mount.Source, `Mounts[${i}].Source`), `Mounts[${i}].Source`, ctx);
  }
}

/** POST /containers/{id}/exec. */
export function checkExecCreate(input: unknown): Record<string, unknown> {
  const body = fold(input, EXEC_FIELDS, 'body');
  mustBeOff(
    body.Privileged,
    'privileged',
    'body.Privileged: a privileged exec has every capability of the host',
  );
  return body;
}

/** POST /volumes/create. */
export function checkVolumeCreate(input: unknown, ctx: EnginePolicyContext): Record<string, unknown> {
  const body = fold(input, VOLUME_CREATE_FIELDS, 'body');
  checkVolumeDriver(
    stringField(body.Driver, 'body.Driver'),
    stringMap(body.DriverOpts, 'body.DriverOpts'),
    'body',
  );
  if (!isEmpty(body.ClusterVolumeSpec)) refuse('volume-options', 'body.ClusterVolumeSpec: cluster volumes');
  body.Labels = withSessionLabel(body.Labels, 'body.Labels', ctx);
  return body;
}

/** POST /networks/create. */
export function checkNetworkCreate(input: unknown, ctx: EnginePolicyContext): Record<string, unknown> {
  const body = fold(input, NETWORK_CREATE_FIELDS, 'body');
  const driver = stringField(body.Driver, 'body.Driver');
  if (driver !== '' && driver !== 'bridge') {
    refuse(
      'network-options',
      `body.Driver ${JSON.stringify(driver)}: only bridge networks (macvlan, ipvlan and host reach the host's own network)`,
    );
  }
  const scope = stringField(body.Scope, 'body.Scope');
  if (scope !== '' && scope !== 'local')
    refuse('network-options', `body.Scope ${JSON.stringify(scope)}: only local networks`);
  for (const field of ['Ingress', 'ConfigOnly', 'ConfigFrom'] as const) {
    if (!isEmpty(body[field]))
      refuse('network-options', `body.${field}: swarm networks are not created through the sandbox`);
  }
  for (const key of Object.keys(stringMap(body.Options, 'body.Options'))) {
    if (!NETWORK_OPTIONS.has(key)) {
      refuse(
        'network-options',
        `body.Options ${JSON.stringify(key)}: not a network option the policy allows (one naming a host bridge or host address would reach past the network)`,
      );
    }
  }
  if (body.IPAM !== undefined && body.IPAM !== null) {
    const ipam = fold(body.IPAM, IPAM_FIELDS, 'body.IPAM');
    const ipamDriver = stringField(ipam.Driver, 'body.IPAM.Driver');
    if (ipamDriver !== '' && ipamDriver !== 'default')
      refuse(
        'network-options',
        `body.IPAM.Driver ${JSON.stringify(ipamDriver)}: only the default IPAM driver`,
      );
    if (!isEmpty(ipam.Options)) refuse('network-options', 'body.IPAM.Options: IPAM driver options');
    body.IPAM = ipam;
  }
  body.Labels = withSessionLabel(body.Labels, 'body.Labels', ctx);
  return body;
}

/** POST /networks/{id}/connect and /disconnect: the container the request names. */
export function checkNetworkConnect(input: unknown): { body: Record<string, unknown>; refs: ObjectRef[] } {
  const body = fold(input, NETWORK_CONNECT_FIELDS, 'body');
  const container = stringField(body.Container, 'body.Container');
  if (container === '') refuse('malformed-request', 'body.Container names no container');
  if (body.EndpointConfig !== undefined && body.EndpointConfig !== null) {
    body.EndpointConfig = fold(body.EndpointConfig, ENDPOINT_FIELDS, 'body.EndpointConfig');
  }
  return { body, refs: [{ kind: 'container', ref: container, field: 'body.Container' }] };
}

const BUILD_QUERY = new Set([
  't',
  'dockerfile',
  'q',
  'nocache',
  'cachefrom',
  'pull',
  'rm',
  'forcerm',
  'memory',
  'memswap',
  'cpushares',
  'cpusetcpus',
  'cpuperiod',
  'cpuquota',
  'buildargs',
  'shmsize',
  'squash',
  'labels',
  'networkmode',
  'platform',
  'target',
  'extrahosts',
  'version',
  'ulimits',
  'isolation',
  'remote',
  'cgroupparent',
  'outputs',
  'session',
]);

export interface BuildPlan {
  /** The query the engine gets (session label added). */
  query: URLSearchParams;
  /** Tags the build writes: the proxy checks none of them overwrites another's image. */
  tags: string[];
  /** The Dockerfile the request names (normalised), if it names one. */
  dockerfile?: string;
}

/** POST /build: its query (the context, the body, is judged by build-context.ts). */
export function checkBuildQuery(query: URLSearchParams, ctx: EnginePolicyContext): BuildPlan {
  const out = new URLSearchParams();
  for (const [key, value] of query) {
    if (!BUILD_QUERY.has(key))
      refuse('build-option', `build option ${JSON.stringify(key)} is not one the proxy knows`);
    if (key === 'labels') continue;
    out.append(key, value);
  }
  const all = (key: string) => query.getAll(key);
  for (const mode of all('networkmode')) {
    if (mode === 'host')
      refuse('host-namespace', "build networkmode 'host' runs the build's steps in the host's network");
    if (!['', 'default', 'bridge', 'none'].includes(mode)) {
      refuse('build-option', `build networkmode ${JSON.stringify(mode)}: only default, bridge or none`);
    }
  }
  for (const remote of all('remote')) {
    if (remote !== '')
      refuse(
        'build-option',
        "a remote build context (the engine would fetch it with the host's network and credentials); send the context from the workspace",
      );
  }
  for (const value of [...all('outputs'), ...all('session')]) {
    if (value !== '') refuse('build-option', 'BuildKit outputs and sessions are not proxied');
  }
  for (const version of all('version')) {
    if (version !== '' && version !== '1')
      refuse('build-option', 'BuildKit (build version 2) is not proxied; the classic builder is used');
  }
  for (const value of all('cgroupparent')) {
    if (value !== '') refuse('cgroup-parent', 'a build cgroup parent');
  }
  for (const value of all('isolation')) {
    if (value !== '' && value !== 'default')
      refuse('runtime', `build isolation ${JSON.stringify(value)}: only the default isolation`);
  }
  let dockerfile: string | undefined;
  for (const value of all('dockerfile')) {
    if (
      value.startsWith('[') ||
      isAbsolute(value) ||
      value.split(/[/\\]/).includes('..') ||
      /^[a-z]+:\/\//i.test(value)
    ) {
      refuse(
        'build-option',
        `dockerfile ${JSON.stringify(value)}: the Dockerfile must be a relative path inside the build context`,
      );
    }
    dockerfile = posix.normalize(value.replace(/^(\.\/)+/, ''));
  }
  let labels: Record<string, string> = {};
  for (const value of all('labels')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(value || '{}');
    } catch {
      refuse('malformed-request', 'build labels are not JSON');
    }
    labels = { ...labels, ...stringMap(parsed, 'build labels') };
  }
  labels[SESSION_LABEL] = ctx.sessionId;
  out.set('labels', JSON.stringify(labels));
  return { query: out, tags: all('t').filter((t) => t !== ''), ...(dockerfile ? { dockerfile } : {}) };
}

/** POST /images/create: a pull (an import from a URL or the request body is refused). */
export function checkImagePull(query: URLSearchParams, ctx: EnginePolicyContext): void {
  for (const key of ['fromSrc', 'repo', 'changes', 'message']) {
    if (query.has(key))
      refuse(
        'image-pull',
        'importing an image (fromSrc) is not allowed; build it from a Dockerfile in the workspace',
      );
  }
  if (!query.get('fromImage')) refuse('malformed-request', 'a pull names no image (fromImage)');
  if (!ctx.policy.pull) refuse('image-pull', 'the policy does not let the engine pull images (pull: false)');
}

/** Whether a tag is one the workspace's compose project names its built images (`proj_app`, `proj-app`). */
export function isComposeImageName(tag: string, ctx: EnginePolicyContext): boolean {
  const withoutTag = tag.replace(/(:[\w][\w.-]{0,127})?(@sha256:[0-9a-f]+)?$/, '');
  const repo = withoutTag.split('/').pop() ?? '';
  return ctx.composeProjects.some((p) => repo === p || repo.startsWith(`${p}_`) || repo.startsWith(`${p}-`));
}

/** Whether labels make an object the session's or the workspace's compose project's. */
export function isOwned(labels: unknown, ctx: EnginePolicyContext): boolean {
  if (!isObject(labels)) return false;
  if (labels[SESSION_LABEL] === ctx.sessionId) return true;
  const project = labels[COMPOSE_PROJECT_LABEL];
  return typeof project === 'string' && ctx.composeProjects.includes(project);
}

/** The refusal for an object that is not the session's. */
export function notOwned(kind: string, ref: string, field?: string): PolicyRefusal {
  return {
    rule: 'not-session-object',
    message: `${field ? `${field}: ` : ''}${kind} ${JSON.stringify(ref)} was not created by this session nor belongs to the workspace's compose project`,
  };
}
