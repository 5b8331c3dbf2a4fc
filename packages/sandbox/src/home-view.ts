import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { looksLikeCredential } from './env-values.js';
import { lstatIf, statIf } from './stat-if.js';
import { readRegularFileSync, safeLstatSync } from '@conch/core';

/**
 * What a workspace-write sandbox sees of the user's home: nothing, but what toolchains need.
 *
 * The home directory (and every other home: `/home`, `/root`) reads as an empty directory inside
 * the sandbox. A deny-list of known credential stores loses to the next store nobody listed (a
 * new agent's token file, a history, another project's `.env`), so the list below is of what is
 * *needed*, found by running the toolchains: version managers and the binaries they install, the
 * caches that hold already-downloaded dependencies, and the config files that say where packages
 * come from. The deny-list (`SECRET_HOME_PATHS`) stays as a second layer for stores inside these
 * (`~/.cargo/credentials.toml`) and for a home the host opens (`secrets.openHome`).
 *
 * Config files that hold settings a tool needs *and* may hold a credential are shown as
 * **substitutes**: a copy with the credential lines removed (a scoped registry in `~/.npmrc`
 * stays, its `_authToken` goes; an index URL in `pip.conf` keeps its host and loses its
 * `user:password@`). A copy is written outside every writable root and rewritten in place when
 * the policy is rebuilt.
 *
 * The host adds paths with `readableRoots`; the workspace, the repository that encloses it and
 * the sandbox's own cache are bound as before.
 */
export interface HomeEntry {
  /** Relative to the home directory. */
  path: string;
  /** Why a toolchain needs it (the documentation of the list). */
  why: string;
}

