// Every code block of the README and the guides, extracted and run against the built packages as a
// reader would run it: TypeScript and JavaScript as modules in a throwaway workspace and HOME (the
// host API, the plugin author's code), conch configs loaded into a real registry, MCP client
// configs pointed at the real conch-mcp, shell blocks parsed by bash with the scripts and files they
// name checked. A block that cannot run here says why in its directive (see blocks.ts).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transform } from 'esbuild';
import { afterAll, describe, expect, test } from 'vitest';
import { allBlocks, type Block, documentationFiles } from './blocks.js';
import { preludes, resolvePreludes } from './preludes.js';

const docsDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repoRoot = resolve(docsDir, '..');
/** Modules live under docs/ so that `@conch/*`, `ai` and `zod` resolve from docs/node_modules. */
const modulesDir = join(docsDir, '.blocks');
/** Workspaces too: plugin discovery searches node_modules above the registry's cwd. */
const workDir = join(docsDir, '.work');
mkdirSync(modulesDir, { recursive: true });
mkdirSync(workDir, { recursive: true });
afterAll(() => {
  rmSync(modulesDir, { recursive: true, force: true });
  rmSync(workDir, { recursive: true, force: true });
});

const PLACEHOLDER_ROOT = '/absolute/path/to/conch';
const blocks = allBlocks(repoRoot);
const all = preludes({ repoRoot });
const rootScripts = Object.keys(
  (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { scripts: object }).scripts,
);

function nameOf(block: Block): string {
  return `${block.file}:${block.line} [${block.lang}]`;
}

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  output: string;
}

