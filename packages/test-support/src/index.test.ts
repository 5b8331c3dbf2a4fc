// Invariant: the shared helpers see real processes as the kernel does — zombies are gone, descendants follow parent links, environment cookies are inherited — and waitFor returns the awaited value or names what it waited for.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import {
  descendants,
  isAlive,
  processesMentioning,
  processesWithEnv,
  readPid,
  removeTempDirs,
  tempDir,
  waitFor,
} from './index.js';

afterAll(removeTempDirs);

describe('waitFor', () => {
  it('returns the first truthy value, sync or async', async () => {
    let n = 0;
    expect(await waitFor(() => (++n >= 3 ? n : 0))).toBe(3);
    expect(await waitFor(async () => 'ready', 'an async value')).toBe('ready');
  });

  it('names what it waited for on timeout', async () => {
    await expect(waitFor(() => false, { what: 'the moon', timeoutMs: 60 })).rejects.toThrow(
      'timed out after 60 ms waiting for the moon',
    );
  });
});

describe('processes', () => {
  it('finds a tagged grandchild, its parent links, and sees it gone (not a zombie) once killed', async () => {
    const tag = `${process.pid}.${Date.now() % 100000}`;
    const shell = spawn('/bin/sh', ['-c', `sleep 3${tag} & wait`], { stdio: 'ignore' });
    const shellExit = new Promise((resolve) => shell.on('exit', resolve));
    // The shell's own command line mentions the tag too: the sleep is the other one.
    const sleeper = await waitFor(
      () => processesMentioning(`sleep 3${tag}`).find((pid) => pid !== shell.pid),
      'the tagged sleep',
    );
    expect(processesMentioning(`sleep 3${tag}`).sort()).toEqual([shell.pid, sleeper].sort());
    expect(isAlive(sleeper)).toBe(true);
    expect(descendants(shell.pid!)).toContain(sleeper);
    expect(descendants(process.pid)).toEqual(expect.arrayContaining([shell.pid, sleeper]));
    process.kill(sleeper, 'SIGKILL');
    await waitFor(() => !isAlive(sleeper), 'the sleep to die');
    await shellExit;
    expect(processesMentioning(`sleep 3${tag}`)).toEqual([]);
    expect(isAlive(shell.pid!)).toBe(false);
  });

  it('finds the processes that inherited an environment cookie, and none once they are gone', async () => {
    const cookie = `${process.pid}-${Date.now() % 100000}`;
    const shell = spawn('/bin/sh', ['-c', 'sleep 30 & wait'], {
      stdio: 'ignore',
      env: { ...process.env, CONCH_TEST_COOKIE: cookie },
    });
    const shellExit = new Promise((resolve) => shell.on('exit', resolve));
    const found = await waitFor(() => {
      const pids = processesWithEnv('CONCH_TEST_COOKIE', cookie);
      return pids.length === 2 ? pids : undefined;
    }, 'the shell and its sleep');
    expect(found).toContain(shell.pid);
    expect(processesWithEnv('CONCH_TEST_COOKIE', `${cookie}-other`)).toEqual([]);
    for (const pid of found) process.kill(pid, 'SIGKILL');
    await shellExit;
    await waitFor(() => processesWithEnv('CONCH_TEST_COOKIE', cookie).length === 0, 'the cookie to be gone');
  });

  it('a zombie is not alive, though /proc still lists it', async () => {
    // A background child waits until its shell has exec'd sleep (which never reaps), writes its pid, exits.
    const dir = tempDir();
    const child = `until [ "$(cat /proc/$PPID/comm)" = sleep ]; do :; done; echo $$ > ${dir}/pid`;
    const parent = spawn('/bin/sh', ['-c', `sh -c '${child}' & exec sleep 30`], { stdio: 'ignore' });
    const parentExit = new Promise((resolve) => parent.on('exit', resolve));
    const zombie = await waitFor(() => readPid(join(dir, 'pid')), 'the pid file');
    await waitFor(() => readFileSync(`/proc/${zombie}/stat`, 'latin1').includes(') Z '), 'the zombie state');
    expect(isAlive(zombie)).toBe(false);
    expect(descendants(parent.pid!)).not.toContain(zombie);
    expect(isAlive(parent.pid!)).toBe(true);
    parent.kill('SIGKILL');
    await parentExit;
    expect(isAlive(2 ** 22 + 1)).toBe(false);
  });
});

