// A host installs conch as the README says, with npm and with pnpm 10, on a machine without a C
// compiler: the recipe packs the tarballs and writes INSTALL.md, each install runs from INSTALL.md as
// printed, and the Quick start then runs under plain node, CommonJS fails the way the README says,
// and the supervisor spawns with posix_spawn.
import { spawn, spawnSync } from 'node:child_process';
import {
  accessSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transform } from 'esbuild';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Block, blocksOf } from './blocks.js';

const docsDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repoRoot = resolve(docsDir, '..');
const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
const readmeBlocks = blocksOf('README.md', readme);

// No outcome depends on speed: these only stop a run that hangs, far beyond a slow machine's time.
const MINUTE = 60_000;
const INSTALL_DEADLINE = 30 * MINUTE;
const RUN_DEADLINE = 10 * MINUTE;

/** The recipe as the README prints it: the `node scripts/pack-for-install.mjs <dir>` command. */
function readmeRecipe(): { line: string; argv: string[] } {
  const block = readmeBlocks.find((b) => b.lang === 'sh' && b.code.includes('scripts/pack-for-install.mjs'));
  if (!block) throw new Error('README.md has no sh block running scripts/pack-for-install.mjs');
  const line = block.code
    .split('\n')
    .flatMap((l) => l.split('&&'))
    .map((s) => s.trim())
    .find((s) => s.startsWith('node scripts/pack-for-install.mjs'));
  const argv = line?.split(/\s+/) ?? [];
  if (argv.length !== 3)
    throw new Error(`README.md's recipe: expected 'node scripts/pack-for-install.mjs <dir>'`);
  return { line: line!, argv };
}

/** The Quick start's code, from the README as printed. */
function quickStart(): Block {
  const heading = readme.split('\n').indexOf('## Quick start (host API)') + 1;
  const block = readmeBlocks.find((b) => b.lang === 'ts' && b.line > heading);
  if (heading === 0 || !block) throw new Error('README.md has no ts block under "## Quick start (host API)"');
  return block;
}

/** The error code the README says `require('@conch/core')` fails with. */
function readmeRequireCode(): string {
  const code = /`require\('@conch\/core'\)` fails with\s+`(ERR_[A-Z_]+)`/.exec(readme)?.[1];
  if (!code) throw new Error("README.md no longer says which error `require('@conch/core')` fails with");
  return code;
}

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  output: string;
}

/** Runs a command in its own process group, stdin closed; kills the group when it is done. */
async function run(
  file: string,
  args: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; deadline: number },
): Promise<Run> {
  const child = spawn(file, args, {
    cwd: opts.cwd,
    env: opts.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const timer = setTimeout(() => {
    output += `\n[killed: still running after ${opts.deadline / MINUTE} minutes]`;
    killGroup(child.pid);
  }, opts.deadline);
  const result = await new Promise<Run>((done) => {
    child.on('error', (error) => done({ code: null, signal: null, output: `${output}\n${error.message}` }));
    child.on('close', (code, signal) => done({ code, signal, output }));
  });
  clearTimeout(timer);
  killGroup(child.pid);
  return result;
}

function killGroup(pid: number | undefined) {
  try {
    if (pid) process.kill(-pid, 'SIGKILL');
  } catch {
    // the group is gone: nothing was left running
  }
}

function expectOk(r: Run, what: string) {
  if (r.code !== 0)
    throw new Error(`${what} exited ${r.code ?? r.signal}; its output:\n${r.output.slice(-6000)}`);
}

/** Names of C compilers and their versioned and target-prefixed forms (gcc-12, x86_64-linux-gnu-gcc). */
const COMPILER = /^(?:[\w.]+-)*(?:cc|gcc|g\+\+|c\+\+|clang|clang\+\+|tcc|c89|c99|cpp|icc|icx)(?:-[\d.]+)?$/;

/**
 * A PATH without a C compiler: one directory linking every program of this PATH but compilers (not
 * the node_modules/.bin directories a package manager put there), plus `pnpm` as `npx -y pnpm@10`.
 * It is made inside the host's project, the workspace its sandboxes see (they do not see the rest
 * of the temp directory), so that the programs the sandboxes start are found there too.
 */
function compilerFreePath(bin: string): string {
  mkdirSync(bin, { recursive: true });
  const seen = new Set<string>();
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir || /node_modules|node-gyp-bin/.test(dir) || !existsSync(dir)) continue;
    for (const name of readdirSync(dir)) {
      if (seen.has(name) || COMPILER.test(name) || name === 'pnpm' || name === 'pnpx') continue;
      const path = join(dir, name);
      try {
        if (!statSync(path).isFile()) continue;
        accessSync(path, constants.X_OK);
      } catch {
        continue;
      }
      seen.add(name);
      symlinkSync(path, join(bin, name));
    }
  }
  writeFileSync(join(bin, 'pnpm'), '#!/bin/sh\nexec npx -y pnpm@10 "$@"\n', { mode: 0o755 });
  return bin;
}

