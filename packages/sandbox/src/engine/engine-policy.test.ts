// Pins: every way through the engine out of the sandbox (host paths, the engine socket, privileges, devices, host namespaces, security relaxations, foreign objects, unknown endpoints) is refused with its rule, in many spellings, and what is allowed reaches the engine in the form that was judged.
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidConfigError } from '@conch/core';
import { checkBuildContext, checkDockerfile, TarScanner, dockerfileCandidates } from './build-context.js';
import { composeProjectNames, parseEnginePolicy } from './engine-policy-config.js';
import {
  checkBuildQuery,
  checkContainerCreate,
  checkExecCreate,
  checkExistingContainer,
  checkImagePull,
  checkNetworkCreate,
  checkVolumeCreate,
  isComposeImageName,
  isOwned,
  judged,
  parseEngineJson,
  SESSION_LABEL,
  type EnginePolicyContext,
  type EngineRule,
} from './engine-policy.js';
import { matchEngineRoute } from './engine-routes.js';

const root = realpathSync(mkdtempSync(join(tmpdir(), 'conch-engine-policy-')));
const workspace = join(root, 'ws');
const outside = join(root, 'outside');
const engineSocketDir = join(root, 'run');
const engineSocket = join(engineSocketDir, 'docker.sock');
mkdirSync(join(workspace, 'src', 'deep'), { recursive: true });
mkdirSync(outside);
mkdirSync(engineSocketDir);
writeFileSync(engineSocket, ''); // stands for the socket: the policy judges paths
writeFileSync(join(outside, 'secret'), 'x');
symlinkSync('/', join(workspace, 'to-root'));
symlinkSync(outside, join(workspace, 'to-outside'));
symlinkSync('../outside', join(workspace, 'relative-out'));
symlinkSync(join(workspace, 'to-outside'), join(workspace, 'chain'));
symlinkSync(engineSocket, join(workspace, 'sock-link'));
symlinkSync(homedir(), join(workspace, 'home'));
symlinkSync(join(workspace, 'src'), join(workspace, 'inside-link'));
mkdirSync(join(workspace, 'src', 'deep', 'up'));
symlinkSync('../../..', join(workspace, 'src', 'deep', 'up', 'back'));

afterAll(() => rmSync(root, { recursive: true, force: true }));

function context(policy: unknown = {}): EnginePolicyContext {
  return {
    workspace,
    bindRoots: [workspace],
    engineSockets: [engineSocket],
    sessionId: 'sess-1',
    composeProjects: composeProjectNames('ws'),
    policy: parseEnginePolicy(policy),
  };
}

function ruleOf(check: () => unknown): EngineRule | 'allowed' {
  const result = judged(check);
  return result.ok ? 'allowed' : result.refusal.rule;
}

function create(hostConfig: unknown, extra: Record<string, unknown> = {}, policy?: unknown) {
  return () => checkContainerCreate({ Image: 'img', HostConfig: hostConfig, ...extra }, context(policy));
}

describe('container create: host paths', () => {
  const outsidePaths = [
    '/',
    '/etc',
    '/root',
    homedir(),
    join(homedir(), '.ssh'),
    '/var/lib',
    root,
    outside,
    join(outside, 'secret'),
    `${workspace}/..`,
    `${workspace}/../outside`,
    `${workspace}/src/../../outside`,
    `${workspace}-sibling`,
    join(workspace, 'to-root'),
    join(workspace, 'to-root', 'etc'),
    join(workspace, 'to-outside'),
    join(workspace, 'relative-out'),
    join(workspace, 'chain'),
    join(workspace, 'chain', 'not-yet'),
    join(workspace, 'home'),
    join(workspace, 'home', '.ssh'),
    `${workspace}/src/deep/up/back/..`,
    join(workspace, 'to-outside', 'new', 'dir'),
  ];
  it.each(outsidePaths)('Binds %s is refused', (path) => {
    expect(ruleOf(create({ Binds: [`${path}:/h`] }))).toBe('bind-outside-workspace');
    expect(ruleOf(create({ Binds: [`${path}:/h:ro`] }))).toBe('bind-outside-workspace');
  });
  it.each(outsidePaths)('Mounts bind %s is refused (any spelling of the keys and type)', (path) => {
    expect(ruleOf(create({ Mounts: [{ Type: 'bind', Source: path, Target: '/h' }] }))).toBe(
      'bind-outside-workspace',
    );
    expect(ruleOf(create({ mounts: [{ type: 'bind', source: path, target: '/h' }] }))).toBe(
      'bind-outside-workspace',
    );
    expect(ruleOf(create({ Mounts: [{ Type: 'Bind', SOURCE: path, Target: '/h' }] }))).toBe(
      'bind-outside-workspace',
    );
  });
  it('a bind from the workspace is allowed and reaches the engine resolved', () => {
    const plan = checkContainerCreate(
      {
        Image: 'img',
        HostConfig: {
          Binds: [`${workspace}/inside-link/deep:/a:ro`, `${workspace}/new-dir:/b`],
          Mounts: [{ Type: 'bind', Source: `${workspace}/src/../src`, Target: '/c' }],
        },
      },
      context(),
    );
    const hc = plan.body.HostConfig as { Binds: string[]; Mounts: { Source: string }[] };
    expect(hc.Binds).toEqual([`${workspace}/src/deep:/a:ro`, `${workspace}/new-dir:/b`]);
    expect(hc.Mounts[0]!.Source).toBe(`${workspace}/src`);
  });
  it('bindRoots from the policy open more directories', () => {
    const ctx = { ...context({ bindRoots: [outside] }), bindRoots: [workspace, outside] };
    expect(ruleOf(() => checkContainerCreate({ HostConfig: { Binds: [`${outside}:/o`] } }, ctx))).toBe(
      'allowed',
    );
    expect(ruleOf(() => checkContainerCreate({ HostConfig: { Binds: ['/etc:/o'] } }, ctx))).toBe(
      'bind-outside-workspace',
    );
  });
});

