import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { hostEnvironment, isNodeEnvironment } from './host-env.js';
import { loadSpawner, NATIVE_SPAWN_ADDON, type NativeSpawnModule } from './native-spawn.js';
import { ProcessManager } from './process-manager.js';

const names: string[] = [];
function name(suffix: string): string {
  const n = `CONCH_T_HOSTENV_${suffix}_${process.pid}`;
  names.push(n);
  return n;
}

afterEach(() => {
  for (const n of names.splice(0)) delete process.env[n];
});

function addon(): NativeSpawnModule {
  const spawner = loadSpawner(process.env, NATIVE_SPAWN_ADDON);
  if (spawner.kind !== 'posix_spawn') throw new Error(`the addon did not load: ${spawner.reason}`);
  return spawner.module;
}

describe('envGeneration (the addon)', () => {
  it('moves when a variable is added, changed or removed, and stays while nothing is', () => {
    const gen = addon().envGeneration!;
    const a = name('GEN');
    const g0 = gen();
    expect(gen()).toBe(g0);
    process.env[a] = 'one';
    const g1 = gen();
    expect(g1).not.toBe(g0);
    expect(gen()).toBe(g1);
    process.env[a] = 'two';
    const g2 = gen();
    expect(g2).not.toBe(g1);
    process.env.PATH = `${process.env.PATH}`; // the same text again: either answer is right
    const g3 = gen();
    delete process.env[a];
    expect(gen()).not.toBe(g3);
  });
});