/**
 * The environment of a host's shell: a throwaway HOME (so npm's cache, pnpm's store and conch's
 * state are new), the compiler-free PATH, and nothing a package manager or vitest set for this run.
 */
function hostEnv(home: string, path: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (key.toLowerCase() === 'npm_config_registry') env[key] = value;
    else if (
      !/^(npm_|pnpm_|turbo_|vitest|xdg_|node_options$|node_path$|node_env$|init_cwd$|cc$|cxx$)/i.test(key)
    )
      env[key] = value;
  }
  return {
    ...env,
    PATH: path,
    HOME: home,
    XDG_CACHE_HOME: join(home, '.cache'),
    XDG_CONFIG_HOME: join(home, '.config'),
    XDG_DATA_HOME: join(home, '.local', 'share'),
    XDG_STATE_HOME: join(home, '.local', 'state'),
  };
}

/**
 * Whether the sandbox's path guard works on this machine, asked of the checkout's own (its build,
 * else its prebuilt one): where it does, an installed copy must run under it too.
 */
function guardWorksHere(): boolean {
  const sandbox = join(repoRoot, 'packages', 'sandbox');
  const built = join(sandbox, 'dist', 'conch-guard');
  const guard = existsSync(built)
    ? built
    : join(sandbox, 'prebuilds', `linux-${process.arch}`, 'conch-guard');
  return spawnSync(guard, ['--probe'], { encoding: 'utf8' }).status === 0;
}

/** Run after the install, as a host would: which spawner the supervisor uses once a command ran. */
const STATUS_SCRIPT = `import { PluginRegistry } from '@conch/core';
const registry = new PluginRegistry({ cwd: process.cwd() });
await registry.discover();
await registry.exposeTool('permission', { mode: 'acceptAll' });
await registry.exposeTool('cli');
const result = await registry.execute('cli_based_tool', { command: 'true' });
const { processes } = await registry.status();
await registry.dispose();
console.log(JSON.stringify({ display: result.display, processes }));
`;

/** CommonJS: require() as the README warns, then the import() it recommends. */
const REQUIRE_SCRIPT = `let required;
try {
  require('@conch/core');
  required = { loaded: true };
} catch (error) {
  required = { loaded: false, code: error.code, message: error.message.split('\\n')[0] };
}
import('@conch/core').then(
  (core) => console.log(JSON.stringify({ required, imported: typeof core.PluginRegistry })),
  (error) => console.log(JSON.stringify({ required, imported: String(error) })),
);
`;

let root: string;
let home: string;
let guide: Block[] = [];

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'conch-packed-install-'));
  home = join(root, 'home');
  mkdirSync(home);
  // The README's recipe, with the throwaway directory for its <dir>: run once, both installs use it.
  const { argv } = readmeRecipe();
  const packs = join(root, 'packs');
  const packed = await run(process.execPath, [argv[1]!, packs], {
    cwd: repoRoot,
    env: process.env,
    deadline: INSTALL_DEADLINE,
  });
  expectOk(packed, `node ${argv[1]} ${packs}`);
  guide = blocksOf('INSTALL.md', readFileSync(join(packs, 'INSTALL.md'), 'utf8'));
}, INSTALL_DEADLINE + MINUTE);

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

/** The packages a host can install: every packages/* one that is not private. */
function publishable(): string[] {
  return readdirSync(join(repoRoot, 'packages'))
    .map((dir) => join(repoRoot, 'packages', dir, 'package.json'))
    .filter((file) => existsSync(file))
    .map((file) => JSON.parse(readFileSync(file, 'utf8')) as { name: string; private?: boolean })
    .filter((manifest) => manifest.private !== true)
    .map((manifest) => manifest.name)
    .sort();
}

test('the recipe packed every publishable package and says how to install each', () => {
  const npm = guide.filter((b) => b.lang === 'sh' && b.code.startsWith('npm install '));
  const json = guide.filter((b) => b.lang === 'json');
  const pnpm = guide.filter((b) => b.lang === 'sh' && b.code.startsWith('pnpm add '));
  expect([npm.length, json.length, pnpm.length]).toEqual([1, 1, 1]);
  const overrides = (JSON.parse(json[0]!.code) as { pnpm: { overrides: Record<string, string> } }).pnpm
    .overrides;
  expect(Object.keys(overrides).sort()).toEqual(publishable());
  const tarballs = Object.values(overrides).map((spec) => spec.replace(/^file:/, ''));
  for (const tarball of tarballs) expect(existsSync(tarball), tarball).toBe(true);
  expect(npm[0]!.code.split(/\s+/).slice(2).sort()).toEqual([...tarballs].sort());
  expect(pnpm[0]!.code.split(/\s+/).slice(2).sort()).toEqual([...tarballs].sort());
});