describe('container create: the engine socket', () => {
  it.each([
    engineSocket,
    join(workspace, 'sock-link'),
    `${engineSocketDir}/./docker.sock`,
    `${engineSocketDir}//docker.sock`,
  ])('mounting %s is refused as the engine socket', (path) => {
    expect(ruleOf(create({ Binds: [`${path}:/var/run/docker.sock`] }))).toBe('engine-socket');
    expect(ruleOf(create({ Mounts: [{ Type: 'bind', Source: path, Target: '/var/run/docker.sock' }] }))).toBe(
      'engine-socket',
    );
  });
  it('a workspace directory holding an engine socket is refused', () => {
    const ctx = { ...context(), engineSockets: [join(workspace, 'src', 'engine.sock')] };
    expect(ruleOf(() => checkContainerCreate({ HostConfig: { Binds: [`${workspace}/src:/s`] } }, ctx))).toBe(
      'engine-socket',
    );
    expect(ruleOf(() => checkContainerCreate({ HostConfig: { Binds: [`${workspace}:/s`] } }, ctx))).toBe(
      'engine-socket',
    );
  });
});

describe('container create: privileges', () => {
  it.each([
    [{ Privileged: true }],
    [{ privileged: true }],
    [{ PRIVILEGED: true }],
    [{ Privileged: 'true' }],
    [{ Privileged: 1 }],
  ])('%j is refused as privileged', (hc) => {
    expect(ruleOf(create(hc))).toBe('privileged');
  });
  it('a lowercase HostConfig key is read as Go reads it', () => {
    expect(ruleOf(() => checkContainerCreate({ hostconfig: { privileged: true } }, context()))).toBe(
      'privileged',
    );
    expect(ruleOf(() => checkContainerCreate({ hostConfig: { Binds: ['/:/h'] } }, context()))).toBe(
      'bind-outside-workspace',
    );
  });
  it('two spellings of one field: the last wins, as in Go', () => {
    expect(
      ruleOf(() =>
        checkContainerCreate(
          parseEngineJson('{"HostConfig":{"Privileged":false,"privileged":true}}'),
          context(),
        ),
      ),
    ).toBe('privileged');
    expect(
      ruleOf(() =>
        checkContainerCreate(
          parseEngineJson('{"HostConfig":{"privileged":true,"Privileged":false}}'),
          context(),
        ),
      ),
    ).toBe('allowed');
  });
  it('a key given twice is refused (JSON.parse and Go would disagree on where it stands)', () => {
    expect(
      ruleOf(() =>
        parseEngineJson('{"HostConfig":{"privileged":true,"Privileged":false,"privileged":true}}'),
      ),
    ).toBe('malformed-request');
    expect(ruleOf(() => parseEngineJson('{"a":1,"a":2}'))).toBe('malformed-request');
    expect(ruleOf(() => parseEngineJson('[{"a":1},{"a":2}]'))).toBe('allowed');
    expect(ruleOf(() => parseEngineJson('{"a":"x\\"a","b":{"a":1}}'))).toBe('allowed');
    expect(ruleOf(() => parseEngineJson('{nope'))).toBe('malformed-request');
  });
  it.each([
    ['SYS_ADMIN'],
    ['CAP_SYS_ADMIN'],
    ['sys_admin'],
    ['cap_sys_admin'],
    ['ALL'],
    ['all'],
    ['SYS_PTRACE'],
    ['NET_ADMIN'],
    ['DAC_READ_SEARCH'],
    ['SYS_MODULE'],
  ])('CapAdd %s is refused', (cap) => {
    expect(ruleOf(create({ CapAdd: [cap] }))).toBe('capabilities');
    expect(ruleOf(create({ capadd: ['CHOWN', cap] }))).toBe('capabilities');
  });
  it('a capability the policy names is let through, ALL never', () => {
    expect(ruleOf(create({ CapAdd: ['NET_ADMIN'] }, {}, { capabilities: ['net_admin'] }))).toBe('allowed');
    expect(ruleOf(create({ CapAdd: ['CAP_NET_ADMIN'] }, {}, { capabilities: ['NET_ADMIN'] }))).toBe(
      'allowed',
    );
    expect(ruleOf(create({ CapAdd: ['SYS_ADMIN'] }, {}, { capabilities: ['NET_ADMIN'] }))).toBe(
      'capabilities',
    );
    expect(() => parseEnginePolicy({ capabilities: ['ALL'] })).toThrow(InvalidConfigError);
  });
  it('CapDrop is fine', () => {
    expect(ruleOf(create({ CapDrop: ['ALL'] }))).toBe('allowed');
  });
  it.each([
    [{ Devices: [{ PathOnHost: '/dev/sda', PathInContainer: '/dev/sda', CgroupPermissions: 'rwm' }] }],
    [{ Devices: [{ PathOnHost: '/dev/null', PathInContainer: '/dev/x' }] }],
    [{ devices: [{ PathOnHost: '/dev/kmsg' }] }],
    [{ DeviceCgroupRules: ['c *:* rwm'] }],
    [{ DeviceCgroupRules: ['b 8:* rwm'] }],
    [{ DeviceRequests: [{ Driver: 'nvidia', Count: -1, Capabilities: [['gpu']] }] }],
    [{ devicerequests: [{ Count: 1 }] }],
  ])('%j is refused as a device', (hc) => {
    expect(ruleOf(create(hc))).toBe('devices');
  });
});