/** Read-only inside the sandbox, as they are (directories with everything in them). */
export const HOME_READABLE: readonly HomeEntry[] = [
  // Node.js
  { path: '.nvm', why: 'nvm: node versions and their global packages' },
  { path: '.volta', why: 'volta: node, npm, yarn and pinned tools' },
  { path: '.fnm', why: 'fnm: node versions' },
  { path: '.local/share/fnm', why: 'fnm (XDG layout)' },
  { path: '.n', why: 'n: node versions (N_PREFIX)' },
  { path: '.npm-global', why: "npm's usual user prefix for global installs" },
  { path: '.local/share/pnpm', why: 'pnpm: global bin (PNPM_HOME) and store' },
  { path: '.bun', why: 'bun: runtime, global bin and install cache' },
  { path: '.deno', why: 'deno: runtime and its cache' },
  { path: '.yarn/berry', why: 'yarn berry: global cache of downloaded packages' },
  // Python
  { path: '.local/bin', why: 'pip --user, pipx and uv tool binaries' },
  { path: '.local/lib', why: 'pip --user site-packages' },
  { path: '.local/share/uv', why: 'uv: managed Python versions and tools' },
  { path: '.local/pipx', why: 'pipx: tool environments' },
  { path: '.local/share/pipx', why: 'pipx (XDG layout)' },
  { path: '.pyenv', why: 'pyenv: Python versions' },
  { path: '.conda', why: 'conda: environments' },
  { path: 'miniconda3', why: 'conda distribution' },
  { path: 'miniforge3', why: 'conda distribution' },
  { path: 'anaconda3', why: 'conda distribution' },
  { path: '.virtualenvs', why: 'virtualenvwrapper environments' },
  { path: '.local/share/virtualenvs', why: 'pipenv environments' },
  { path: '.config/uv/uv.toml', why: 'uv: index and settings' },
  // Go, Rust
  { path: 'go/bin', why: 'go install binaries (modules and build cache are the sandbox’s own)' },
  { path: 'sdk', why: 'Go toolchains from golang.org/dl' },
  { path: '.cargo/bin', why: 'cargo: rustup proxies and installed binaries' },
  { path: '.cargo/registry', why: 'cargo: downloaded crates (offline builds)' },
  { path: '.cargo/git', why: 'cargo: git dependencies' },
  { path: '.rustup', why: 'rustup: toolchains' },
  // JVM
  { path: '.m2/repository', why: 'maven: downloaded artifacts (offline builds)' },
  { path: '.m2/wrapper', why: 'maven wrapper distributions' },
  { path: '.gradle/caches', why: 'gradle: dependency and build caches' },
  { path: '.gradle/wrapper', why: 'gradle wrapper distributions' },
  { path: '.gradle/jdks', why: 'gradle toolchains' },
  { path: '.sdkman', why: 'sdkman: JDKs, gradle, maven' },
  { path: '.jdks', why: 'IDE-managed JDKs' },
  { path: '.ivy2', why: 'ivy/sbt artifacts' },
  { path: '.sbt', why: 'sbt launcher and plugins' },
  { path: '.cache/coursier', why: 'coursier (scala) artifacts' },
  // Ruby, .NET, Haskell, OCaml, Lean, Dart, Nix, generic managers
  { path: '.rbenv', why: 'rbenv: Ruby versions' },
  { path: '.rvm', why: 'rvm: Ruby versions' },
  { path: '.gem', why: 'gems installed with --user-install (credentials masked)' },
  { path: '.local/share/gem', why: 'gems (XDG layout)' },
  { path: '.dotnet', why: '.NET SDKs and tools' },
  { path: '.nuget/packages', why: 'NuGet: downloaded packages' },
  { path: '.ghcup', why: 'ghcup: GHC and cabal' },
  { path: '.cabal', why: 'cabal: packages' },
  { path: '.stack', why: 'stack: snapshots' },
  { path: '.opam', why: 'opam: switches' },
  { path: '.elan', why: 'elan: Lean toolchains' },
  { path: '.pub-cache', why: 'dart/flutter packages' },
  { path: '.nix-profile', why: 'nix: the user profile' },
  { path: '.local/state/nix', why: 'nix: profiles' },
  { path: '.asdf', why: 'asdf: tool versions' },
  { path: '.local/share/mise', why: 'mise: tool versions' },
  { path: '.config/mise', why: 'mise: settings' },
  { path: '.tool-versions', why: 'asdf/mise: global versions' },
  { path: '.proto', why: 'proto: tool versions' },
  { path: 'bin', why: "the user's own scripts on PATH" },
  // Editors' and formatters' shared settings read by tools run in a project
  { path: '.editorconfig', why: 'formatters read it above the project' },
  { path: '.gitignore_global', why: "git's usual core.excludesFile" },
  { path: '.gitignore', why: "git's core.excludesFile when named so" },
  { path: '.config/git/ignore', why: "git's default global ignore file" },
  { path: '.config/git/attributes', why: "git's default global attributes" },
  { path: '.inputrc', why: 'readline settings of interactive shells' },
];

/**
 * Variables that name a toolchain's root (set by the user's shell set-up): what they point at
 * under a closed home stays readable.
 */
export const TOOLCHAIN_ROOT_VARS: readonly string[] = [
  'PYENV_ROOT',
  'RUSTUP_HOME',
  'CARGO_HOME',
  'NVM_DIR',
  'NVM_BIN',
  'VOLTA_HOME',
  'PNPM_HOME',
  'FNM_DIR',
  'N_PREFIX',
  'BUN_INSTALL',
  'DENO_INSTALL',
  'GOROOT',
  'JAVA_HOME',
  'SDKMAN_DIR',
  'CONDA_PREFIX',
  'VIRTUAL_ENV',
  'PIPX_HOME',
  'UV_PYTHON_INSTALL_DIR',
  'ASDF_DIR',
  'ASDF_DATA_DIR',
  'MISE_DATA_DIR',
  'RBENV_ROOT',
  'GHCUP_INSTALL_BASE_PREFIX',
  'DOTNET_ROOT',
];

const within = (path: string, dir: string) =>
  path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);

/**
 * What stays readable under closed homes because the host's own environment runs it: every
 * directory on PATH and every toolchain root variable (PYENV_ROOT, RUSTUP_HOME, …) that lies under
 * one, and — for each home such a directory lies in (root's `/root/.cargo/bin` on PATH while HOME
 * is another directory) — that home's `HOME_READABLE` entries (a rustup proxy in `.cargo/bin`
 * needs `.rustup`; pyenv's shims need `.pyenv`).
 */