/** The installs, as INSTALL.md prints them, into a new project each. */
const managers = {
  npm: async (project: string, env: NodeJS.ProcessEnv) => {
    const line = guide.find((b) => b.lang === 'sh' && b.code.startsWith('npm install '))!.code;
    expectOk(await run('bash', ['-c', line], { cwd: project, env, deadline: INSTALL_DEADLINE }), line);
    // Every @conch/* package came from a tarball, none from a registry.
    const lock = JSON.parse(readFileSync(join(project, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { resolved?: string }>;
    };
    const conch = Object.entries(lock.packages).filter(([path]) => /node_modules\/@conch\//.test(path));
    expect(conch.length).toBe(publishable().length);
    for (const [path, { resolved }] of conch) expect(resolved, path).toMatch(/^file:/);
  },
  pnpm: async (project: string, env: NodeJS.ProcessEnv) => {
    const overrides = JSON.parse(guide.find((b) => b.lang === 'json')!.code) as { pnpm: object };
    const manifestPath = join(project, 'package.json');
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { pnpm?: object };
    manifest.pnpm = { ...manifest.pnpm, ...overrides.pnpm };
    writeFileSync(manifestPath, JSON.stringify(manifest, null, 2));
    const line = guide.find((b) => b.lang === 'sh' && b.code.startsWith('pnpm add '))!.code;
    expectOk(await run('bash', ['-c', line], { cwd: project, env, deadline: INSTALL_DEADLINE }), line);
    const conch = readdirSync(join(project, 'node_modules', '.pnpm')).filter((d) => d.startsWith('@conch+'));
    for (const dir of conch) expect(dir).toMatch(/^@conch\+[\w-]+@file\+/);
    const names = new Set(conch.map((dir) => dir.slice(0, dir.indexOf('@file+')).replace('+', '/')));
    expect([...names].sort()).toEqual(publishable());
  },
};

describe.each(Object.keys(managers) as (keyof typeof managers)[])('installed with %s', (manager) => {
  let project: string;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    project = join(root, `${manager}-host`);
    mkdirSync(project);
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: `${manager}-host`, version: '1.0.0', private: true }, null, 2),
    );
    env = hostEnv(home, compilerFreePath(join(project, 'host-bin')));
    await managers[manager](project, env);
  }, INSTALL_DEADLINE + MINUTE);

  test('the host PATH has no C compiler', () => {
    const r = spawnSync('sh', ['-c', 'command -v cc gcc clang tcc c99'], { env, encoding: 'utf8' });
    expect(r.stdout).toBe('');
    expect(r.status).not.toBe(0);
  });

  function hostStatus(r: Run) {
    return JSON.parse(r.output.trim().split('\n').pop()!) as {
      display: string;
      processes: {
        supervisor: string;
        spawner?: { kind: string; reason?: string };
        guard: { available: boolean; active: boolean; reason?: string };
      };
    };
  }

  /** The status script, run once for the tests that read its answer. */
  let status: Promise<Run> | undefined;
  const statusRun = () => (status ??= node('status.mjs', STATUS_SCRIPT));

  async function node(file: string, source: string): Promise<Run> {
    writeFileSync(join(project, file), source);
    return run('node', [file], { cwd: project, env, deadline: RUN_DEADLINE });
  }

  test(
    "the README's Quick start runs under plain node",
    async () => {
      const { code } = await transform(quickStart().code, { loader: 'ts', format: 'esm', target: 'node20' });
      const r = await node('quick-start.mjs', code);
      expectOk(r, 'quick-start.mjs');
      // Its last line: `console.log(tools.length, system.length, result.display)` after `ls -la`.
      expect(r.output).toMatch(/^\d+ \d+ ✓ exit=0/m);
    },
    RUN_DEADLINE + MINUTE,
  );

  test(
    "require('@conch/core') from CommonJS fails as the README says; import() works",
    async () => {
      const r = await node('require.cjs', REQUIRE_SCRIPT);
      expectOk(r, 'require.cjs');
      const { required, imported } = JSON.parse(r.output.trim().split('\n').pop()!) as {
        required: { loaded: boolean; code?: string; message?: string };
        imported: string;
      };
      expect(required, JSON.stringify(required)).toMatchObject({ loaded: false, code: readmeRequireCode() });
      expect(imported).toBe('function');
    },
    RUN_DEADLINE + MINUTE,
  );

  test(
    'status() reports the posix_spawn spawner, with no C compiler on PATH',
    async () => {
      const r = await statusRun();
      expectOk(r, 'status.mjs');
      const { display, processes } = hostStatus(r);
      expect(display).toMatch(/^✓ exit=0/);
      expect(processes.supervisor).toBe('running');
      // The addon the tarball carries, loaded without an install script (the packing checkout's build,
      // else its prebuilt one from packages/process/prebuilds): never node's spawn.
      expect(processes.spawner, JSON.stringify(processes.spawner)).toEqual({ kind: 'posix_spawn' });
    },
    RUN_DEADLINE + MINUTE,
  );

  test(
    "status() reports the sandbox's path guard wherever the checkout's guard works",
    async () => {
      const r = await statusRun();
      expectOk(r, 'status.mjs');
      const { guard } = hostStatus(r).processes;
      // Prebuilt too (packages/sandbox/prebuilds), and a program: it must stay executable once packed.
      expect(guard.available, JSON.stringify(guard)).toBe(guardWorksHere());
    },
    RUN_DEADLINE + MINUTE,
  );
});