describe('container create: namespaces', () => {
  it.each([
    ['PidMode', 'host'],
    ['pidmode', 'host'],
    ['PidMode', 'Host'],
    ['PidMode', 'ns:/proc/1/ns/pid'],
    ['IpcMode', 'host'],
    ['IpcMode', 'ns:/proc/1/ns/ipc'],
    ['UTSMode', 'host'],
    ['UsernsMode', 'host'],
    ['UsernsMode', 'ns:/proc/1/ns/user'],
    ['CgroupnsMode', 'host'],
    ['Cgroup', 'host'],
    ['NetworkMode', 'host'],
    ['networkmode', 'host'],
    ['NetworkMode', 'ns:/proc/1/ns/net'],
    ['NetworkMode', 'slirp4netns:allow_host_loopback=true'],
    ['NetworkMode', 'pasta:--map-gw'],
  ])('%s %s is refused', (field, mode) => {
    expect(ruleOf(create({ [field]: mode }))).toBe('host-namespace');
  });
  it('a host network endpoint is refused', () => {
    expect(ruleOf(create({}, { NetworkingConfig: { EndpointsConfig: { host: {} } } }))).toBe(
      'host-namespace',
    );
  });
  it('private modes pass; container: and user networks become references to look up', () => {
    const plan = checkContainerCreate(
      {
        HostConfig: {
          PidMode: 'container:db',
          IpcMode: 'shareable',
          NetworkMode: 'proj_default',
          UsernsMode: 'keep-id:uid=1000',
          VolumesFrom: ['data:ro'],
        },
        NetworkingConfig: { EndpointsConfig: { proj_default: { Aliases: ['app'] }, bridge: {} } },
      },
      context(),
    );
    expect(plan.refs.map((r) => `${r.kind}:${r.ref}`).sort()).toEqual([
      'container:data',
      'container:db',
      'network:proj_default',
      'network:proj_default',
    ]);
  });
});

