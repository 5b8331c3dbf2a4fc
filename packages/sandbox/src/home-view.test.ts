// Invariant: a sanitized config keeps every setting line and loses every credential, whatever the format (npmrc, pip, yaml, git config, maven XML, shell start-up files); git's index is read the way git writes it (formats 2, 3 and 4, sha1 and sha256), so a .env file counts as tracked-unchanged exactly when its content is the indexed blob.
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readIndexBlobs, sanitizeConfig, toolchainPaths, trackedUnchanged } from './home-view.js';

const secretName = (name: string) => /TOKEN|SECRET|PASSWORD|_KEY$/i.test(name);
const clean = (kind: Parameters<typeof sanitizeConfig>[0], text: string) =>
  sanitizeConfig(kind, text, secretName);

describe('sanitizeConfig', () => {
  it('npmrc: scoped registries and settings stay, tokens and passwords go', () => {
    const out = clean(
      'ini',
      [
        '@corp:registry=https://npm.corp.example/',
        '//npm.corp.example/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789',
        '//registry.example/:_auth=dXNlcjpwYXNz',
        '//registry.example/:_password=cGFzcw==',
        'registry = https://user:hunter2hunter2@registry.example/',
        'save-exact=true',
        'strict-ssl = false',
      ].join('\n'),
    );
    expect(out).toContain('@corp:registry=https://npm.corp.example/');
    expect(out).toContain('save-exact=true');
    expect(out).toContain('strict-ssl = false');
    expect(out).toContain('registry = https://registry.example/');
    for (const secret of ['npm_abc', 'dXNlcjpwYXNz', 'cGFzcw==', 'hunter2'])
      expect(out).not.toContain(secret);
    // One line out for one line in: a tool's line numbers stay right.
    expect(out.split('\n')).toHaveLength(7);
  });

  it('pip.conf / toml / properties: URLs lose their userinfo, key-named values go', () => {
    const out = clean(
      'ini',
      '[global]\nindex-url = https://build:s3cr3tPass@pypi.corp.example/simple\nextra-index-url=https://__token__:pypi-AgEIcHlwaS5vcmc@x.example/simple\ntimeout = 60\n[registries.corp]\ntoken = "abc123def456ghi789jkl"\nindex = "sparse+https://crates.corp.example/"\norg.gradle.jvmargs=-Xmx2g\nmavenPassword=plainpw\n',
    );
    expect(out).toContain('index-url = https://pypi.corp.example/simple');
    expect(out).toContain('extra-index-url=https://x.example/simple');
    expect(out).toContain('timeout = 60');
    expect(out).toContain('index = "sparse+https://crates.corp.example/"');
    expect(out).toContain('org.gradle.jvmargs=-Xmx2g');
    for (const secret of ['s3cr3tPass', 'pypi-AgE', 'abc123def', 'plainpw'])
      expect(out).not.toContain(secret);
  });

  it('yaml: .yarnrc.yml scopes stay, npmAuthToken and npmAuthIdent go', () => {
    const out = clean(
      'yaml',
      'npmScopes:\n  corp:\n    npmRegistryServer: "https://npm.corp.example"\n    npmAuthToken: "tok-123456789"\n    npmAuthIdent: "me:pw"\nnodeLinker: node-modules\n',
    );
    expect(out).toContain('npmRegistryServer: "https://npm.corp.example"');
    expect(out).toContain('nodeLinker: node-modules');
    expect(out).not.toContain('tok-123456789');
    expect(out).not.toContain('me:pw');
  });

  it('git config: credential sections, helpers, extra headers and URL tokens go; identity and aliases stay', () => {
    const out = clean(
      'gitconfig',
      '[user]\n\tname = Me\n[alias]\n\tco = checkout\n[credential "https://github.com"]\n\thelper = !gh auth git-credential\n\tusername = me\n[credential]\n\thelper = store\n[http "https://git.corp"]\n\textraheader = AUTHORIZATION: basic c2VjcmV0\n[url "https://oauth2:glpat-abcdefghijklmnopqrst@gitlab.com/"]\n\tinsteadOf = https://gitlab.com/\n[core]\n\teditor = vim\n',
    );
    expect(out).toContain('name = Me');
    expect(out).toContain('co = checkout');
    expect(out).toContain('editor = vim');
    expect(out).toContain('[url "https://gitlab.com/"]');
    for (const secret of ['gh auth', 'helper', 'c2VjcmV0', 'glpat-']) expect(out).not.toContain(secret);
  });

  it('maven settings.xml and NuGet.Config: passwords go, mirrors and sources stay', () => {
    const maven = clean(
      'xml',
      '<settings><servers><server><id>corp</id><username>me</username><password>{enc}xyz</password><passphrase>pp</passphrase></server></servers><mirrors><mirror><url>https://maven.corp</url></mirror></mirrors></settings>',
    );
    expect(maven).toContain('<url>https://maven.corp</url>');
    expect(maven).toContain('<username>me</username>');
    expect(maven).not.toContain('{enc}xyz');
    expect(maven).not.toContain('>pp<');
    const nuget = clean(
      'xml',
      '<configuration><packageSources><add key="corp" value="https://nuget.corp/v3/index.json" /></packageSources><packageSourceCredentials><corp><add key="Username" value="me" /><add key="ClearTextPassword" value="nugetpw" /></corp></packageSourceCredentials></configuration>',
    );
    expect(nuget).toContain('https://nuget.corp/v3/index.json');
    expect(nuget).not.toContain('nugetpw');
  });

  it('shell start-up files: exported credentials go in every spelling; the rest stays', () => {
    const out = clean(
      'shell',
      [
        'export PATH="$HOME/.cargo/bin:$PATH"',
        'export GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789',
        'OPENAI_API_KEY="sk-proj-abcdefghijklmnopqrstuvwx"',
        'declare -x DB_PASSWORD=letmein',
        'set -gx SLACK_WEBHOOK https://hooks.slack.com/services/T0/B0/xyz',
        'setenv AWS_SECRET_ACCESS_KEY abcdEFGH1234ijklMNOP5678',
        'export MONGO=mongodb://app:pw123456@db/x',
        'alias ll="ls -l"',
        '[ -s "$NVM_DIR/nvm.sh" ] && . "$NVM_DIR/nvm.sh"',
        'export NODE_OPTIONS=--max-old-space-size=4096',
      ].join('\n'),
    );
    expect(out).toContain('export PATH="$HOME/.cargo/bin:$PATH"');
    expect(out).toContain('alias ll="ls -l"');
    expect(out).toContain('. "$NVM_DIR/nvm.sh"');
    expect(out).toContain('export NODE_OPTIONS=--max-old-space-size=4096');
    for (const secret of ['ghp_', 'sk-proj', 'letmein', 'hooks.slack', 'abcdEFGH', 'pw123456'])
      expect(out).not.toContain(secret);
    // The removed lines are no-ops a shell runs without complaint.
    expect(execFileSync('bash', ['-n', '-c', out]).toString()).toBe('');
  });
});

