// Invariant: the permission config's `credentials` reach the sandbox as placeholders only — the
// real value (read from conch's environment with `fromEnv`) is in no variable, /proc entry or file a
// sandboxed command can read — and their hosts are reachable without a prompt on their port only;
// a variable that is not set leaves that credential out (said in status), and a bad entry is an
// InvalidConfigError naming the field without the secret's text.
import 'reflect-metadata';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, type ApprovalRequest, type ToolResult } from '@conch/core';
import { findBwrap } from '@conch/process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readableFiles } from '@conch/test-support/credentials';
import { PERMISSION_ENGINE, permissionPlugin } from './plugin.js';

type Result = ToolResult & Record<string, any>;
const SECRET = 'ghp_ConfigNamedThisToken0123456789abcdEF';
const VAR = 'CONCH_TEST_CREDENTIAL_VALUE';

let ws: string;
const registries: PluginRegistry[] = [];

beforeEach(() => {
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-credentials-config-')));
  process.env[VAR] = SECRET;
});
afterEach(async () => {
  delete process.env[VAR];
  for (const r of registries.splice(0)) await r.dispose();
  rmSync(ws, { recursive: true, force: true });
});

async function setup(credentials: unknown[], asked: ApprovalRequest[] = []) {
  const registry = new PluginRegistry({ cwd: ws, plugins: [permissionPlugin, cliPlugin] });
  registries.push(registry);
  await registry.expose('permission', {
    credentials,
    approve: async (request: ApprovalRequest) => {
      asked.push(request);
      return 'deny' as const;
    },
  } as never);
  await registry.expose('cli', {});
  const run = async (command: string) =>
    (await registry.execute('cli_based_tool', { command, background: false, timeout: 600 })) as Result;
  return { registry, run };
}

describe('credentials in the permission config', () => {
  it.each([
    [[{ hosts: ['github.com'] }], 'credentials.0', 'exactly one of fromEnv'],
    [[{ hosts: ['github.com'], fromEnv: VAR, value: SECRET }], 'credentials.0', 'exactly one of fromEnv'],
    [[{ hosts: ['*.github.com'], fromEnv: VAR }], 'credentials.0.hosts.0', 'exact host name'],
    [[{ hosts: [], fromEnv: VAR }], 'credentials.0.hosts', ''],
    [[{ hosts: ['github.com'], fromEnv: 'not a name' }], 'credentials.0.fromEnv', 'variable name'],
    [[{ hosts: ['github.com'], value: 'two\nlines' }], 'credentials.0.value', 'printable ASCII'],
    [[{ hosts: ['github.com'], fromEnv: VAR, env: ['PATH'] }], 'credentials.0.env.0', 'does not need'],
    [[{ hosts: ['github.com'], fromEnv: VAR, header: 'Host' }], 'credentials.0.header', 'forwards'],
  ])('refuses %j naming %s', async (credentials, field, expected) => {
    const registry = new PluginRegistry({ cwd: ws, plugins: [permissionPlugin] });
    registries.push(registry);
    const error = await registry
      .expose('permission', { credentials } as never)
      .then(() => undefined)
      .catch((e: Error) => e);
    expect(error?.name).toBe('InvalidConfigError');
    expect(error!.message).toContain(field);
    expect(error!.message).toContain(expected);
    expect(error!.message).not.toContain('two\nlines');
  });

  it('makes the hosts of a credential reachable on their port, and only there', async () => {
    const asked: ApprovalRequest[] = [];
    const { registry } = await setup(
      [{ hosts: ['api.github.com', 'ghe.example:8443'], fromEnv: VAR, env: ['GH_TOKEN'] }],
      asked,
    );
    const gate = registry.resolve(PERMISSION_ENGINE);
    expect(await gate.checkNetwork({ host: 'api.github.com', port: 443 })).toMatchObject({
      outcome: 'allow',
      rule: 'credentials:api.github.com:443',
    });
    expect(await gate.checkNetwork({ host: 'ghe.example', port: 8443 })).toMatchObject({
      outcome: 'allow',
      rule: 'credentials:ghe.example:8443',
    });
    // Another port, another host: the usual question (denied by this test's human).
    expect((await gate.checkNetwork({ host: 'api.github.com', port: 80 })).outcome).toBe('deny');
    expect((await gate.checkNetwork({ host: 'uploads.github.com', port: 443 })).outcome).toBe('deny');
    expect(asked).toHaveLength(2);
  }, 120_000);

  it('reports a credential whose variable is not set, and runs without it', async () => {
    delete process.env[VAR];
    const { registry } = await setup([{ hosts: ['github.com'], fromEnv: VAR, env: ['GH_TOKEN'] }]);
    expect(JSON.stringify(await registry.status())).toContain(`"missing":["${VAR}"]`);
  }, 120_000);
});

describe.runIf(findBwrap() || process.env.CI)('credentials seen from the sandbox', () => {
  it('shows placeholders only, in env, /proc and files, and the CA bundle at its path', async () => {
    const { registry, run } = await setup([
      { hosts: ['github.com', 'api.github.com'], fromEnv: VAR, env: ['GH_TOKEN', 'GITHUB_TOKEN'] },
    ]);
    const status = JSON.stringify(await registry.status());
    expect(status).toContain('api.github.com:443');
    expect(status).not.toContain(SECRET);
    const half = SECRET.length / 2;
    const r = await run(
      [
        'echo "gh=$GH_TOKEN ca=$SSL_CERT_FILE git=$GIT_CONFIG_KEY_0"',
        'grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE" >/dev/null && echo bundle-ok',
        // The secret in two halves on the command line: a match is the whole secret somewhere.
        `S=${SECRET.slice(0, half)}; T=${SECRET.slice(half)}`,
        'env | grep -c "$S$T"',
        'cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n" | grep -c "$S$T"',
        // Where conch puts files for the sandbox (the bundle, substitutes' copies), its /tmp, the workspace.
        `${readableFiles('/run /tmp /etc .')} | xargs -0r grep -lsF -e "$S$T"; echo "files end"`,
      ].join('\n'),
    );
    expect(r.sandbox).toBe('workspace-write');
    expect(r.stdout).toMatch(
      /gh=conch-placeholder-[0-9a-f]{32} ca=\/run\/conch\/ca-bundle\.crt git=credential\.https:\/\/github\.com\.helper/,
    );
    expect(r.stdout).toContain('bundle-ok');
    expect(r.stdout).toMatch(/^0\n0\nfiles end/m);
    expect(r.stdout).not.toContain(SECRET);
  }, 120_000);
});