describe('container create: security options and the rest', () => {
  it.each([
    'seccomp=unconfined',
    'seccomp:unconfined',
    'seccomp={"defaultAction":"SCMP_ACT_ALLOW"}',
    'apparmor=unconfined',
    'apparmor:unconfined',
    'label=disable',
    'label:disable',
    'label=type:spc_t',
    'label=type:unconfined_t',
    'systempaths=unconfined',
    'no-new-privileges=false',
    'no-new-privileges:false',
    'mask=/proc/kcore',
    'unmask=ALL',
    'proc-opts=subset=pid',
  ])('SecurityOpt %s is refused', (opt) => {
    expect(ruleOf(create({ SecurityOpt: [opt] }))).toBe('security-opt');
    expect(ruleOf(create({ securityopt: ['no-new-privileges', opt] }))).toBe('security-opt');
    expect(ruleOf(create({ '\u017fecurityOpt': [opt] }))).toBe('security-opt');
  });
  it('no-new-privileges is allowed', () => {
    expect(ruleOf(create({ SecurityOpt: ['no-new-privileges', 'no-new-privileges:true'] }))).toBe('allowed');
  });
  it.each([
    [{ MaskedPaths: [] }],
    [{ ReadonlyPaths: [] }],
    [{ MaskedPaths: ['/proc/kcore'] }],
    [{ Annotations: { 'run.oci.keep_original_groups': '1' } }],
  ])('%j is refused', (hc) => {
    expect(ruleOf(create(hc))).toBe('security-opt');
  });
  it.each([
    [{ Runtime: 'runc' }, 'runtime'],
    [{ Runtime: 'nvidia' }, 'runtime'],
    [{ Isolation: 'process' }, 'runtime'],
    [{ CgroupParent: '/' }, 'cgroup-parent'],
    [{ CgroupParent: 'system.slice' }, 'cgroup-parent'],
    [{ VolumeDriver: 'nfs' }, 'volume-options'],
    [{ LogConfig: { Type: 'syslog', Config: { 'syslog-address': 'tcp://10.0.0.1:514' } } }, 'log-driver'],
    [{ LogConfig: { Type: 'fluentd' } }, 'log-driver'],
    [{ LogConfig: { Type: 'k8s-file', Config: { path: '/etc/cron.d/x' } } }, 'log-driver'],
    [{ logconfig: { type: 'gelf' } }, 'log-driver'],
    [{ Mounts: [{ Type: 'npipe', Source: 'x', Target: '/x' }] }, 'mount-type'],
    [{ Mounts: [{ Type: 'cluster', Source: 'x', Target: '/x' }] }, 'mount-type'],
    [{ Mounts: [{ Type: 'devpts', Target: '/x' }] }, 'mount-type'],
    [
      {
        Mounts: [
          {
            Type: 'volume',
            Source: 'v',
            Target: '/x',
            VolumeOptions: {
              DriverConfig: { Name: 'local', Options: { type: 'none', o: 'bind', device: '/' } },
            },
          },
        ],
      },
      'volume-options',
    ],
    [
      { Mounts: [{ Type: 'volume', Source: 'v', Target: '/x', VolumeOptions: { Subpath: '../../etc' } }] },
      'volume-options',
    ],
    [{ SomethingNew: { x: 1 } }, 'unknown-field'],
    [{ Privileged: false, NewPrivilegeKnob: true }, 'unknown-field'],
  ])('%j is refused as %s', (hc, rule) => {
    expect(ruleOf(create(hc))).toBe(rule);
  });
  it('an unknown field left empty is dropped, not forwarded', () => {
    const plan = checkContainerCreate(
      { HostConfig: { FutureField: null, Other: [] }, Unknown: '' },
      context(),
    );
    expect(plan.body.HostConfig).toEqual({});
    expect('Unknown' in plan.body).toBe(false);
  });
  it('ContainerIDFile (the CLI writes it) is not passed to the engine', () => {
    const plan = checkContainerCreate({ HostConfig: { ContainerIDFile: '/etc/passwd' } }, context());
    expect(plan.body.HostConfig).toEqual({});
  });
  it('the session label is set whatever the client says', () => {
    const plan = checkContainerCreate({ Labels: { a: 'b', [SESSION_LABEL]: 'other' } }, context());
    expect(plan.body.Labels).toEqual({ a: 'b', [SESSION_LABEL]: 'sess-1' });
  });
  it('named volumes are collected for the proxy to check or create', () => {
    const plan = checkContainerCreate(
      {
        HostConfig: {
          Binds: ['data:/d'],
          Mounts: [
            { Type: 'volume', Source: 'cache', Target: '/c' },
            { Type: 'volume', Target: '/e' },
          ],
        },
      },
      context(),
    );
    expect(plan.volumes).toEqual(['data', 'cache']);
  });
});

describe('container create: published ports', () => {
  const ports = (hostIp: string) => ({ PortBindings: { '80/tcp': [{ HostIp: hostIp, HostPort: '8080' }] } });
  it.each(['', '0.0.0.0', '::', '[::]'])('HostIp %j is rewritten to loopback', (ip) => {
    const plan = checkContainerCreate({ HostConfig: ports(ip) }, context());
    expect(
      (plan.body.HostConfig as { PortBindings: Record<string, { HostIp: string }[]> }).PortBindings[
        '80/tcp'
      ]![0]!.HostIp,
    ).toBe('127.0.0.1');
  });
  it.each(['10.0.0.1', '192.168.1.5', 'fe80::1', '172.17.0.1'])('HostIp %s is refused', (ip) => {
    expect(ruleOf(create(ports(ip)))).toBe('publish-address');
  });
  it.each(['127.0.0.1', '127.0.0.2', '::1'])('HostIp %s stays', (ip) => {
    expect(ruleOf(create(ports(ip)))).toBe('allowed');
  });
  it("PublishAllPorts is refused on loopback, allowed with publish: 'any'", () => {
    expect(ruleOf(create({ PublishAllPorts: true }))).toBe('publish-address');
    expect(ruleOf(create({ PublishAllPorts: true }, {}, { publish: 'any' }))).toBe('allowed');
    expect(ruleOf(create(ports('10.0.0.1'), {}, { publish: 'any' }))).toBe('allowed');
  });
});

