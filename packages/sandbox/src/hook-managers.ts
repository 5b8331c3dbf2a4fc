import { basename, dirname, isAbsolute, join, resolve } from 'node:path';

/**
 * What a repository's installed hooks take from its work tree.
 *
 * Hook managers install small hooks that delegate: git runs `<hooks>/pre-commit` (githooks(5)),
 * and that runs whatever the manager's files in the work tree say at that moment. Whoever can
 * write those files decides what the user's next `git commit` runs, outside any sandbox, as surely
 * as whoever can write the hook itself. The sandbox keeps them read-only where such a hook is
 * installed (kernel-policy.ts), and a host rule that lets git out of the sandbox counts them among
 * what it runs (@conch/permission's executed-files.ts).
 *
 * Known managers, told apart by the hooks they install (read from the hooks directory git uses):
 * - husky 9: `core.hooksPath` is `.husky/_`, whose hooks source `_/h` (9.1; `_/husky.sh` in 9.0),
 *   which runs `.husky/<hook>`: the parent directory holds what runs.
 *   (husky 5-8 put `core.hooksPath` on `.husky` itself: that is the hooks directory already.)
 * - pre-commit: its hook says `pre-commit.com` and runs `python -mpre_commit hook-impl
 *   --config=<file>`: that config (default `.pre-commit-config.yaml`) lists what runs.
 * - lefthook: its hook runs `lefthook run <hook>`, which reads the main and the `-local` config
 *   in any of its names and formats, the scripts under `.lefthook/` and `.lefthook-local/`, and
 *   what a YAML config names with `rc`, `extends`, `source_dir` and `source_dir_local`.
 * - husky 4: its hooks run `node_modules/husky/run.js`, which reads `.huskyrc*` or
 *   `husky.config.*`, and package.json's `husky.hooks` (`packageJson` below).
 *
 * What those configs name in turn (a `npm test`, `npx lint-staged`, a pre-commit `repo: local`
 * script) is the project's own code, which the user runs by committing in a repository whose hooks
 * run it, as with a `make` or `npm test` they type.
 */
export interface HookDelegates {
  manager: 'husky' | 'husky 4' | 'pre-commit' | 'lefthook';
  /** Files the hooks read (whether or not they exist: a missing one would be read once made). */
  files: string[];
  /** Directories whose every file may run. */
  dirs: string[];
  /** A package.json whose `husky` key configures the hooks (husky 4). */
  packageJson?: string;
}

/** How this module reads: injected so the sandbox and the gate each read in their own way. */
export interface HookManagerIo {
  /** A small file's text, or undefined (missing, unreadable, not a file, too large). */
  text(path: string): string | undefined;
  /** A directory's entry names, or [] when it cannot be listed. */
  names(dir: string): readonly string[];
}

/** Every hook name git runs (githooks(5)). */
export const GIT_HOOK_NAMES: ReadonlySet<string> = new Set([
  'applypatch-msg',
  'pre-applypatch',
  'post-applypatch',
  'pre-commit',
  'pre-merge-commit',
  'prepare-commit-msg',
  'commit-msg',
  'post-commit',
  'pre-rebase',
  'post-checkout',
  'post-merge',
  'pre-push',
  'pre-receive',
  'update',
  'proc-receive',
  'post-receive',
  'post-update',
  'reference-transaction',
  'push-to-checkout',
  'pre-auto-gc',
  'post-rewrite',
  'sendemail-validate',
  'fsmonitor-watchman',
  'p4-changelist',
  'p4-prepare-changelist',
  'p4-post-changelist',
  'p4-pre-submit',
  'post-index-change',
]);

const LEFTHOOK_FORMATS = ['yml', 'yaml', 'toml', 'json', 'jsonc'];
/** Every name lefthook looks for, main and `-local`, with and without the dot, and in `.config/`. */
export const LEFTHOOK_CONFIGS: readonly string[] = ['lefthook', 'lefthook-local'].flatMap((base) =>
  LEFTHOOK_FORMATS.flatMap((ext) => [`${base}.${ext}`, `.${base}.${ext}`, `.config/${base}.${ext}`]),
);
const HUSKY_4_CONFIGS = [
  '.huskyrc',
  '.huskyrc.json',
  '.huskyrc.yaml',
  '.huskyrc.yml',
  '.huskyrc.js',
  '.huskyrc.cjs',
  'husky.config.js',
  'husky.config.cjs',
];