export function toolchainPaths(
  closed: readonly string[],
  home: string,
  env: NodeJS.ProcessEnv,
  exists: (path: string) => boolean,
): string[] {
  const out = new Set<string>();
  const homes = new Set<string>([home]);
  const named = [
    ...(env.PATH ?? '').split(':'),
    ...TOOLCHAIN_ROOT_VARS.map((name) => env[name] ?? ''),
  ].filter((p) => p.startsWith('/'));
  for (const raw of named) {
    const path = resolve(raw);
    const shut = closed.find((c) => within(path, c) && path !== c);
    if (!shut) continue;
    // The home the directory belongs to: HOME, a user's directory under /home, or the closed dir.
    const owner = within(path, home)
      ? home
      : shut === '/home'
        ? join('/home', relative('/home', path).split('/')[0]!)
        : shut;
    homes.add(owner);
    const rel = relative(owner, path);
    const entry = HOME_READABLE.find((e) => rel === e.path || rel.startsWith(`${e.path}/`));
    if (entry) out.add(join(owner, entry.path));
    else if (exists(path)) out.add(path);
  }
  for (const owner of homes)
    for (const entry of HOME_READABLE) {
      const path = join(owner, entry.path);
      if (exists(path)) out.add(path);
    }
  return [...out].filter((p) => exists(p));
}

/** How a substitute's credential lines are found. */
export type SanitizeKind = 'ini' | 'yaml' | 'gitconfig' | 'xml' | 'shell';

/** Config files shown as a copy without their credentials (a setting kept, a secret removed). */
export const HOME_SANITIZED: readonly (HomeEntry & { kind: SanitizeKind })[] = [
  { path: '.npmrc', kind: 'ini', why: 'npm/pnpm: registries, scoped registries, proxy settings' },
  { path: '.yarnrc', kind: 'ini', why: 'yarn 1: registry' },
  { path: '.yarnrc.yml', kind: 'yaml', why: 'yarn berry: npmScopes, registries' },
  { path: '.config/pnpm/rc', kind: 'ini', why: 'pnpm: global settings' },
  { path: '.config/pip/pip.conf', kind: 'ini', why: 'pip: index-url (its userinfo removed)' },
  { path: '.pip/pip.conf', kind: 'ini', why: 'pip (legacy location)' },
  { path: '.pydistutils.cfg', kind: 'ini', why: 'setuptools: index settings' },
  { path: '.condarc', kind: 'yaml', why: 'conda: channels' },
  { path: '.config/pypoetry/config.toml', kind: 'ini', why: 'poetry: sources and settings' },
  {
    path: '.gitconfig',
    kind: 'gitconfig',
    why: 'git: identity, aliases, settings (credential helpers removed)',
  },
  { path: '.config/git/config', kind: 'gitconfig', why: 'git (XDG location)' },
  { path: '.cargo/config.toml', kind: 'ini', why: 'cargo: registries, build settings' },
  { path: '.cargo/config', kind: 'ini', why: 'cargo (legacy name)' },
  { path: '.config/go/env', kind: 'ini', why: 'go env -w: GOPROXY, GOPRIVATE' },
  {
    path: '.m2/settings.xml',
    kind: 'xml',
    why: 'maven: mirrors, repositories, profiles (server passwords removed)',
  },
  { path: '.gradle/gradle.properties', kind: 'ini', why: 'gradle: JVM args, repository settings' },
  {
    path: '.gradle/init.gradle',
    kind: 'shell',
    why: 'gradle: init script (assignments of credentials removed)',
  },
  { path: '.nuget/NuGet/NuGet.Config', kind: 'xml', why: 'NuGet: package sources' },
  { path: '.bundle/config', kind: 'yaml', why: 'bundler: settings (gem-server credentials removed)' },
  { path: '.gemrc', kind: 'yaml', why: 'rubygems: sources' },
  // Shell start-up files: a terminal session sources them (PATH of nvm, pyenv, cargo…); an
  // `export TOKEN=…` in them is removed.
  { path: '.bashrc', kind: 'shell', why: 'bash: PATH and tool set-up of terminal sessions' },
  { path: '.bash_profile', kind: 'shell', why: 'bash login shells' },
  { path: '.bash_login', kind: 'shell', why: 'bash login shells' },
  { path: '.profile', kind: 'shell', why: 'POSIX login shells' },
  { path: '.bash_aliases', kind: 'shell', why: 'sourced by Debian’s .bashrc' },
  { path: '.zshenv', kind: 'shell', why: 'zsh: every shell' },
  { path: '.zprofile', kind: 'shell', why: 'zsh login shells' },
  { path: '.zshrc', kind: 'shell', why: 'zsh interactive shells' },
  { path: '.config/fish/config.fish', kind: 'shell', why: 'fish' },
];