describe('existing containers, judged again before start, attach and exec', () => {
  const plain = {
    HostConfig: {
      Binds: [],
      NetworkMode: 'bridge',
      IpcMode: 'shareable',
      PidMode: 'private',
      UTSMode: 'private',
      SecurityOpt: [],
      CapAdd: [],
      Runtime: 'oci',
      MaskedPaths: null,
      CgroupnsMode: 'host',
    },
    Mounts: [{ Type: 'bind', Source: `${workspace}/src`, Destination: '/s' }],
  };
  it("a plain container as podman and docker report it passes (the engine's own defaults)", () => {
    expect(ruleOf(() => checkExistingContainer(plain, context()))).toBe('allowed');
    expect(
      ruleOf(() =>
        checkExistingContainer(
          {
            HostConfig: {
              ...plain.HostConfig,
              SecurityOpt: ['apparmor=docker-default', 'label=type:container_t'],
              MaskedPaths: ['/proc/kcore'],
            },
          },
          context(),
        ),
      ),
    ).toBe('allowed');
  });
  it.each([
    [{ HostConfig: { ...plain.HostConfig, Privileged: true } }, 'privileged'],
    [{ HostConfig: { ...plain.HostConfig, PidMode: 'host' } }, 'host-namespace'],
    [{ HostConfig: { ...plain.HostConfig, CapAdd: ['SYS_ADMIN'] } }, 'capabilities'],
    [{ HostConfig: { ...plain.HostConfig, SecurityOpt: ['seccomp=unconfined'] } }, 'security-opt'],
    [{ HostConfig: { ...plain.HostConfig, MaskedPaths: [] } }, 'security-opt'],
    [
      { HostConfig: plain.HostConfig, Mounts: [{ Type: 'bind', Source: join(workspace, 'to-root') }] },
      'bind-outside-workspace',
    ],
    [{ HostConfig: plain.HostConfig, Mounts: [{ Type: 'bind', Source: '/home' }] }, 'bind-outside-workspace'],
    [{ HostConfig: { ...plain.HostConfig, Binds: [`${workspace}/chain:/x`] } }, 'bind-outside-workspace'],
    [{ HostConfig: plain.HostConfig, Mounts: [{ Type: 'bind', Source: engineSocket }] }, 'engine-socket'],
  ])('%j is refused as %s', (inspect, rule) => {
    expect(ruleOf(() => checkExistingContainer(inspect, context()))).toBe(rule);
  });
});

describe('exec, volumes, networks', () => {
  it.each([[{ Privileged: true }], [{ privileged: true }], [{ Cmd: ['sh'], PRIVILEGED: 'yes' }]])(
    'exec %j is refused',
    (body) => {
      expect(ruleOf(() => checkExecCreate(body))).toBe('privileged');
    },
  );
  it('a plain exec is allowed', () => {
    expect(ruleOf(() => checkExecCreate({ Cmd: ['sh'], AttachStdout: true, Tty: false, User: 'root' }))).toBe(
      'allowed',
    );
  });
  it.each([
    [{ Driver: 'local', DriverOpts: { type: 'none', o: 'bind', device: '/' } }],
    [{ Driver: 'local', DriverOpts: { type: 'none', o: 'rbind', device: '/root' } }],
    [{ driveropts: { o: 'bind', device: '/etc' } }],
    [{ DriverOpts: { device: '/dev/sda1', type: 'ext4' } }],
    [{ DriverOpts: { type: 'nfs', o: 'addr=10.0.0.1,rw', device: ':/export' } }],
    [{ DriverOpts: { type: 'cifs', device: '//10.0.0.1/share' } }],
    [{ DriverOpts: { type: 'tmpfs', device: 'tmpfs', o: 'size=1m,bind' } }],
    [{ DriverOpts: { type: 'tmpfs', device: '/etc' } }],
    [{ Driver: 'nfs' }],
    [{ Driver: 'rexray' }],
  ])('volume %j is refused', (body) => {
    expect(ruleOf(() => checkVolumeCreate(body, context()))).toBe('volume-options');
  });
  it('a plain or tmpfs volume is allowed and labelled', () => {
    expect(checkVolumeCreate({ Name: 'v' }, context()).Labels).toEqual({ [SESSION_LABEL]: 'sess-1' });
    expect(
      ruleOf(() =>
        checkVolumeCreate(
          { DriverOpts: { type: 'tmpfs', device: 'tmpfs', o: 'size=100m,uid=1000' } },
          context(),
        ),
      ),
    ).toBe('allowed');
  });
  it.each([
    [{ Name: 'n', Driver: 'macvlan', Options: { parent: 'eth0' } }],
    [{ Name: 'n', Driver: 'ipvlan' }],
    [{ Name: 'n', Driver: 'host' }],
    [{ Name: 'n', driver: 'overlay' }],
    [{ Name: 'n', Options: { 'com.docker.network.bridge.name': 'docker0' } }],
    [{ Name: 'n', Options: { 'com.docker.network.bridge.host_binding_ipv4': '0.0.0.0' } }],
    [{ Name: 'n', Ingress: true }],
    [{ Name: 'n', ConfigFrom: { Network: 'x' } }],
    [{ Name: 'n', IPAM: { Driver: 'dhcp' } }],
  ])('network %j is refused', (body) => {
    expect(ruleOf(() => checkNetworkCreate(body, context()))).toBe('network-options');
  });
  it('a bridge network is allowed and labelled', () => {
    const body = checkNetworkCreate(
      {
        Name: 'proj_default',
        Driver: 'bridge',
        Labels: { 'com.docker.compose.project': 'proj' },
        IPAM: { Config: [{ Subnet: '10.89.9.0/24' }] },
      },
      context(),
    );
    expect(body.Labels).toEqual({ 'com.docker.compose.project': 'proj', [SESSION_LABEL]: 'sess-1' });
  });
});