/** A YAML scalar `key: value` at the top level (quotes and a trailing comment dropped). */
function yamlScalar(text: string, key: string): string | undefined {
  const m = new RegExp(`^${key}\\s*:\\s*(?:"([^"]*)"|'([^']*)'|([^#\\s][^#]*?))\\s*(?:#.*)?$`, 'm').exec(
    text,
  );
  const value = m?.[1] ?? m?.[2] ?? m?.[3];
  return value === undefined || value === '' ? undefined : value;
}

/** The items of a top-level YAML list `key:` (block `- item` or flow `[a, b]`). */
function yamlList(text: string, key: string): string[] {
  const lines = text.split(/\r?\n/);
  const at = lines.findIndex((l) => new RegExp(`^${key}\\s*:`).test(l));
  if (at < 0) return [];
  const flow = /\[(.*)\]/.exec(lines[at]!);
  const unquote = (s: string) => s.trim().replace(/^["']|["']$/g, '');
  if (flow) return flow[1]!.split(',').map(unquote).filter(Boolean);
  const out: string[] = [];
  for (const line of lines.slice(at + 1)) {
    const item = /^\s+-\s*(.+?)\s*(?:#.*)?$/.exec(line);
    if (item) out.push(unquote(item[1]!));
    else if (line.trim() && !/^\s*#/.test(line)) break;
  }
  return out;
}

function lefthookDelegates(workTree: string, io: HookManagerIo): HookDelegates {
  const at = (p: string) => (isAbsolute(p) ? p : resolve(workTree, p));
  const files = LEFTHOOK_CONFIGS.map((name) => join(workTree, name));
  const dirs = [join(workTree, '.lefthook'), join(workTree, '.lefthook-local')];
  for (const config of files) {
    if (!/\.ya?ml$/.test(config)) continue;
    const text = io.text(config);
    if (text === undefined) continue;
    const rc = yamlScalar(text, 'rc');
    if (rc) files.push(at(rc));
    for (const key of ['source_dir', 'source_dir_local']) {
      const dir = yamlScalar(text, key);
      if (dir) dirs.push(at(dir));
    }
    for (const extended of yamlList(text, 'extends')) files.push(at(extended));
  }
  return { manager: 'lefthook', files: [...new Set(files)], dirs: [...new Set(dirs)] };
}

/**
 * What the hooks installed in `hooksDir` (a repository's `<gitdir>/hooks` or the directory its
 * `core.hooksPath` names) take from `workTree`: one entry per manager found, none for plain hooks.
 */
export function hookDelegates(hooksDir: string, workTree: string, io: HookManagerIo): HookDelegates[] {
  const names = io.names(hooksDir);
  if (names.length === 0) return [];
  const found = new Map<HookDelegates['manager'], HookDelegates>();
  if (basename(hooksDir) === '_' && (names.includes('h') || names.includes('husky.sh')))
    found.set('husky', { manager: 'husky', files: [], dirs: [dirname(hooksDir)] });
  const preCommitConfigs = new Set<string>();
  for (const name of names) {
    if (!GIT_HOOK_NAMES.has(name)) continue;
    const text = io.text(join(hooksDir, name));
    if (text === undefined) continue;
    if (/pre-commit\.com|-m\s*pre_commit\b/.test(text)) {
      const config = /--config[= ]["']?([^\s"')]+)/.exec(text)?.[1] ?? '.pre-commit-config.yaml';
      preCommitConfigs.add(isAbsolute(config) ? config : resolve(workTree, config));
    }
    if (/lefthook/i.test(text) && !found.has('lefthook'))
      found.set('lefthook', lefthookDelegates(workTree, io));
    if (/husky v4|husky-run|husky\/run(\.js)?\b/i.test(text) && !found.has('husky 4'))
      found.set('husky 4', {
        manager: 'husky 4',
        files: HUSKY_4_CONFIGS.map((n) => join(workTree, n)),
        dirs: [],
        packageJson: join(workTree, 'package.json'),
      });
  }
  if (preCommitConfigs.size > 0)
    found.set('pre-commit', { manager: 'pre-commit', files: [...preCommitConfigs], dirs: [] });
  return [...found.values()];
}