/** Runs a module in its own process group with a throwaway HOME and workspace; kills the group after. */
async function runModule(source: string, label: string): Promise<Run> {
  const id = label.replace(/[^A-Za-z0-9]+/g, '-');
  const file = join(modulesDir, `${id}.mjs`);
  writeFileSync(file, source);
  const workspace = mkdtempSync(join(workDir, `${id}-`));
  // Its own package.json, so that npm in a block stops here instead of finding docs/package.json.
  writeFileSync(join(workspace, 'package.json'), '{ "name": "docs-workspace", "private": true }\n');
  const home = mkdtempSync(join(workDir, `home-${id}-`));
  const child = spawn(process.execPath, [file], {
    cwd: workspace,
    // The throwaway HOME's own state dir too: discovery's trust store is never the user's.
    env: {
      ...process.env,
      HOME: home,
      XDG_CACHE_HOME: join(home, '.cache'),
      XDG_STATE_HOME: join(home, '.local', 'state'),
      NODE_OPTIONS: '',
    },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  // A block that hangs is a failure the test reports, well inside vitest's own timeout.
  const deadline = setTimeout(() => child.kill('SIGKILL'), 240_000);
  const result = await new Promise<Run>((done) =>
    child.on('close', (code, signal) => done({ code, signal, output })),
  );
  clearTimeout(deadline);
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // the group is gone: nothing was left running
  }
  return result;
}

async function toModule(code: string, lang: string): Promise<string> {
  const loader = lang === 'ts' ? 'ts' : 'js';
  return (await transform(code, { loader, format: 'esm', target: 'node20', sourcefile: 'block' })).code;
}

/** The import declarations of a block (single- and multi-line), nothing else. */
function importsOf(code: string): string {
  return (code.match(/^import\s[\s\S]*?from\s+['"][^'"]+['"];?|^import\s+['"][^'"]+['"];?/gm) ?? []).join(
    '\n',
  );
}

function expectRan(run: Run, label: string) {
  if (run.code !== 0)
    throw new Error(`${label} exited ${run.code ?? run.signal}; its output:\n${run.output.slice(-4000)}`);
}

async function checkScript(block: Block) {
  const label = nameOf(block);
  const { directive } = block;
  if (directive.mode === 'reference' || directive.mode === 'static') {
    if (directive.mode === 'static') expect(directive.reason, `${label}: static needs a reason`).toBeTruthy();
    const imports = importsOf(block.code);
    if (directive.mode === 'static') {
      // The whole block must still be valid code.
      await toModule(block.code, block.lang);
    }
    if (!imports) return;
    expectRan(await runModule(await toModule(imports, block.lang), `${label}-imports`), label);
    return;
  }
  const { before, after } = resolvePreludes(directive.with, all, label);
  const source = [before, block.code, after, `process.exit(0);`].join('\n;\n');
  expectRan(await runModule(await toModule(source, block.lang), label), label);
}

function parseJson(block: Block): unknown {
  let text = block.code;
  if (block.lang === 'jsonc') {
    text = text
      .split('\n')
      .filter((l) => !/^\s*\/\//.test(l))
      .join('\n')
      .replace(/,(\s*[}\]])/g, '$1');
  }
  // A package.json excerpt: `"conch": { … }`.
  if (/^\s*"/.test(text)) text = `{${text}}`;
  return JSON.parse(text);
}

async function checkJson(block: Block) {
  const label = nameOf(block);
  const value = parseJson(block) as Record<string, any>;
  if (value.mcpServers) {
    for (const [name, server] of Object.entries<any>(value.mcpServers)) {
      const args: string[] = (server.args ?? []).map((a: string) => a.replace(PLACEHOLDER_ROOT, repoRoot));
      if (server.command === 'node') {
        expect(existsSync(args[0]!), `${label}: mcpServers.${name}.args[0] ${args[0]}`).toBe(true);
        const help = spawnSync(process.execPath, [args[0]!, '--help'], { encoding: 'utf8' });
        expect(help.status, `${label}: ${args[0]} --help: ${help.stderr}`).toBe(0);
        for (const flag of args.filter((a) => a.startsWith('--'))) expect(help.stdout).toContain(flag);
      }
    }
    return;
  }
  if (value.plugins) {
    if (block.directive.mode === 'static') {
      expect(block.directive.reason).toBeTruthy();
      return;
    }
    // A conch config: loaded, every plugin exposed in a real registry, then disposed.
    const source = [
      `import { writeFileSync } from 'node:fs';`,
      `import { createRegistryFromConfig, loadConchConfig } from '@conch/core';`,
      `writeFileSync('conch.config.json', ${JSON.stringify(JSON.stringify(value))});`,
      `const config = await loadConchConfig('conch.config.json');`,
      `const registry = await createRegistryFromConfig(config, { baseDir: config.baseDir });`,
      `if (registry.tools().length === 0) throw new Error('no tools exposed');`,
      `await registry.dispose();`,
      `process.exit(0);`,
    ].join('\n');
    expectRan(await runModule(source, label), label);
    return;
  }
  expect(value, label).toBeTypeOf('object');
}

const PNPM_BUILTINS = new Set(['install', 'add', 'pack', 'exec', 'dlx', 'run', '--filter', 'approve-builds']);

function checkShell(block: Block) {
  const label = nameOf(block);
  const syntax = spawnSync('bash', ['-n'], { input: block.code, encoding: 'utf8' });
  expect(syntax.status, `${label}: bash -n: ${syntax.stderr}`).toBe(0);
  for (const match of block.code.matchAll(/(?:npx -y pnpm@10|\bpnpm)\s+([a-z:-]+)/g)) {
    const script = match[1]!;
    if (PNPM_BUILTINS.has(script)) continue;
    expect(rootScripts, `${label}: 'pnpm ${script}' names a root package.json script`).toContain(script);
  }
  for (const match of block.code.matchAll(/\bnode\s+((?:\/absolute\/path\/to\/conch\/)?[\w./-]+\.m?js)\b/g)) {
    const path = match[1]!.replace(PLACEHOLDER_ROOT, repoRoot);
    expect(existsSync(resolve(repoRoot, path)), `${label}: ${path} exists (after the build)`).toBe(true);
  }
}

test('every fenced block declares its language (text for output and diagrams)', () => {
  expect(documentationFiles(repoRoot).length).toBeGreaterThan(15);
  expect(blocks.filter((b) => b.lang === '').map(nameOf)).toEqual([]);
});

const filesWithCode = documentationFiles(repoRoot).filter((file) =>
  blocks.some((b) => b.file === file && b.lang !== 'text'),
);

describe.each(filesWithCode)('%s', (file) => {
  const mine = blocks.filter((b) => b.file === file && b.lang !== 'text');
  test.each(mine.map((b) => [nameOf(b), b] as const))('%s', async (_name, block) => {
    if (['ts', 'js', 'mjs'].includes(block.lang)) await checkScript(block);
    else if (block.lang === 'json' || block.lang === 'jsonc') await checkJson(block);
    else if (block.lang === 'sh') checkShell(block);
    else throw new Error(`${nameOf(block)}: no check for language '${block.lang}'`);
  });
});
