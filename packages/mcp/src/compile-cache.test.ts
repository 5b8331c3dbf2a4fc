// Invariant: the launcher's code cache only ever speeds a start up: a file runs as CommonJS with
// the same behaviour whether its cache is missing, valid, corrupt, stale or refused; a cache is
// used only when it was made from exactly this source by this node, and only from a directory and
// file this user owns that nobody else can write to.
// Each run is a fresh node process (the cache is written at exit) running the built compile-cache.js.
import { execFile, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { tempDir, waitFor } from '@conch/test-support';
import { describe, expect, it } from 'vitest';
import { PACKAGE_DIR } from './test-support/harness.js';
import { WRAPPER_HEAD, WRAPPER_TAIL } from './compile-cache.js';

const RUNNER = pathToFileURL(join(PACKAGE_DIR, 'dist', 'compile-cache.js')).href;
const isRoot = process.getuid?.() === 0;

interface Run {
  state: string;
  cacheFile?: string;
  reason?: string;
  /** What the program printed (its stdout, minus the runner's report). */
  printed: string[];
}

/** Runs `file` through runWithCompileCache in a fresh node; the report is the last stdout line (at exit). */
function runFile(
  file: string,
  env: Record<string, string | undefined>,
  options: { wrapped?: boolean } = {},
): Promise<Run> {
  const script = `
    import { runWithCompileCache } from ${JSON.stringify(RUNNER)};
    globalThis[Symbol.for('test.import')] = (s) => import(new URL(s, ${JSON.stringify(pathToFileURL(file).href)}).href);
    const run = runWithCompileCache(${JSON.stringify(file)}, { writeAfterMs: 60_000, ...${JSON.stringify(options)} });
    process.on('exit', () => console.log(JSON.stringify(run)));`;
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--input-type=module', '-e', script],
      { env: { PATH: process.env.PATH, ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        if (error) return reject(new Error(`${error.message}\n${stderr}`));
        const lines = stdout.trim().split('\n');
        resolve({ ...(JSON.parse(lines.pop()!) as Omit<Run, 'printed'>), printed: lines });
      },
    );
  });
}

/** A CommonJS program that shows what it was given: require, module, __filename, import(). */
function program(value: string): string {
  return [
    `const { basename } = require('node:path');`,
    `const answer = ${JSON.stringify(value)};`,
    `module.exports.answer = answer;`,
    `console.log('answer', answer, basename(__filename), basename(__dirname) === basename(require('node:path').dirname(__filename)));`,
    `console.log('exports', module.exports === exports, typeof require.resolve);`,
    `globalThis[Symbol.for('test.import')]('./helper.mjs').then((m) => console.log('import', m.default));`,
    `try { throw new Error('where'); } catch (e) { console.log('line', /prog\\.cjs:(\\d+)/.exec(e.stack)[1]); }`,
    `function later() { return answer.length; }`,
    `setTimeout(() => later(), 0);`,
    `if (process.env.KEEP_RUNNING) setInterval(() => {}, 1000);`,
  ].join('\n');
}

function setup(): { dir: string; file: string; cache: string; env: Record<string, string> } {
  const dir = tempDir('conch-compile-cache-test-');
  const file = join(dir, 'prog.cjs');
  writeFileSync(file, program('first'));
  writeFileSync(join(dir, 'helper.mjs'), 'export default "helper ok";\n');
  const cache = join(dir, 'cache');
  return { dir, file, cache, env: { CONCH_COMPILE_CACHE: cache, TMPDIR: dir } };
}

const EXPECTED_FIRST = ['answer first prog.cjs true', 'exports true function', 'line 7', 'import helper ok'];

const cacheFiles = (cache: string) => readdirSync(cache).filter((f) => f.endsWith('.v8cache'));

