/**
 * Names that stay protected wherever they are: what the kernel policy makes read-only in every
 * writable root, and what @conch/permission's parser refuses to write.
 */

/** Shell start-up files (in any directory): writing one runs code in every later shell. */
export const RC_FILES: ReadonlySet<string> = new Set([
  '.bashrc',
  '.bash_profile',
  '.bash_login',
  '.bash_logout',
  '.bash_aliases',
  '.profile',
  '.zshrc',
  '.zshenv',
  '.zprofile',
  '.zlogin',
  '.zlogout',
  '.kshrc',
  '.mkshrc',
  '.cshrc',
  '.tcshrc',
  '.inputrc',
  '.gitconfig',
  // Mercurial's user config: its [hooks] and [extensions] run in every repository (hg help config).
  '.hgrc',
  '.pam_environment',
]);
/**
 * The entries of a Mercurial repository's `.hg` directory that hg reads as configuration or follows
 * to another repository's, on every hg command run there (`hg status` included, which shell prompts
 * run): `hgrc` and `hgrc-not-shared` (their `[hooks]`, `[extensions]`, `[alias]` and tool settings
 * run programs; `%include` reads further files), and `sharedpath` (a share: the store and, with
 * share-safe, the config of the repository it names). Mercurial's counterpart of git's config,
 * hooks and `gitdir:` pointers.
 */
export const HG_PROTECTED: readonly string[] = ['hgrc', 'hgrc-not-shared', 'sharedpath'];
/** The two of them that are config files (what `%include`s are followed from). */
export const HG_CONFIG_FILES: readonly string[] = HG_PROTECTED.filter((name) => name !== 'sharedpath');
/**
 * Directories (at any depth) whose files the user's own tools read as settings or run as code
 * outside any sandbox: editors (`.vscode/tasks.json`, Zed's `.zed/tasks.json` and language-server
 * commands, Helix's `.helix/languages.toml`, whose language servers and formatters start when the
 * user opens a file), IDEs, agent CLIs and IDE agents (`.claude/settings.json` hooks,
 * `.codex/config.toml`, Continue's MCP servers, OpenCode's `.opencode/plugins/*.js` loaded at its
 * start, Kiro's hooks and `.kiro/settings/mcp.json`, Amazon Q's `.amazonq/mcp.json`, Roo Code's
 * `.roo/mcp.json`), MCP clients, dev containers (`initializeCommand` runs on the host when the folder
 * is opened in its container), mise (`.mise/config.toml`: hooks and env scripts on `cd`).
 */
export const TOOL_CONFIG_DIRS: ReadonlySet<string> = new Set([
  '.vscode',
  '.idea',
  '.zed',
  '.helix',
  '.claude',
  '.gemini',
  '.cursor',
  '.codex',
  '.continue',
  '.opencode',
  '.kiro',
  '.amazonq',
  '.roo',
  '.devcontainer',
  '.mise',
]);
/**
 * mise's project configs (mise.jdx.dev/configuration): `[hooks]` and `[env] _.source` run on `cd`
 * and at every `mise` command once the file is trusted, and trust is by path unless the user chose
 * paranoid mode (`mise run` trusts the config it runs from).
 */
const MISE_CONFIGS = ['mise.toml', '.mise.toml', 'mise.local.toml', '.mise.local.toml'];
/**
 * Files (at any depth) of the same kind: MCP server lists, OpenCode's project config (`opencode.json`,
 * `opencode.jsonc`: its MCP servers' commands and plugins), direnv (`.envrc`, also an .env* name),
 * mise, a dev container's config, submodule definitions, search-tool config that can name a
 * preprocessor, and the project files Vim and Neovim source when the user has set `exrc` (`.exrc`,
 * `.nvimrc`, `.nvim.lua`: Vim runs them as they are; Neovim asks once per content).
 */