describe('git index', () => {
  let repo: string;
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@x', ...args], {
      cwd: repo,
      encoding: 'utf8',
      env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
    });
  beforeEach(() => {
    repo = realpathSync(mkdtempSync(join(tmpdir(), 'conch-index-')));
  });
  afterEach(() => rmSync(repo, { recursive: true, force: true }));

  const setupRepo = (init: string[]) => {
    git('init', '-q', ...init);
    writeFileSync(join(repo, '.env'), 'A=1\n');
    writeFileSync(join(repo, '.env.example'), 'A=\n');
    for (let i = 0; i < 40; i++) writeFileSync(join(repo, `file-with-a-longer-name-${i}.txt`), `${i}\n`);
    git('add', '-A');
    git('commit', '-qm', 'x');
  };

  for (const [label, init, version] of [
    ['format 2', [], '2'],
    ['format 3 (an intent-to-add entry)', [], '3'],
    ['format 4 (prefix-compressed names)', [], '4'],
    ['a sha256 repository', ['--object-format=sha256'], '2'],
  ] as const) {
    it(`reads ${label} as git ls-files does`, () => {
      setupRepo([...init]);
      if (version === '3') {
        writeFileSync(join(repo, 'later.txt'), 'x\n');
        git('add', '-N', 'later.txt');
      }
      git('update-index', '--index-version', version);
      const blobs = readIndexBlobs(join(repo, '.git'))!;
      const expected = new Map(
        git('ls-files', '-s')
          .trim()
          .split('\n')
          .map((line) => {
            const [meta, name] = line.split('\t');
            return [name!, meta!.split(' ')[1]!] as const;
          }),
      );
      expect(blobs).toEqual(expected);
      expect(trackedUnchanged(join(repo, '.env'))?.toString()).toBe('A=1\n');
      appendFileSync(join(repo, '.env'), 'SECRET=x\n');
      expect(trackedUnchanged(join(repo, '.env'))).toBeUndefined();
      writeFileSync(join(repo, '.env.local'), 'B=2\n');
      expect(trackedUnchanged(join(repo, '.env.local'))).toBeUndefined();
    });
  }

  it('a file outside any repository, or in a repository without an index, is not tracked', () => {
    writeFileSync(join(repo, '.env'), 'A=1\n');
    expect(trackedUnchanged(join(repo, '.env'))).toBeUndefined();
    git('init', '-q');
    expect(trackedUnchanged(join(repo, '.env'))).toBeUndefined();
  });
});

describe('toolchainPaths', () => {
  it('keeps what PATH and toolchain variables name under a closed home, and that home’s toolchain entries', () => {
    const exists = (p: string) =>
      [
        '/root/.cargo/bin',
        '/root/.rustup',
        '/root/.pyenv',
        '/root/tools/bin',
        '/home/u/.nvm',
        '/home/u/.ssh',
      ].some((e) => p === e || p.startsWith(`${e}/`));
    const out = toolchainPaths(
      ['/home/u', '/home', '/root'],
      '/home/u',
      {
        PATH: '/root/.cargo/bin:/root/tools/bin:/usr/bin',
        PYENV_ROOT: '/root/.pyenv',
      },
      exists,
    );
    expect(out).toEqual(
      expect.arrayContaining([
        '/root/.cargo/bin',
        '/root/.rustup',
        '/root/.pyenv',
        '/root/tools/bin',
        '/home/u/.nvm',
      ]),
    );
    expect(out).not.toContain('/home/u/.ssh');
    expect(out.some((p) => p === '/root' || p === '/home/u')).toBe(false);
  });
});