describe('files', () => {
  it('reads a pid file once written and removes every temp dir it made', () => {
    const dir = tempDir();
    expect(readPid(join(dir, 'pid'))).toBeUndefined();
    writeFileSync(join(dir, 'pid'), 'x\n');
    expect(readPid(join(dir, 'pid'))).toBeUndefined();
    writeFileSync(join(dir, 'pid'), '4242\n');
    expect(readPid(join(dir, 'pid'))).toBe(4242);
    removeTempDirs();
    expect(existsSync(dir)).toBe(false);
  });

  it('removes the temp and scratch dirs a process made when it exits, even without removeTempDirs', async () => {
    // A worker that never reaches afterAll (or a file that forgot it): its dirs go with its process.
    const out = tempDir('conch-test-support-out-');
    const script = [
      // The built module (the test task builds first): node runs it as the packages' tests import it.
      `const { tempDir, scratchDir, removeTempDirs } = await import(${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)});`,
      `const { writeFileSync, mkdirSync, existsSync } = await import('node:fs');`,
      // A config's scratch outlives removeTempDirs (the files' afterAll), and goes at exit.
      `const scratch = scratchDir('conch-scratch-');`,
      `removeTempDirs();`,
      `if (!existsSync(scratch)) throw new Error('removeTempDirs removed the scratch dir');`,
      `const made = [tempDir(), tempDir('conch-other-'), scratch];`,
      `mkdirSync(made[0] + '/deep/er', { recursive: true });`,
      `writeFileSync(made[0] + '/deep/er/file', 'x');`,
      `writeFileSync(scratch + '/state.json', '{}');`,
      `writeFileSync(${JSON.stringify(join(out, 'made'))}, JSON.stringify(made));`,
    ].join('\n');
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    const made = JSON.parse(readFileSync(join(out, 'made'), 'utf8')) as string[];
    expect(made).toHaveLength(3);
    for (const dir of made) expect(existsSync(dir)).toBe(false);
  });

  // Another signal-exit user in the process (conch's onHostExit: a registry, a process manager)
  // registered before the first directory, after it, or none.
  it.each(['none', 'before', 'after'] as const)(
    'removes them when the process is sent SIGTERM (how vitest stops a worker), and still ends by it; another exit hook: %s',
    async (other) => {
      // SIGTERM ends a process without 'exit': a worker vitest stopped left every temp dir it made.
      const out = tempDir('conch-test-support-out-');
      const hook = [
        `const { onExit } = await import('signal-exit');`,
        `onExit(() => writeFileSync(${JSON.stringify(join(out, 'hook'))}, 'ran'), { alwaysLast: true });`,
      ];
      const script = [
        `const { tempDir, scratchDir } = await import(${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)});`,
        `const { writeFileSync, mkdirSync } = await import('node:fs');`,
        ...(other === 'before' ? hook : []),
        `const made = [tempDir(), scratchDir('conch-scratch-')];`,
        ...(other === 'after' ? hook : []),
        `mkdirSync(made[0] + '/deep', { recursive: true });`,
        `writeFileSync(made[0] + '/deep/file', 'x');`,
        `writeFileSync(${JSON.stringify(join(out, 'made'))}, JSON.stringify(made));`,
        `setInterval(() => {}, 1000);`,
      ].join('\n');
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
        stdio: ['ignore', 'ignore', 'pipe'],
        cwd: dirname(fileURLToPath(import.meta.url)),
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const closed = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
        child.on('close', (code, signal) => resolve([code, signal])),
      );
      const made = await waitFor(() => {
        try {
          return JSON.parse(readFileSync(join(out, 'made'), 'utf8')) as string[];
        } catch {
          return undefined;
        }
      }, 'the child to make its dirs');
      for (const dir of made) expect(existsSync(dir)).toBe(true);
      child.kill('SIGTERM');
      expect({ ended: await closed, stderr }).toEqual({ ended: [null, 'SIGTERM'], stderr: '' });
      for (const dir of made) expect(existsSync(dir)).toBe(false);
      expect(existsSync(join(out, 'hook'))).toBe(other !== 'none');
    },
  );
});
