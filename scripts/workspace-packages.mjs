// The workspace's packages and how they are built and packed, shared by `pnpm check:packages`
// (scripts/check-packages.mjs) and the install recipe (scripts/pack-for-install.mjs). Node built-ins
// only, plus the workspace's turbo and pnpm.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { basename, delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { toolchainEnv } from './toolchain.mjs';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const bin = (name) => join(ROOT, 'node_modules', '.bin', name);

let npxPnpm;
/**
 * pnpm as the calling script was started with (`pnpm check:packages`), else pnpm 10 through npx,
 * found once (`npx -y pnpm@10` asks the registry on every call) and put first on PATH for what it
 * runs (turbo looks for the workspace's package manager there). Returns its stdout (null with
 * `stdio: 'inherit'`); by default its stderr goes to ours.
 */
export function pnpm(args, cwd, stdio = undefined, env = process.env) {
  const execpath = process.env.npm_execpath;
  if (execpath && /pnpm/.test(basename(execpath))) {
    return execFileSync(process.execPath, [execpath, ...args], { cwd, encoding: 'utf8', stdio, env });
  }
  npxPnpm ??= execFileSync('npx', ['-y', '-p', 'pnpm@10', '-c', 'command -v pnpm'], {
    encoding: 'utf8',
  }).trim();
  const path = `${dirname(npxPnpm)}${delimiter}${env.PATH ?? ''}`;
  return execFileSync(process.execPath, [npxPnpm, ...args], {
    cwd,
    encoding: 'utf8',
    stdio,
    env: { ...env, PATH: path },
  });
}

/** Workspace package directories from pnpm-workspace.yaml (`dir/*` and `dir` entries). */
export function workspaceDirs() {
  const yaml = readFileSync(join(ROOT, 'pnpm-workspace.yaml'), 'utf8');
  const dirs = [];
  let inPackages = false;
  for (const line of yaml.split('\n')) {
    if (/^\S/.test(line)) inPackages = line.trim() === 'packages:';
    else if (inPackages) {
      const m = /^\s+-\s+['"]?([^'"]+?)['"]?\s*$/.exec(line);
      if (!m) continue;
      const pattern = m[1];
      if (pattern.endsWith('/*')) {
        const parent = join(ROOT, pattern.slice(0, -2));
        for (const entry of existsSync(parent) ? readdirSync(parent).sort() : [])
          dirs.push(join(parent, entry));
      } else dirs.push(join(ROOT, pattern));
    }
  }
  return dirs.filter((dir) => existsSync(join(dir, 'package.json')));
}

/** Every workspace package: `{ dir, manifest }`. Publishable ones are those not `private`. */
export function workspacePackages() {
  return workspaceDirs().map((dir) => ({
    dir,
    manifest: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')),
  }));
}

/**
 * Builds the named packages and what they depend on (turbo: only what is stale), with the compiler
 * in turbo's cache key as `pnpm build` has it (scripts/toolchain.mjs). Through `pnpm exec`, so that
 * turbo finds the workspace's package manager when the caller was started by plain node.
 */
export function buildPackages(names) {
  const filters = names.map((name) => `--filter=${name}`);
  pnpm(
    ['exec', 'turbo', 'run', 'build', '--output-logs=errors-only', ...filters],
    ROOT,
    'inherit',
    toolchainEnv(),
  );
}

/**
 * Packs the package in `dir` the way `pnpm publish` would (workspace: and catalog: ranges replaced,
 * its prepack run) into the directory `out`, replacing a tarball of the same name. Returns the
 * tarball's file name. On failure throws pnpm's error, whose `stdout` / `stderr` say why.
 */
export function packPackage(dir, out) {
  const scratch = mkdtempSync(join(out, '.pack-'));
  try {
    pnpm(['pack', '--pack-destination', scratch], dir);
    const tarball = readdirSync(scratch).find((f) => f.endsWith('.tgz'));
    if (!tarball) throw new Error(`pnpm pack made no tarball in ${scratch}`);
    renameSync(join(scratch, tarball), join(out, tarball));
    return tarball;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