describe('ownership', () => {
  it.each([
    [{ [SESSION_LABEL]: 'sess-1' }, true],
    [{ 'com.docker.compose.project': 'ws' }, true],
    [{ [SESSION_LABEL]: 'sess-2' }, false],
    [{ 'com.docker.compose.project': 'other' }, false],
    [{ 'com.docker.compose.project': 'WS' }, false],
    [{}, false],
    [null, false],
  ])('labels %j: owned %s', (labels, owned) => {
    expect(isOwned(labels, context())).toBe(owned);
  });
  it('compose project names as compose v1 and v2 derive them', () => {
    expect(composeProjectNames('My App.v2')).toEqual(['myappv2']);
    expect(composeProjectNames('_x-Y')).toEqual(['_x-y', 'x-y']);
    expect(composeProjectNames('ws', 'Custom')).toEqual(['ws', 'custom']);
  });
  it('compose-built image names count as the project', () => {
    expect(isComposeImageName('ws_app', context())).toBe(true);
    expect(isComposeImageName('ws-app:latest', context())).toBe(true);
    expect(isComposeImageName('localhost/ws_db', context())).toBe(true);
    expect(isComposeImageName('postgres:15', context())).toBe(false);
    expect(isComposeImageName('wsx_app', context())).toBe(false);
  });
});

describe('build and pull', () => {
  const q = (s: string) => new URLSearchParams(s);
  it.each([
    ['networkmode=host', 'host-namespace'],
    ['t=x&networkmode=bridge&networkmode=host', 'host-namespace'],
    ['networkmode=container:abc', 'build-option'],
    ['remote=https://example.com/ctx.tar', 'build-option'],
    ['remote=git@github.com:a/b.git', 'build-option'],
    ['dockerfile=../../etc/passwd', 'build-option'],
    ['dockerfile=/etc/passwd', 'build-option'],
    ['dockerfile=["Dockerfile","/etc/x"]', 'build-option'],
    ['dockerfile=https://example.com/Dockerfile', 'build-option'],
    ['version=2', 'build-option'],
    ['outputs=type=local,dest=/', 'build-option'],
    ['session=abc', 'build-option'],
    ['secrets=[{"id":"a","src":"/etc/shadow"}]', 'build-option'],
    ['isolation=chroot', 'runtime'],
    ['cgroupparent=/', 'cgroup-parent'],
    ['unknownopt=1', 'build-option'],
  ])('build %s is refused as %s', (query, rule) => {
    expect(ruleOf(() => checkBuildQuery(q(query), context()))).toBe(rule);
  });
  it('a build gets the session label, keeps its own labels, names its tags', () => {
    const plan = checkBuildQuery(
      q('t=a:1&t=b&labels={"x":"y"}&dockerfile=./sub/Dockerfile&networkmode=default'),
      context(),
    );
    expect(JSON.parse(plan.query.get('labels')!)).toEqual({ x: 'y', [SESSION_LABEL]: 'sess-1' });
    expect(plan.tags).toEqual(['a:1', 'b']);
    expect(plan.dockerfile).toBe('sub/Dockerfile');
  });
  it('pulls follow the policy; imports are refused', () => {
    expect(ruleOf(() => checkImagePull(q('fromImage=postgres&tag=15'), context()))).toBe('allowed');
    expect(ruleOf(() => checkImagePull(q('fromImage=postgres'), context({ pull: false })))).toBe(
      'image-pull',
    );
    expect(ruleOf(() => checkImagePull(q('fromSrc=http://10.0.0.1/x.tar&repo=x'), context()))).toBe(
      'image-pull',
    );
    expect(ruleOf(() => checkImagePull(q('fromSrc=-&repo=postgres'), context()))).toBe('image-pull');
  });
});