describe('runWithCompileCache', () => {
  it('compiles from source and writes the cache at exit (0600 in a 0700 directory), then compiles from it', async () => {
    const { file, cache, env } = setup();
    const first = await runFile(file, env);
    expect(first.state).toBe('miss');
    expect(first.printed.sort()).toEqual([...EXPECTED_FIRST].sort());
    expect(cacheFiles(cache)).toHaveLength(1);
    expect(first.cacheFile).toBe(join(cache, cacheFiles(cache)[0]!));
    expect(statSync(cache).mode & 0o777).toBe(0o700);
    expect(statSync(first.cacheFile!).mode & 0o777).toBe(0o600);
    const second = await runFile(file, env);
    expect(second).toMatchObject({ state: 'hit', cacheFile: first.cacheFile });
    expect(second.printed.sort()).toEqual([...EXPECTED_FIRST].sort());
  });

  it('a file written wrapped (as the published bundle is) runs as it is, from source and then from its cache', async () => {
    const { file, cache, env } = setup();
    writeFileSync(file, `${WRAPPER_HEAD}${program('first')}${WRAPPER_TAIL}`);
    const first = await runFile(file, env, { wrapped: true });
    expect(first.state).toBe('miss');
    // The same module, and the same line numbers: the head shares the first line.
    expect(first.printed.sort()).toEqual([...EXPECTED_FIRST].sort());
    expect(cacheFiles(cache)).toHaveLength(1);
    const second = await runFile(file, env, { wrapped: true });
    expect(second).toMatchObject({ state: 'hit', cacheFile: first.cacheFile });
    expect(second.printed.sort()).toEqual([...EXPECTED_FIRST].sort());
  });

  it('`wrapped` on a file that is not wrapped fails at once, naming the file and what was expected', async () => {
    const { file, env } = setup();
    for (const text of [
      program('first'),
      `${WRAPPER_HEAD}${program('first')}`,
      `${program('first')}${WRAPPER_TAIL}`,
    ]) {
      writeFileSync(file, text);
      await expect(runFile(file, env, { wrapped: true })).rejects.toThrow(
        `${file}: expected a wrapped CommonJS module`,
      );
    }
  });

  it('a source changed to the same length gets its own cache and runs as written', async () => {
    const { file, cache, env } = setup();
    await runFile(file, env);
    // V8 would take the old cache for this source: it checks a cache against the source's length.
    writeFileSync(file, program('fresh'));
    const changed = await runFile(file, env);
    expect(changed.state).toBe('miss');
    expect(changed.printed).toContain('answer fresh prog.cjs true');
    expect(cacheFiles(cache)).toHaveLength(2);
    expect((await runFile(file, env)).state).toBe('hit');
  });

  it('a corrupt cache is refused by V8: the program runs from source and the cache is rewritten', async () => {
    const { file, cache, env } = setup();
    const first = await runFile(file, env);
    writeFileSync(first.cacheFile!, Buffer.alloc(4096, 7), { mode: 0o600 });
    const corrupt = await runFile(file, env);
    expect(corrupt.state).toBe('rejected');
    expect(corrupt.printed.sort()).toEqual([...EXPECTED_FIRST].sort());
    expect(cacheFiles(cache)).toEqual([basename(first.cacheFile!)]);
    expect(readFileSync(first.cacheFile!).equals(Buffer.alloc(4096, 7))).toBe(false);
    expect((await runFile(file, env)).state).toBe('hit');
  });

  it.each([
    ['NODE_DISABLE_COMPILE_CACHE=1', { NODE_DISABLE_COMPILE_CACHE: '1' }],
    ['CONCH_COMPILE_CACHE=0', { CONCH_COMPILE_CACHE: '0' }],
    ['CONCH_COMPILE_CACHE=off', { CONCH_COMPILE_CACHE: 'off' }],
  ])('%s turns it off: nothing read or written', async (_name, off) => {
    const { file, cache, env } = setup();
    await runFile(file, env);
    const run = await runFile(file, { ...env, ...off });
    expect(run.state).toBe('off');
    expect(run.reason).toContain(Object.entries(off)[0]![0]);
    expect(run.printed.sort()).toEqual([...EXPECTED_FIRST].sort());
    expect(cacheFiles(cache)).toHaveLength(1);
  });

  it('by default the cache goes in os.tmpdir()/conch-compile-cache-<uid>', async () => {
    const { dir, file } = setup();
    const run = await runFile(file, { TMPDIR: dir });
    expect(
      run.cacheFile?.startsWith(join(dir, `conch-compile-cache-${process.getuid!()}`, 'prog.cjs-')),
    ).toBe(true);
    expect(existsSync(run.cacheFile!)).toBe(true);
  });

  it('a directory writable by others, or a symlink, is not used', async () => {
    const { dir, file, cache, env } = setup();
    mkdirSync(cache, { mode: 0o700 });
    chmodSync(cache, 0o777);
    const open = await runFile(file, env);
    expect(open).toMatchObject({ state: 'off', reason: expect.stringContaining('writable by others') });
    chmodSync(cache, 0o770);
    expect((await runFile(file, env)).state).toBe('off');
    const real = join(dir, 'real');
    mkdirSync(real, { mode: 0o700 });
    const link = join(dir, 'link');
    symlinkSync(real, link);
    const linked = await runFile(file, { ...env, CONCH_COMPILE_CACHE: link });
    expect(linked).toMatchObject({ state: 'off', reason: expect.stringContaining('not a directory') });
    expect(readdirSync(real)).toEqual([]);
    expect(open.printed.sort()).toEqual([...EXPECTED_FIRST].sort());
  });

  it.skipIf(!isRoot)("another user's directory or cache file is not read", async () => {
    const { file, cache, env } = setup();
    const first = await runFile(file, env);
    // A cache file another user planted (here: chowned to uid 1) is ignored, and replaced.
    chownSync(first.cacheFile!, 1, 1);
    const planted = await runFile(file, env);
    expect(planted.state).toBe('miss');
    expect(statSync(first.cacheFile!).uid).toBe(0);
    chownSync(cache, 1, 1);
    const theirs = await runFile(file, env);
    expect(theirs).toMatchObject({ state: 'off', reason: expect.stringContaining('belongs to uid 1') });
  });

  it('a process that never exits normally still leaves its cache after writeAfterMs', async () => {
    const { file, cache, env } = setup();
    const script = `
      import { runWithCompileCache } from ${JSON.stringify(RUNNER)};
      globalThis[Symbol.for('test.import')] = (s) => import(new URL(s, ${JSON.stringify(pathToFileURL(file).href)}).href);
      runWithCompileCache(${JSON.stringify(file)}, { writeAfterMs: 200 });`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      env: { PATH: process.env.PATH, ...env, KEEP_RUNNING: '1' },
      stdio: 'ignore',
    });
    try {
      await waitFor(() => existsSync(cache) && cacheFiles(cache).length === 1, {
        what: 'the cache written while the program runs',
        timeoutMs: 30_000,
      });
    } finally {
      child.kill('SIGKILL');
    }
    // What the killed process wrote is a whole, valid cache.
    expect((await runFile(file, env)).state).toBe('hit');
  });

  it('stale caches of the same file are removed when a new one is written, fresh ones and other files kept', async () => {
    const { file, cache, env } = setup();
    const first = await runFile(file, env);
    const week = (Date.now() - 8 * 24 * 60 * 60 * 1000) / 1000;
    utimesSync(first.cacheFile!, week, week);
    const recent = join(cache, 'prog.cjs-0123456789abcdef0123456789abcdef.v8cache');
    writeFileSync(recent, 'x', { mode: 0o600 });
    const other = join(cache, 'other.cjs-0123456789abcdef0123456789abcdef.v8cache');
    writeFileSync(other, 'x', { mode: 0o600 });
    utimesSync(other, week, week);
    writeFileSync(file, program('again'));
    await runFile(file, env);
    expect(existsSync(first.cacheFile!)).toBe(false);
    expect(existsSync(recent)).toBe(true);
    expect(existsSync(other)).toBe(true);
    expect(cacheFiles(cache)).toHaveLength(3);
    expect(readFileSync(recent, 'utf8')).toBe('x');
  });
});