/** Directories whose files are substitutes one level deep (start-up snippets). */
export const HOME_SANITIZED_DIRS: readonly (HomeEntry & { kind: SanitizeKind })[] = [
  { path: '.bashrc.d', kind: 'shell', why: 'bash snippets sourced by .bashrc' },
  { path: '.zshrc.d', kind: 'shell', why: 'zsh snippets' },
  { path: '.config/fish/conf.d', kind: 'shell', why: 'fish snippets' },
];

/** Config keys that hold a credential (the last dotted/colon part of a key). */
const SECRET_KEY =
  /(?:^|[._:\-/])_?(?:auth|authtoken|token|password|passwd|pass|secret|apikey|api[_-]?key|credentials?|private[_-]?key|passphrase|access[_-]?key|client[_-]?secret)$/i;
/** A line that names a credential store (`_auth`, `:_authToken`, `npmAuthToken`, `npmAuthIdent`). */
const SECRET_KEY_WORD = /auth(?:token|ident)?$|token$|password$|passwd$|secret$|passphrase$/i;

const HIDDEN_LINE = {
  ini: '; conch: a credential was removed here',
  yaml: '# conch: a credential was removed here',
  gitconfig: '# conch: a credential was removed here',
  shell: ': # conch: a credential was removed here',
} as const;

