// Invariant: a sandbox heals from what happens outside it. Whatever it stood on (its private /tmp,
// the workspace, the proxy's socket, bwrap itself) can be deleted, replaced or come back while the
// session lives; the command that meets the damage gets a clear error or a new sandbox, and the
// next one always works.
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findBwrap, type SandboxProfile } from '@conch/sandbox';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProcessManager } from './process-manager.js';
import { survivors } from './test-support/procs.js';

const bwrap = findBwrap();

describe.runIf(bwrap || process.env.CI)('a sandbox heals from changes outside it', () => {
  let ws: string;
  let temp: string;
  let manager: ProcessManager;
  let sandbox: SandboxProfile;
  const savedPath = process.env.PATH;

  beforeEach(() => {
    ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-heal-ws-')));
    temp = realpathSync(mkdtempSync(join(tmpdir(), 'conch-heal-temp-')));
    manager = new ProcessManager({
      cwd: ws,
      tempDir: () => temp,
      killGraceMs: 300,
      network: { decide: async () => ({ allowed: true }) },
    });
    sandbox = { kind: 'workspace-write', writableRoots: [ws], readOnlyPaths: [], network: 'proxy' };
  });
  afterEach(async () => {
    process.env.PATH = savedPath;
    await manager.dispose();
    expect(survivors(manager.cookiePrefix)).toEqual([]);
    rmSync(ws, { recursive: true, force: true });
    rmSync(temp, { recursive: true, force: true });
  });

  const run = (script: string) => manager.spawn('/bin/bash', ['-c', script], { sandbox, cwd: ws }).result;
  const ok = async (script: string, stdout: string) => {
    const res = await run(script);
    expect({ code: res.exitCode, out: res.stdout.head, err: res.stderr.head }).toEqual({
      code: 0,
      out: stdout,
      err: '',
    });
    return res;
  };
  const killSupervisors = () => {
    for (const pid of manager.supervisorPids()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  };

  it.each([
    ['once', 1],
    ['twice in a row', 2],
  ])('its private /tmp deleted from outside (%s): the next command writes to /tmp', async (_n, times) => {
    await ok('echo a > /tmp/a && cat /tmp/a', 'a\n');
    for (let i = 0; i < times; i++) {
      rmSync(join(temp, 'sandbox-tmp'), { recursive: true, force: true });
      await ok(`echo b${i} > /tmp/b && cat /tmp/b`, `b${i}\n`);
    }
    // and the new /tmp is a directory the host can see (what lands there is not lost)
    expect(readFileSync(join(temp, 'sandbox-tmp', 'b'), 'utf8')).toBe(`b${times - 1}\n`);
  });

  it('the workspace deleted and made again: commands run in the new one, and their files land there', async () => {
    await ok('echo one > one.txt && pwd', `${ws}\n`);
    rmSync(ws, { recursive: true, force: true });
    mkdirSync(ws);
    await ok('pwd && echo two > two.txt && cat two.txt', `${ws}\ntwo\n`);
    expect(readFileSync(join(ws, 'two.txt'), 'utf8')).toBe('two\n');
    // moved aside and a new one put in its place: the same
    const aside = `${ws}-aside`;
    try {
      rmSync(aside, { recursive: true, force: true });
      mkdirSync(aside);
      rmSync(ws, { recursive: true, force: true });
      mkdirSync(ws);
      await ok('echo three > three.txt && ls', 'three.txt\n');
      expect(readFileSync(join(ws, 'three.txt'), 'utf8')).toBe('three\n');
    } finally {
      rmSync(aside, { recursive: true, force: true });
    }
  });

  it("the proxy's socket directory removed and the supervisor killed: the next commands get a new proxy", async () => {
    await ok('echo n0', 'n0\n');
    rmSync(join(temp, 'net'), { recursive: true, force: true });
    killSupervisors();
    // the call that meets the dead supervisor may fail with its reason; never an empty success
    const first = await run('echo n1');
    if (first.exitCode === 0) expect(first.stdout.head).toBe('n1\n');
    else expect(first.supervisorLost ?? first.spawnError?.message).toBeTruthy();
    await ok('echo n2', 'n2\n');
    await ok('echo n3', 'n3\n');
  });

  it('the supervisor killed after each step of a damage sequence: every later command works', async () => {
    await ok('echo s0', 's0\n');
    const steps = [
      () => rmSync(join(temp, 'sandbox-tmp'), { recursive: true, force: true }),
      () => {
        rmSync(ws, { recursive: true, force: true });
        mkdirSync(ws);
      },
      () => rmSync(join(temp, 'net'), { recursive: true, force: true }),
    ];
    for (const [i, step] of steps.entries()) {
      step();
      killSupervisors();
      const meets = await run(`echo m${i}`);
      if (meets.exitCode === 0) expect(meets.stdout.head).toBe(`m${i}\n`);
      else expect(meets.supervisorLost ?? meets.spawnError?.message).toBeTruthy();
      await ok(`echo s${i + 1} > /tmp/s && cat /tmp/s && echo w > w${i}.txt`, `s${i + 1}\n`);
      expect(readFileSync(join(ws, `w${i}.txt`), 'utf8')).toBe('w\n');
    }
  });

  it('bwrap gone from PATH and back: the calls meanwhile say the sandbox is unavailable, the next ones work', async () => {
    // A PATH of our own holding a link to bwrap, so the test can remove it without touching the machine.
    const bin = join(temp, 'bin');
    mkdirSync(bin);
    symlinkSync(bwrap as string, join(bin, 'bwrap'));
    process.env.PATH = `${bin}:/nonexistent-conch-test`;
    await ok('echo b0', 'b0\n');
    unlinkSync(join(bin, 'bwrap'));
    killSupervisors();
    let refused = 0;
    for (let i = 0; i < 3; i++) {
      const res = await run(`echo gone${i}`);
      // never run outside the sandbox, never an empty success
      expect(res.exitCode === 0 && res.stdout.head === '').toBe(false);
      if (res.exitCode !== 0 || res.spawnError) {
        refused++;
        expect(res.stdout.head).toBe('');
      }
    }
    expect(refused).toBeGreaterThanOrEqual(2);
    symlinkSync(bwrap as string, join(bin, 'bwrap'));
    await ok('echo back', 'back\n');
    await ok('echo again > again.txt && read -r line < again.txt && echo "$line"', 'again\n');
  });
});
