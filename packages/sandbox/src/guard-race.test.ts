// A protection belongs to a path for the sandbox's life: while a sandboxed process writes and reads
// as fast as it can, the host replaces each protected and masked path >= 1,000 times by every method
// (rename over, unlink and recreate, in-place rewrite, symlink swap, its directory renamed away and
// back): 0 bytes reach a protected file, 0 secret bytes are read. The same race without the guard
// (bubblewrap's mounts alone) loses both at once: the test can fail.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { guardAvailability } from './guard.js';
import { bwrap, rulesFor, runGuarded, tempWorkspace } from './test-support/guarded.js';

const ready = bwrap !== undefined && guardAvailability().available;
const maybe = ready ? describe : describe.skip;
if (!ready && process.env.CI) throw new Error('CI needs bubblewrap and the guard for the sandbox race suite');

const ROUNDS = 1000;

/** The sandboxed hammer: appends to every protected file and reads every masked one until `stop` exists. */
function hammer(
  protectedFiles: string[],
  maskedFiles: string[],
  protectedDirs: string[],
  started: string,
  stop: string,
): string {
  return `python3 - <<'PY'
import os, json
protected = ${JSON.stringify(protectedFiles)}
masked = ${JSON.stringify(maskedFiles)}
dirs = ${JSON.stringify(protectedDirs)}
stop = ${JSON.stringify(stop)}
open(${JSON.stringify(started)}, 'w').close()
wrote = leaked = tries = 0
while not os.path.exists(stop):
    tries += 1
    for p in protected:
        try:
            fd = os.open(p, os.O_WRONLY | os.O_APPEND)
            try:
                wrote += os.write(fd, b'[core]\\n\\tfsmonitor = planted\\n')
            finally:
                os.close(fd)
        except OSError:
            pass
    for p in masked:
        try:
            with open(p, 'rb') as f:
                if b'SECRET' in f.read():
                    leaked += 1
        except OSError:
            pass
    for d in dirs:
        try:
            fd = os.open(os.path.join(d, 'pre-commit'), os.O_WRONLY | os.O_CREAT, 0o755)
            wrote += os.write(fd, b'#!/bin/sh\\necho planted\\n')
            os.close(fd)
        except OSError:
            pass
print(json.dumps({'wrote': wrote, 'leaked': leaked, 'tries': tries}))
PY`;
}

type Method = 'rename-over' | 'unlink-recreate' | 'rewrite-in-place' | 'symlink-swap' | 'dir-renamed';

/** One replacement of `file` from outside by `method` (content: `text`). */
function replace(file: string, text: string, method: Method, scratch: string): void {
  switch (method) {
    case 'rename-over': {
      const tmp = `${file}.conch-test-tmp`;
      writeFileSync(tmp, text);
      renameSync(tmp, file);
      break;
    }
    case 'unlink-recreate':
      rmSync(file, { force: true });
      writeFileSync(file, text);
      break;
    case 'rewrite-in-place':
      writeFileSync(file, text);
      break;
    case 'symlink-swap': {
      const target = join(scratch, `target-${Math.random().toString(36).slice(2)}`);
      writeFileSync(target, text);
      const link = `${file}.conch-test-link`;
      symlinkSync(target, link);
      renameSync(link, file);
      break;
    }
    case 'dir-renamed': {
      const dir = join(file, '..');
      renameSync(dir, `${dir}.away`);
      writeFileSync(join(`${dir}.away`, file.slice(dir.length + 1)), text);
      renameSync(`${dir}.away`, dir);
      break;
    }
  }
}

async function race(method: Method, guard: boolean) {
  const ws = tempWorkspace();
  const home = tempWorkspace('conch-guard-home-');
  const scratch = tempWorkspace('conch-guard-scratch-');
  const files = {
    gitConfig: join(ws, '.git', 'config'),
    envFile: join(ws, '.env'),
    nestedEnv: join(ws, 'app', '.env.local'),
    npmrc: join(home, 'npm', '.npmrc'),
  };
  mkdirSync(join(ws, '.git', 'hooks'), { recursive: true });
  mkdirSync(join(ws, 'app'), { recursive: true });
  mkdirSync(join(home, 'npm'), { recursive: true });
  writeFileSync(files.gitConfig, '[core]\n\tbare = false\n');
  writeFileSync(files.envFile, 'SECRET=0\n');
  writeFileSync(files.nestedEnv, 'SECRET=0\n');
  writeFileSync(files.npmrc, '//registry.npmjs.org/:_authToken=SECRET0\n');
  const started = join(scratch, 'started');
  const stop = join(scratch, 'stop');
  const rules = rulesFor(ws, {
    readOnly: [files.gitConfig, join(ws, '.git', 'hooks')],
    masked: [files.envFile, files.nestedEnv, files.npmrc],
  });
  const script = hammer(
    [files.gitConfig],
    [files.envFile, files.nestedEnv, files.npmrc],
    [join(ws, '.git', 'hooks')],
    started,
    stop,
  );
  const proc = runGuarded(rules, script, {
    noGuard: !guard,
    profile: {
      kind: 'workspace-write',
      writableRoots: [ws, scratch, join(home, 'npm')],
      readOnlyPaths: rules.readOnly,
      maskedPaths: rules.masked,
    },
  });
  // Replacements start once the hammer is in its loop (it says so with a file), not after a delay.
  const early = proc.done.then(() => 'ended' as const);
  while (!existsSync(started)) {
    if ((await Promise.race([early, new Promise((r) => setTimeout(r, 20, 'wait'))])) === 'ended') break;
  }
  for (let round = 0; round < ROUNDS; round++) {
    const secret = `SECRET=${round + 1}\n`;
    replace(files.gitConfig, '[core]\n\tbare = false\n', method, scratch);
    replace(files.envFile, secret, method, scratch);
    replace(files.nestedEnv, secret, method, scratch);
    replace(files.npmrc, `//registry.npmjs.org/:_authToken=${secret}`, method, scratch);
    if (round % 25 === 0) await new Promise((r) => setImmediate(r));
  }
  writeFileSync(stop, '');
  const result = await proc.done;
  const line = result.stdout.trim().split('\n').pop() || '{}';
  const counts = JSON.parse(line) as { wrote?: number; leaked?: number; tries?: number };
  const config = readFileSync(files.gitConfig, 'utf8');
  for (const dir of [ws, home, scratch]) rmSync(dir, { recursive: true, force: true });
  return {
    wrote: counts.wrote ?? -1,
    leaked: counts.leaked ?? -1,
    tries: counts.tries ?? 0,
    planted: config.includes('planted'),
    stderr: result.stderr,
  };
}

maybe('the guard holds every protection while the host replaces the files', () => {
  for (const method of [
    'rename-over',
    'unlink-recreate',
    'rewrite-in-place',
    'symlink-swap',
    'dir-renamed',
  ] as const) {
    it(`${method}: ${ROUNDS} replacements, nothing written, nothing read`, { timeout: 180_000 }, async () => {
      const r = await race(method, true);
      expect(r.tries, r.stderr).toBeGreaterThan(0);
      expect({ wrote: r.wrote, leaked: r.leaked, planted: r.planted }).toEqual({
        wrote: 0,
        leaked: 0,
        planted: false,
      });
    });
  }

  it('without the guard, bubblewrap mounts alone lose the same race', { timeout: 180_000 }, async () => {
    const r = await race('rename-over', false);
    expect(r.tries, r.stderr).toBeGreaterThan(0);
    expect(r.wrote + r.leaked).toBeGreaterThan(0);
  });
});