describe('Dockerfiles in a build context', () => {
  it.each([
    ['RUN --mount=type=bind,source=/,target=/h touch /h/x', 'build-mount'],
    ['RUN --mount=type=bind,src=/etc,target=/h cat /h/shadow', 'build-mount'],
    ['RUN --mount=source=/root,target=/h ls', 'build-mount'],
    ['RUN --mount=type=bind,source=../../,target=/h ls', 'build-mount'],
    ['RUN --mount=type=bind,source=sub/../../..,target=/h ls', 'build-mount'],
    ['RUN --mount=type=cache,source=/var,target=/h ls', 'build-mount'],
    ['RUN --mount="type=bind,source=/,target=/h" ls', 'build-mount'],
    ['RUN --mount=type=bind,"source=/",target=/h ls', 'build-mount'],
    ['run --MOUNT=type=bind,source=/,target=/h ls', 'build-mount'],
    ['RUN --mount=type=bind,source=$SRC,target=/h ls', 'build-mount'],
    ['RUN --mount=type=bind,source=${SRC},target=/h ls', 'build-mount'],
    ['RUN --mount=type=devpts,target=/dev/pts ls', 'build-mount'],
    ['RUN \\\n  --mount=type=bind,source=/,target=/h \\\n  ls', 'build-mount'],
    ['# escape=`\nFROM scratch\nRUN `\n  --mount=type=bind,source=/,target=/h `\n  ls', 'build-mount'],
    ['RUN \\\n# a comment\n  --mount=type=bind,source=/,target=/h ls', 'build-mount'],
    ['ONBUILD RUN --mount=type=bind,source=/,target=/h ls', 'build-mount'],
    ['RUN --network=host curl x', 'host-namespace'],
    ['RUN --network=HOST curl x', 'host-namespace'],
    ['RUN --network=$NET curl x', 'build-mount'],
    ['RUN --security=insecure ls', 'privileged'],
    ['RUN --device=/dev/sda ls', 'devices'],
    ['RUN --frobnicate ls', 'build-option'],
  ])('%j is refused as %s', (line, rule) => {
    // A parser directive counts only at the very top.
    const refusal = checkDockerfile(line.startsWith('# escape') ? line : `FROM scratch\n${line}\n`);
    expect(refusal?.rule).toBe(rule);
  });
  it.each([
    'RUN --mount=type=bind,source=src,target=/src make',
    'RUN --mount=type=bind,from=builder,source=/out,target=/out cp -r /out /app',
    'RUN --mount=type=cache,target=/root/.cache pip install x',
    'RUN --mount=type=tmpfs,target=/tmp ls',
    'RUN --mount=type=secret,id=npm cat /run/secrets/npm',
    'RUN --network=none make test',
    'RUN echo --network=host',
    'RUN ["sh", "-c", "echo --mount=type=bind,source=/"]',
    'COPY --from=builder / /',
  ])('%j is allowed', (line) => {
    expect(checkDockerfile(`FROM scratch\n${line}\n`)).toBeUndefined();
  });
});