describe('hostEnvironment', () => {
  it('follows every kind of change to process.env between reads', () => {
    const [a, b, c, d] = [name('A'), name('B'), name('C'), name('D')];
    expect(hostEnvironment()[a]).toBeUndefined();
    process.env[a] = 'first';
    expect(hostEnvironment()[a]).toBe('first');
    process.env[a] = 'second'; // same length, same name
    expect(hostEnvironment()[a]).toBe('second');
    Object.assign(process.env, { [b]: 'bee', [c]: 'sea' });
    expect(hostEnvironment()).toMatchObject({ [a]: 'second', [b]: 'bee', [c]: 'sea' });
    delete process.env[b];
    const read = hostEnvironment();
    expect(b in read).toBe(false);
    expect(read[c]).toBe('sea');
    // A value node turns into a string, as process.env does.
    (process.env as Record<string, unknown>)[d] = 42;
    expect(hostEnvironment()[d]).toBe('42');
    // process.loadEnvFile writes through setenv too.
    const dir = mkdtempSync(join(tmpdir(), 'conch-hostenv-'));
    try {
      const file = join(dir, '.env');
      writeFileSync(file, `${c}=from-file\n`);
      // loadEnvFile does not override a variable that is set: drop it first.
      delete process.env[c];
      process.loadEnvFile(file);
      expect(hostEnvironment()[c]).toBe('from-file');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('hands out a new object each time: changing one does not change the next', () => {
    const a = name('COPY');
    process.env[a] = 'kept';
    // The first read after a change, and the ones from the kept copy after it.
    for (let i = 0; i < 3; i++) {
      const read = hostEnvironment();
      expect(read[a]).toBe('kept');
      expect(read.PATH).toBe(process.env.PATH);
      read[a] = 'changed';
      read.PATH = undefined;
    }
  });

  it('reads a process.env that is not node’s own on every call (a test runner’s copy)', () => {
    const saved = process.env;
    const proto = Object.getPrototypeOf(saved) as object;
    const copies: Record<string, string | undefined>[] = [
      { ...saved },
      Object.assign(Object.create(proto) as Record<string, string | undefined>, saved),
      Object.assign(Object.create(null) as Record<string, string | undefined>, saved),
    ];
    const a = name('FAKE');
    try {
      for (const copy of copies) {
        process.env = copy;
        expect(hostEnvironment()[a]).toBeUndefined();
        copy[a] = 'only in the copy'; // never reaches environ: the addon's number does not move
        expect(hostEnvironment()[a]).toBe('only in the copy');
        copy[a] = 'changed in the copy';
        expect(hostEnvironment()[a]).toBe('changed in the copy');
        delete copy[a];
        expect(hostEnvironment()[a]).toBeUndefined();
      }
    } finally {
      process.env = saved;
    }
    expect(hostEnvironment()[a]).toBeUndefined();
  });

  it('tells node’s own process.env from copies and wrappers', () => {
    expect(isNodeEnvironment(process.env)).toBe(true);
    // A transparent proxy reads and writes node's object: as good as it.
    expect(isNodeEnvironment(new Proxy(process.env, {}))).toBe(true);
    expect(isNodeEnvironment({ ...process.env })).toBe(false);
    expect(isNodeEnvironment(Object.create(Object.getPrototypeOf(process.env) as object) as object)).toBe(
      false,
    );
    expect(isNodeEnvironment(Object.create(null) as object)).toBe(false);
    // A frozen prototype cannot be probed: not judged node's.
    expect(isNodeEnvironment(Object.create(Object.freeze({})) as object)).toBe(false);
  });

  it('in a worker thread reads the worker’s own process.env (it is not environ)', async () => {
    const built = join(import.meta.dirname, '..', 'dist', 'host-env.js');
    expect(existsSync(built), `${built} (pnpm build)`).toBe(true);
    const a = name('WORKER');
    const worker = new Worker(
      `const { parentPort } = require('node:worker_threads');
       import(${JSON.stringify(pathToFileURL(built).href)}).then(({ hostEnvironment }) => {
         const before = hostEnvironment()[${JSON.stringify(a)}];
         process.env[${JSON.stringify(a)}] = 'in the worker';
         const after = hostEnvironment()[${JSON.stringify(a)}];
         parentPort.postMessage({ before: before ?? null, after: after ?? null });
       });`,
      { eval: true },
    );
    const answer = await new Promise<{ before: string | null; after: string | null }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await worker.terminate();
    expect(answer).toEqual({ before: null, after: 'in the worker' });
    expect(process.env[a]).toBeUndefined();
  });
});

describe("hostEnvironment with a hider (a sandbox profile's credential filter)", () => {
  it('leaves what the hider hides undefined, and asks it again only when the environment changed', () => {
    const [secret, plain, later] = [name('HIDE_SECRET'), name('HIDE_PLAIN'), name('HIDE_LATER')];
    process.env[secret] = 'x';
    process.env[plain] = 'harmless';
    const odd = name('HIDE_ODD');
    process.env[odd] = 'quote " backslash \\ newline \n tab \t euro € null-ish null';
    const asked: string[] = [];
    const hide = (key: string, value?: string) => {
      asked.push(key);
      return key === secret || value === 'sk-like';
    };
    const first = hostEnvironment(hide);
    expect(first[secret]).toBeUndefined();
    expect(secret in first).toBe(true); // undefined, as the spawn's difference drops it
    expect(first[plain]).toBe('harmless');
    expect(asked).toContain(plain);
    // Nothing changed: the hider's answers are kept with the copy, and the copy is new each time.
    asked.length = 0;
    const second = hostEnvironment(hide);
    expect(asked).toEqual([]);
    expect(second).toEqual(first);
    expect(secret in second).toBe(true); // the kept copy (JSON-built) keeps the hidden key
    for (const key in process.env) if (key !== secret) expect(second[key]).toBe(process.env[key]);
    expect(second[odd]).toBe('quote " backslash \\ newline \n tab \t euro € null-ish null');
    second[plain] = 'changed by the caller';
    expect(hostEnvironment(hide)[plain]).toBe('harmless');
    // A value that becomes a credential's, and a new variable: judged again.
    process.env[plain] = 'sk-like';
    process.env[later] = 'new';
    const third = hostEnvironment(hide);
    expect(asked).toContain(plain);
    expect(third[plain]).toBeUndefined();
    expect(third[later]).toBe('new');
    // Without the hider nothing is hidden, and another hider gets its own answers.
    expect(hostEnvironment()[secret]).toBe('x');
    expect(hostEnvironment()[plain]).toBe('sk-like');
    const other = hostEnvironment((key) => key === later);
    expect(other[later]).toBeUndefined();
    expect(other[secret]).toBe('x');
    expect(hostEnvironment(hide)[later]).toBe('new');
  });

  it('asks the hider on every call for a process.env that is not node’s own', () => {
    const saved = process.env;
    const a = name('HIDE_COPY');
    let asked = 0;
    const hide = (key: string) => {
      asked++;
      return key === a;
    };
    try {
      process.env = { ...saved, [a]: 'in the copy' };
      expect(hostEnvironment(hide)[a]).toBeUndefined();
      const once = asked;
      expect(hostEnvironment(hide)[a]).toBeUndefined();
      expect(asked).toBe(once * 2);
    } finally {
      process.env = saved;
    }
  });
});

describe('a spawn sees process.env as it is at the spawn', () => {
  it('set, changed and removed between spawns, with and without the supervisor', async () => {
    for (const supervisor of [true, false]) {
      const manager = new ProcessManager({ supervisor });
      const a = name(`SPAWN_${supervisor ? 'SUP' : 'LOCAL'}`);
      try {
        const show = async () =>
          (await manager.spawn('sh', ['-c', `printf '%s' "\${${a}-unset}"`]).result).stdout.head;
        expect(await show()).toBe('unset');
        process.env[a] = 'one';
        expect(await show()).toBe('one');
        process.env[a] = 'two';
        expect(await show()).toBe('two');
        expect(await show()).toBe('two');
        delete process.env[a];
        expect(await show()).toBe('unset');
      } finally {
        await manager.dispose();
      }
    }
  });
});