/** `scheme://user:password@host` → `scheme://host` (the location stays, the secret goes). */
function stripUserinfo(value: string): string {
  return value.replace(/([a-z][a-z0-9+.-]*:\/\/)[^\s/@'"]+@/gi, '$1');
}

function secretKey(key: string): boolean {
  const k = key.trim().replace(/^["']|["']$/g, '');
  return SECRET_KEY.test(k) || SECRET_KEY_WORD.test(k);
}

/**
 * A config's text with its credentials removed, line by line (a removed line becomes a comment,
 * so line numbers in a tool's error stay right). `secretName` judges shell variable names (the
 * sandbox's hidden-variable globs).
 */
export function sanitizeConfig(
  kind: SanitizeKind,
  text: string,
  secretName: (name: string) => boolean,
): string {
  if (kind === 'xml') return sanitizeXml(text);
  let inCredentialSection = false;
  const lines = text.split('\n');
  const out = lines.map((line) => {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#') || trimmed.startsWith(';')) return line;
    if (kind === 'gitconfig') {
      const header = /^\[\s*([^\]\s"]+)(?:\s+"([^"]*)")?\s*\]/.exec(trimmed);
      if (header) {
        const section = header[1]!.toLowerCase();
        inCredentialSection = section === 'credential' || section.startsWith('credential.');
        // [url "https://token@github.com/"] insteadOf = … : the URL keeps its host.
        return inCredentialSection ? HIDDEN_LINE.gitconfig : stripUserinfo(line);
      }
      if (inCredentialSection) return HIDDEN_LINE.gitconfig;
      const kv = /^([A-Za-z0-9.-]+)\s*(?:=\s*(.*))?$/.exec(trimmed);
      if (kv) {
        const key = kv[1]!.toLowerCase();
        const value = kv[2] ?? '';
        if (key === 'helper' || key === 'extraheader' || secretKey(key) || looksLikeCredential(key, value))
          return HIDDEN_LINE.gitconfig;
      }
      return stripUserinfo(line);
    }
    if (kind === 'shell') {
      const m =
        /^\s*(?:export\s+|declare\s+-[a-zA-Z]*x[a-zA-Z]*\s+|typeset\s+-x\s+|readonly\s+|local\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(
          line,
        ) ??
        /^\s*set\s+(?:-[a-zA-Z]+\s+)*([A-Za-z_][A-Za-z0-9_]*)\s+(.*)$/.exec(line) ??
        /^\s*setenv\s+([A-Za-z_][A-Za-z0-9_]*)\s+(.*)$/.exec(line);
      if (m) {
        const value = m[2]!.trim().replace(/^(["'])(.*)\1;?$/, '$2');
        // A line that continues (`\`) is left alone: removing half of it would change the script.
        if (!line.endsWith('\\') && (secretName(m[1]!) || looksLikeCredential(m[1]!, value)))
          return HIDDEN_LINE.shell;
      }
      return line;
    }
    // ini, npmrc, toml, properties, yaml: `key = value`, `key=value`, `key: value`, `key value`.
    const kv =
      kind === 'yaml'
        ? /^\s*(?:-\s+)?["']?([^:"'#]+?)["']?\s*:\s*(.*)$/.exec(line)
        : /^\s*["']?([^=\s"']+)["']?\s*(?:=\s*|\s+)(.*)$/.exec(line);
    if (!kv) return stripUserinfo(line);
    const key = kv[1]!;
    // A URL's `user:password@` goes and the URL stays (an index-url keeps pointing at its index);
    // what is left is judged as a value.
    const value = stripUserinfo(kv[2]!.trim().replace(/^(["'])(.*)\1$/, '$2'));
    if (secretKey(key) || (value !== '' && looksLikeCredential(key.replace(/[^A-Za-z0-9]+/g, '_'), value)))
      return kind === 'yaml' ? HIDDEN_LINE.yaml : HIDDEN_LINE.ini;
    return stripUserinfo(line);
  });
  return out.join('\n');
}

/** maven settings.xml, NuGet.Config: element contents and `<add key=… value=…>` credentials removed. */
function sanitizeXml(text: string): string {
  return stripUserinfo(
    text
      .replace(
        /<((?:[A-Za-z]+:)?(?:password|passphrase|privateKey|token|secret|apiKey|clearTextPassword))(\s[^>]*)?>[\s\S]*?<\/\1>/gi,
        '<$1$2><!-- conch: removed --></$1>',
      )
      .replace(
        /<add\s+key="[^"]*(?:password|token|apikey|secret)[^"]*"[^>]*\/>/gi,
        '<!-- conch: a credential was removed here -->',
      ),
  );
}

/** Files of a sanitized directory (one level, at most 64): each shown as a substitute. */
export function sanitizedDirFiles(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isFile() || e.isSymbolicLink())
      .map((e) => join(dir, e.name))
      .filter((p) => statIf(p)?.isFile())
      .slice(0, 64);
  } catch {
    return [];
  }
}

// ---- git-tracked .env files ----

/**
 * The git directory and work tree a path belongs to (the nearest `.git` above it: a directory, or
 * a `gitdir:` file of a worktree or submodule), or undefined.
 */
function repositoryOf(path: string): { gitDir: string; workTree: string } | undefined {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    const dotGit = join(dir, '.git');
    const st = lstatIf(dotGit);
    if (st?.isDirectory()) return { gitDir: dotGit, workTree: dir };
    if (st?.isFile()) {
      try {
        const m = /^gitdir: (.+?)\s*$/m.exec(
          readRegularFileSync(dotGit, { maxBytes: 64 * 1024, encoding: 'utf8' }),
        );
        if (m) return { gitDir: resolve(dir, m[1]!), workTree: dir };
      } catch {
        return undefined;
      }
      return undefined;
    }
    if (dir === dirname(dir)) return undefined;
  }
}

/**
 * The blob ids git's index records, by path relative to the work tree. Parsed here (formats 2, 3
 * and 4) instead of running `git ls-files`: git run by the host on a repository the agent can
 * write would obey its config (core.fsmonitor runs a program). Undefined when the index cannot be
 * read or has a shape this parser does not know (the files then stay masked).
 */
export function readIndexBlobs(gitDir: string): Map<string, string> | undefined {
  let buf: Buffer;
  try {
    // A repository the agent can write: a regular file when opened (a FIFO would block the host),
    // and bounded (a larger index leaves its files masked, as an unreadable one does).
    buf = readRegularFileSync(join(gitDir, 'index'), { maxBytes: 512 * 1024 * 1024 });
  } catch {
    return undefined;
  }
  if (buf.length < 12 || buf.toString('latin1', 0, 4) !== 'DIRC') return undefined;
  const version = buf.readUInt32BE(4);
  if (version < 2 || version > 4) return undefined;
  let hashLength = 20;
  try {
    const config = readRegularFileSync(join(gitDir, 'config'), { maxBytes: 1024 * 1024, encoding: 'utf8' });
    if (/objectformat\s*=\s*sha256/i.test(config)) hashLength = 32;
  } catch {
    // no config: sha1
  }
  const count = buf.readUInt32BE(8);
  const out = new Map<string, string>();
  let pos = 12;
  let previous = '';
  for (let i = 0; i < count; i++) {
    const start = pos;
    if (pos + 40 + hashLength + 2 > buf.length) return undefined;
    const oid = buf.toString('hex', pos + 40, pos + 40 + hashLength);
    const flags = buf.readUInt16BE(pos + 40 + hashLength);
    pos += 40 + hashLength + 2;
    if (version >= 3 && flags & 0x4000) pos += 2;
    let name: string;
    if (version === 4) {
      // Prefix compression: a varint of bytes to drop from the previous name, then the rest.
      let c = buf[pos++]!;
      let strip = c & 127;
      while (c & 128) {
        c = buf[pos++]!;
        strip = ((strip + 1) << 7) | (c & 127);
      }
      const end = buf.indexOf(0, pos);
      if (end < 0 || strip > previous.length) return undefined;
      name = previous.slice(0, previous.length - strip) + buf.toString('utf8', pos, end);
      pos = end + 1;
    } else {
      const end = buf.indexOf(0, pos);
      if (end < 0) return undefined;
      name = buf.toString('utf8', pos, end);
      // Entries are padded with 1–8 NULs to a multiple of 8 bytes.
      pos = start + Math.ceil((end - start + 1) / 8) * 8;
    }
    previous = name;
    // Stage 0 only (a conflicted path has no single recorded content).
    if (((flags >> 12) & 3) === 0) out.set(name, oid);
  }
  return out;
}

/** Index blob tables by git dir and the index's change time (one parse per index state). */
const indexCache = new Map<string, { stamp: string; blobs: Map<string, string> | undefined }>();

/**
 * The content of a file git tracks unchanged (the working file equals what the index records —
 * content that is in the repository's objects already, readable inside the sandbox by `git
 * show`), or undefined when it is untracked, changed, or cannot be told.
 */
export function trackedUnchanged(path: string): Buffer | undefined {
  const repo = repositoryOf(path);
  if (!repo) return undefined;
  const indexStat = statIf(join(repo.gitDir, 'index'));
  if (!indexStat) return undefined;
  const stamp = `${indexStat.ino}:${indexStat.size}:${indexStat.mtimeMs}`;
  let cached = indexCache.get(repo.gitDir);
  if (cached?.stamp !== stamp) {
    cached = { stamp, blobs: readIndexBlobs(repo.gitDir) };
    if (indexCache.size >= 64) indexCache.clear();
    indexCache.set(repo.gitDir, cached);
  }
  const rel = relative(repo.workTree, path).split(sep).join('/');
  const oid = cached.blobs?.get(rel);
  if (!oid) return undefined;
  let content: Buffer;
  try {
    const st = safeLstatSync(path);
    if (!st.isFile() || st.size > 1 << 20) return undefined;
    content = readRegularFileSync(path, { maxBytes: 1 << 20 });
  } catch {
    return undefined;
  }
  const algorithm = oid.length === 64 ? 'sha256' : 'sha1';
  const id = createHash(algorithm).update(`blob ${content.length}\0`).update(content).digest('hex');
  return id === oid ? content : undefined;
}