/** A ustar archive of the given files (name -> content), written here for the scanner tests. */
function tar(files: Record<string, string | { link: string }>): Buffer {
  const blocks: Buffer[] = [];
  for (const [name, content] of Object.entries(files)) {
    const data = typeof content === 'string' ? Buffer.from(content) : Buffer.alloc(0);
    const header = Buffer.alloc(512);
    header.write(name, 0, 100);
    header.write('0000644\0', 100);
    header.write('0000000\0', 108);
    header.write('0000000\0', 116);
    header.write(`${data.length.toString(8).padStart(11, '0')}\0`, 124);
    header.write('00000000000\0', 136);
    header.write(typeof content === 'string' ? '0' : '2', 156);
    if (typeof content !== 'string') header.write(content.link, 157, 100);
    header.write('ustar\0', 257);
    header.write('00', 263);
    header.fill(' ', 148, 156);
    let sum = 0;
    for (const b of header) sum += b;
    header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
    blocks.push(header, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

function scan(archive: Buffer, dockerfile?: string, chunk = 7) {
  const scanner = new TarScanner(dockerfileCandidates(dockerfile));
  for (let i = 0; i < archive.length; i += chunk) scanner.push(archive.subarray(i, i + chunk));
  scanner.finish();
  return checkBuildContext(scanner, dockerfile);
}

describe('build context tars', () => {
  const bad = 'FROM scratch\nRUN --mount=type=bind,source=/,target=/h ls\n';
  const good = 'FROM scratch\nCOPY . /\n';
  it.each([1, 7, 512, 4096])('a bad Dockerfile is found whatever the chunk size (%i)', (chunk) => {
    expect(scan(tar({ 'a.txt': 'x'.repeat(1000), Dockerfile: bad }), undefined, chunk)?.rule).toBe(
      'build-mount',
    );
  });
  it.each([
    [{ Dockerfile: good, 'sub/Dockerfile': bad }, undefined],
    [{ Dockerfile: good, Containerfile: bad }, undefined],
    [{ Dockerfile: good, 'prod.Dockerfile': bad }, undefined],
    [{ Dockerfile: good, 'Dockerfile.dev': bad }, undefined],
    [{ Dockerfile: good, 'build/recipe': bad }, 'build/recipe'],
    [{ Dockerfile: good, '.dockerfile.abc': bad }, '.dockerfile.abc'],
  ])('every Dockerfile candidate is read: %j', (files, dockerfile) => {
    expect(scan(tar(files), dockerfile)?.rule).toBe('build-mount');
  });
  it('the named Dockerfile may not be a link; a plain context passes', () => {
    expect(scan(tar({ Dockerfile: { link: '/etc/passwd' } }))?.rule).toBe('build-context');
    expect(scan(tar({ Dockerfile: good, 'src/a.c': 'int main;' }))).toBeUndefined();
  });
  it('a truncated or garbled tar is refused', () => {
    const archive = tar({ Dockerfile: good });
    expect(scan(archive.subarray(0, 700))?.rule).toBe('build-context');
    const garbled = Buffer.from(archive);
    garbled[0] = 0x41;
    garbled[1] = 0x41;
    expect(scan(garbled)?.rule).toBe('build-context');
  });
});

describe('routes: an allow-list', () => {
  it.each([
    ['POST', '/swarm/init'],
    ['GET', '/plugins'],
    ['POST', '/plugins/pull'],
    ['POST', '/secrets/create'],
    ['POST', '/containers/prune'],
    ['POST', '/volumes/prune'],
    ['POST', '/images/prune'],
    ['POST', '/system/prune'],
    ['POST', '/images/x/push'],
    ['POST', '/images/load'],
    ['POST', '/commit'],
    ['POST', '/auth'],
    ['POST', '/session'],
    ['GET', '/v4.3.1/libpod/containers/json'],
    ['POST', '/v4.3.1/libpod/containers/create'],
    ['POST', '/containers/x/attach/ws'],
    ['GET', '/containers/../build'],
    ['GET', '//containers/json'],
    ['GET', '/containers/json/'],
    ['POST', '/containers/a%2F..%2F..%2Fbuild/start'],
    ['POST', '/containers/%2e%2e/start'],
    ['POST', '/containers/x%00/start'],
    ['POST', '/containers/%zz/start'],
    ['PATCH', '/containers/x'],
    ['GET', 'containers/json'],
  ])('%s %s is not on it', (method, path) => {
    expect(matchEngineRoute(method, path)).toBeUndefined();
  });
  it.each([
    ['GET', '/_ping', 'system.ping', undefined],
    ['HEAD', '/_ping', 'system.ping', undefined],
    ['GET', '/v1.41/containers/json', 'container.list', undefined],
    ['POST', '/v1.41/containers/create', 'container.create', undefined],
    ['GET', '/v1.50/containers/json/json', 'container.inspect', 'container:json'],
    ['POST', '/v1.41/containers/abc/start', 'container.start', 'container:abc'],
    ['POST', '/containers/abc/attach', 'container.attach', 'container:abc'],
    ['DELETE', '/v1.41/containers/abc', 'container.remove', 'container:abc'],
    ['POST', '/exec/e1/start', 'exec.start', 'exec:e1'],
    [
      'GET',
      '/v1.41/images/docker.io/library/postgres:15/json',
      'image.inspect',
      'image:docker.io/library/postgres:15',
    ],
    ['DELETE', '/images/localhost/a/b:1', 'image.remove', 'image:localhost/a/b:1'],
    ['POST', '/images/x%40sha256:ab/tag', 'image.tag', 'image:x@sha256:ab'],
    ['POST', '/networks/n1/connect', 'network.connect', 'network:n1'],
    ['DELETE', '/volumes/v1', 'volume.remove', 'volume:v1'],
  ])('%s %s is %s', (method, path, name, target) => {
    const route = matchEngineRoute(method, path);
    expect(route?.name).toBe(name);
    expect(route?.target ? `${route.target.kind}:${route.target.ref}` : undefined).toBe(target);
  });
});

describe('policy config', () => {
  it('defaults', () => {
    expect(parseEnginePolicy(undefined)).toEqual({
      pull: true,
      publish: 'loopback',
      bindRoots: [],
      capabilities: [],
      composeProjects: [],
    });
  });
  it.each([
    [{ pull: 'yes' }, 'pull'],
    [{ publish: 'everywhere' }, 'publish'],
    [{ bindRoots: ['relative/dir'] }, 'bindRoots.0'],
    [{ capabilities: ['ALL'] }, 'capabilities.0'],
    [{ composeProjects: ['Bad Name'] }, 'composeProjects.0'],
    [{ pul: true }, 'pul'],
  ])('%j is refused naming %s', (input, field) => {
    let error: unknown;
    try {
      parseEnginePolicy(input);
    } catch (e) {
      error = e;
    }
    expect(InvalidConfigError.isInstance(error)).toBe(true);
    expect((error as InvalidConfigError).issues[0]!.path).toBe(field);
    expect((error as Error).message).toContain(field);
  });
});