export const TOOL_CONFIG_FILES: ReadonlySet<string> = new Set([
  '.mcp.json',
  'opencode.json',
  'opencode.jsonc',
  '.gitmodules',
  '.ripgreprc',
  '.envrc',
  '.devcontainer.json',
  '.exrc',
  '.nvimrc',
  '.nvim.lua',
  ...MISE_CONFIGS,
]);
/**
 * Name endings of the same kind: a VS Code workspace file (`app.code-workspace`) holds settings,
 * launch configs and tasks that run when the user opens it (`runOn: folderOpen`), like `.vscode/`.
 */
export const TOOL_CONFIG_SUFFIXES: readonly string[] = ['.code-workspace'];
/** A file name of TOOL_CONFIG_FILES, or one ending in a TOOL_CONFIG_SUFFIXES entry. */
export const isToolConfigFileName = (name: string): boolean =>
  TOOL_CONFIG_FILES.has(name) || TOOL_CONFIG_SUFFIXES.some((suffix) => name.endsWith(suffix));
/** An environment file: `.env`, `.env.local`, `.env-prod`, `.env_x`, `.envrc`. */
export const ENV_FILE = /^\.env($|[.\-_]|rc$)/;
/**
 * A template of one, committed to show which variables exist and holding no secret by convention:
 * `.env.example`, `.env.sample`, `.env.template`, `.env.dist`, `.env.defaults`, `.env.schema`
 * (also `.env.local.example`, `.env-example`). An ordinary file: readable and writable.
 */
export const ENV_TEMPLATE =
  /^\.env(?:[.\-_][\w.-]*)?[.\-_](?:example|sample|template|tmpl|tpl|dist|defaults?|schema)$/i;
/** The common template names, for the path guard (which judges names it is given, not patterns). */
export const ENV_TEMPLATE_NAMES: readonly string[] = [
  '.env.example',
  '.env.sample',
  '.env.template',
  '.env.tmpl',
  '.env.tpl',
  '.env.dist',
  '.env.defaults',
  '.env.default',
  '.env.schema',
  '.env-example',
  '.env-sample',
  '.env_example',
  '.env.local.example',
  '.env.development.example',
  '.env.test.example',
  '.env.production.example',
];
/** A `.env*` name that may hold secrets (an environment file that is not a template). */
export const isEnvSecretName = (name: string): boolean => ENV_FILE.test(name) && !ENV_TEMPLATE.test(name);
/** System-wide start-up files and directories. */
export const SYSTEM_RC: readonly string[] = [
  '/etc/profile',
  '/etc/bash.bashrc',
  '/etc/environment',
  '/etc/zshenv',
  '/etc/zshrc',
  '/etc/gitconfig',
];
export const SYSTEM_RC_DIRS: readonly string[] = ['/etc/zsh/', '/etc/profile.d/'];

/**
 * Files the guard refuses to let a sandboxed command create or change anywhere under the
 * workspace, whether or not they existed when the sandbox started: what the user's own tools read
 * as settings or run as code without asking (direnv's `.envrc`, an MCP client's `.mcp.json`,
 * OpenCode's `opencode.json(c)`, conch's own `conch.config.json`, a dev container's
 * `.devcontainer.json`, Vim's and Neovim's `exrc` files, mise's configs, VS Code's
 * `*.code-workspace`, shell start-up files when the workspace is a home). An entry `*suffix` stands
 * for every name ending in suffix. `.gitmodules`
 * and `.ripgreprc` stay protected where they exist but may be created (`git submodule add`): git
 * ignores `!command` updates from `.gitmodules`, and ripgrep reads its config only where
 * RIPGREP_CONFIG_PATH points.
 */
export const GUARD_FILE_NAMES: readonly string[] = [
  '.envrc',
  '.mcp.json',
  'opencode.json',
  'opencode.jsonc',
  'conch.config.json',
  '.devcontainer.json',
  '.exrc',
  '.nvimrc',
  '.nvim.lua',
  ...MISE_CONFIGS,
  ...TOOL_CONFIG_SUFFIXES.map((suffix) => `*${suffix}`),
  ...RC_FILES,
];

/** Directories under which the guard refuses every create or change: editors', IDEs' and agents' settings, keys, shell drop-ins. */
export const GUARD_DIR_NAMES: readonly string[] = [...TOOL_CONFIG_DIRS, '.ssh', '.bashrc.d', '.zshrc.d'];
