// Invariant: a sandbox judges the host's variables by value as well as by name. Credentials whose
// names miss every pattern (SLACK_WEBHOOK_URL, MONGODB_URI, AUTH holding a JWT, STRIPE_SK, …) read
// as unset inside, in a real sandboxed shell; ordinary values (paths, ports, flags, prose, URLs
// without a password) pass; a host's keptEnv keeps one; the caller's own per-spawn env passes.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findBwrap, looksLikeCredential, type SandboxProfile } from '@conch/sandbox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProcessManager } from './process-manager.js';

const JWT =
  'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c';
// Built at run time so no scanner mistakes this file for a leak.
const tok = (prefix: string, n: number) => prefix + 'aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY'.repeat(4).slice(0, n);

const CREDENTIALS: Record<string, string> = {
  CONCH_V_SLACK_WEBHOOK_URL: 'https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX',
  CONCH_V_MONGODB_URI: 'mongodb://app:s3cr3t-pass@db.internal:27017/prod',
  CONCH_V_REDIS_URL: 'redis://:hunter2hunter2@cache:6379/0',
  CONCH_V_AUTH: JWT,
  CONCH_V_STRIPE_SK: tok('sk_live_', 24),
  CONCH_V_MY_SERVICE_PASS: 'Zq8#vL2!pW9@xK4$mN7',
  CONCH_V_SMTP_PASS: 'a8Fk2Lp9Qz3Xw7Rt5Yv1',
  CONCH_V_GH: tok('ghp_', 36),
  CONCH_V_AWS_ID: 'AKIAIOSFODNN7EXAMPLE',
  CONCH_V_OPENAI: tok('sk-proj-', 40),
  CONCH_V_DEPLOY: `-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----`,
};
const ORDINARY: Record<string, string> = {
  CONCH_V_PORT: '8080',
  CONCH_V_DEBUG: 'true',
  CONCH_V_BASE_URL: 'https://api.example.com/v1',
  CONCH_V_DB_HOST_URL: 'postgres://db.internal:5432/app',
  CONCH_V_GREETING: 'hello there, general kenobi',
  CONCH_V_CACHE_DIR: '/home/me/.cache/some-tool/aB3dE5fG7hJ9kL1mN2',
  CONCH_V_BUILD_ID: '20261128-1432',
  CONCH_V_KEY_PREFIX: 'app:',
  CONCH_V_COMMIT: '9fceb02d0ae598e95dc970b74767f19372d61af8',
};

describe('looksLikeCredential', () => {
  it.each(Object.entries(CREDENTIALS))('%s is a credential', (name, value) => {
    expect(looksLikeCredential(name.replace('CONCH_V_', ''), value)).toBe(true);
  });
  it.each(Object.entries(ORDINARY))('%s is not', (name, value) => {
    expect(looksLikeCredential(name.replace('CONCH_V_', ''), value)).toBe(false);
  });
  it('never looks at the values of inert names (PATH, HOME, LC_*, XDG_*)', () => {
    for (const name of ['PATH', 'HOME', 'LC_ALL', 'XDG_CONFIG_HOME'])
      expect(looksLikeCredential(name, JWT)).toBe(false);
  });
});

describe.runIf(findBwrap() || process.env.CI)('the host environment inside a real sandbox', () => {
  let ws: string;
  let manager: ProcessManager;
  const names = [...Object.keys(CREDENTIALS), ...Object.keys(ORDINARY)];
  beforeAll(() => {
    ws = mkdtempSync(join(tmpdir(), 'conch-env-values-'));
    manager = new ProcessManager({ cwd: ws, tempDir: () => ws });
    for (const [k, v] of Object.entries({ ...CREDENTIALS, ...ORDINARY })) process.env[k] = v;
  });
  afterAll(async () => {
    for (const name of names) delete process.env[name];
    await manager.dispose();
    rmSync(ws, { recursive: true, force: true });
  });
  // the default policy's hidden names (none of which these match) and a host keep-list
  const profile = (keptEnv: string[] = []): SandboxProfile => ({
    kind: 'workspace-write',
    writableRoots: [ws],
    readOnlyPaths: [],
    hiddenEnv: ['*TOKEN*', '*SECRET*', '*PASSWORD*'],
    keptEnv,
  });
  const show = (env?: Record<string, string>, keptEnv?: string[]) =>
    manager.spawn(`for v in ${names.join(' ')}; do printf '%s=%s\\n' "$v" "\${!v-unset}"; done`, [], {
      shell: '/bin/bash',
      sandbox: profile(keptEnv),
      ...(env ? { env } : {}),
    }).result;
  const seen = (text: string) =>
    Object.fromEntries(
      text
        .trim()
        .split('\n')
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );

  it('credentials read as unset; ordinary values arrive as they are', async () => {
    const got = seen((await show()).stdout.head);
    for (const name of Object.keys(CREDENTIALS)) expect(got[name], name).toBe('unset');
    for (const [name, value] of Object.entries(ORDINARY)) expect(got[name], name).toBe(value);
  });

  it("the host's keptEnv keeps one; the caller's own env for the spawn passes", async () => {
    const got = seen((await show({ CONCH_V_AUTH: JWT }, ['CONCH_V_MONGODB_URI'])).stdout.head);
    expect(got.CONCH_V_MONGODB_URI).toBe(CREDENTIALS.CONCH_V_MONGODB_URI);
    expect(got.CONCH_V_AUTH).toBe(JWT);
    expect(got.CONCH_V_SLACK_WEBHOOK_URL).toBe('unset');
  });
});
