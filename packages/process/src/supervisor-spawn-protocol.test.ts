// Invariant: what the supervisor protocol saves per spawn changes nothing a command sees — each child gets exactly its own env (the supervisor holds a base and each request carries only its difference: added, changed and removed keys, concurrent spawns each their own), and a sandboxed child's pid is its host pid.
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@conch/test-support';
import { findBwrap, type SandboxProfile } from '@conch/sandbox';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProcessManager } from './process-manager.js';
import { envDifference } from './supervisor-client.js';
import { SupervisorChildren } from './supervisor-children.js';
import type { SpawnRequest } from './supervisor-protocol.js';
import { survivors } from './test-support/procs.js';

const bwrap = findBwrap();
const COOKIE = 'CONCH_PROC_COOKIE';

describe('envDifference over an env layered on process.env', () => {
  // In a test worker (and wherever process.env is not node's own object) for...in lists a key the
  // layer shadows twice: counting keys must not stand in for looking each one up.
  it.each(['CI', 'CONCH_TEST_SHADOWED', 'PATH'])(
    'a key removed since the base is unset, %s shadowed',
    (shadowed) => {
      const before = process.env[shadowed];
      process.env[shadowed] ??= 'host';
      try {
        const first = Object.create(process.env) as Record<string, string | undefined>;
        first[shadowed] = 'call';
        first.BASH_ENV = '/tmp/safe-rm.sh';
        first.ONLY_FIRST = '1';
        const { base } = envDifference(first, undefined);
        const second = Object.create(process.env) as Record<string, string | undefined>;
        second[shadowed] = 'call';
        const { fields } = envDifference(second, base);
        expect(fields.envBase).toBeUndefined();
        expect([...(fields.envUnset ?? [])].sort()).toEqual(['BASH_ENV', 'ONLY_FIRST']);
        const children = new SupervisorChildren(() => undefined, false);
        children.env({
          t: 'spawn',
          id: 1,
          file: 'x',
          args: [],
          cwd: '/',
          env: {},
          envBase: Object.fromEntries(base),
          stdin: 'ignore',
          capture: false,
        });
        const rebuilt = children.env({
          t: 'spawn',
          id: 2,
          file: 'x',
          args: [],
          cwd: '/',
          ...fields,
          stdin: 'ignore',
          capture: false,
        });
        expect(rebuilt.BASH_ENV).toBeUndefined();
        expect(rebuilt[shadowed]).toBe('call');
      } finally {
        if (before === undefined) delete process.env[shadowed];
        else process.env[shadowed] = before;
      }
    },
  );
});

describe('env difference (host and supervisor sides)', () => {
  it('a sequence of envs, each reconstructed exactly from the base and its difference', () => {
    const supervisor = new SupervisorChildren(() => {}, false);
    let base: ReadonlyMap<string, string> | undefined;
    let seed = 7;
    // mulberry32: deterministic, and every bit random (unlike a bare LCG's low bits).
    const rand = (n: number) => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) % n;
    };
    let removals = 0;
    let rebases = 0;
    let previous: Parameters<typeof envDifference>[2];
    let current: Record<string, string> = {};
    for (let i = 0; i < 60; i++) current[`K${i}`] = `v${i}`;
    for (let step = 0; step < 300; step++) {
      const next: Record<string, string> = { ...current };
      // Mostly small changes (a per-call variable, one added or removed), sometimes a whole new env.
      const kind = rand(10);
      if (kind === 0) {
        for (const key of Object.keys(next)) if (rand(2) === 0) delete next[key];
        for (let j = 0; j < 40; j++) next[`N${step}_${j}`] = String(rand(1000));
      } else {
        next[`K${rand(80)}`] = `w${step}`;
        if (rand(2) === 0) delete next[`K${rand(80)}`];
        next[COOKIE] = `c${step}`;
      }
      // The host's env shape: inherited keys, shadowed with undefined where removed.
      const env = Object.create(current) as Record<string, string | undefined>;
      for (const key in current) if (!(key in next)) env[key] = undefined;
      for (const key in next) if (current[key] !== next[key]) env[key] = next[key];
      const { fields, base: after } = envDifference(env, base, previous);
      previous = fields;
      removals += fields.envUnset?.length ?? 0;
      if (fields.envBase) rebases++;
      else
        expect(Object.keys(fields.env).length + (fields.envUnset?.length ?? 0)).toBeLessThanOrEqual(
          8 + (base!.size >> 2),
        );
      base = after;
      const request = {
        t: 'spawn',
        id: step,
        file: 'x',
        args: [],
        cwd: '/',
        stdin: 'ignore',
        capture: false,
        ...fields,
      };
      expect(supervisor.env(request as SpawnRequest)).toEqual(next);
      if (fields.envBase) expect(Object.fromEntries(base)).toEqual(fields.envBase);
      current = next;
    }
    expect(rebases).toBeGreaterThan(1);
    expect(removals).toBeGreaterThan(20);
    expect(rebases).toBeLessThan(100);
  });

  /** Sends `envs` in turn as the client does; what each request carried, each checked exact. */
  function send(envs: Record<string, string>[]) {
    const supervisor = new SupervisorChildren(() => {}, false);
    let base: ReadonlyMap<string, string> | undefined;
    let previous: Parameters<typeof envDifference>[2];
    return envs.map((env, id) => {
      const { fields, base: after } = envDifference(env, base, previous);
      base = after;
      previous = fields;
      const request = { t: 'spawn', id, file: 'x', args: [], cwd: '/', stdin: 'ignore', capture: false };
      expect(supervisor.env({ ...request, ...fields } as SpawnRequest)).toEqual(env);
      return fields;
    });
  }
  const host: Record<string, string> = {};
  for (let i = 0; i < 60; i++) host[`H${i}`] = `h${i}`;
  // What a tool sets on every call (cli_based_tool's pager and prompt variables, say).
  const tool: Record<string, string> = {};
  for (const name of ['TERM', 'PAGER', 'GIT_PAGER', 'LESS', 'EDITOR', 'VISUAL', 'PIP_NO_INPUT', 'CI'])
    tool[name] = `${name.toLowerCase()}-value`;
  const call = (i: number, extra: Record<string, string> = tool) => ({
    ...host,
    ...extra,
    [COOKIE]: `c${i}`,
  });

  it.each([
    ['added', [host, call(1), call(2), call(3), call(4), call(5)]],
    [
      'changed',
      [
        { ...host, ...Object.fromEntries(Object.keys(tool).map((k) => [k, 'old'])) },
        call(1),
        call(2),
        call(3),
      ],
    ],
    [
      'removed',
      [
        { ...host, ...tool, WARM_A: '1', WARM_B: '2', WARM_C: '3', WARM_D: '4' },
        call(1),
        call(2),
        call(3),
        call(4),
      ],
    ],
  ])(
    'a difference every call repeats (%s keys) is sent once as the new base, then only what changes',
    (_kind, envs) => {
      const fields = send(envs);
      expect(fields[0]!.envBase).toBeDefined(); // the first spawn: the supervisor has no base yet
      expect(fields[1]!.envBase).toBeUndefined(); // one call alone may be a one-off
      expect(fields[2]!.envBase).toBeDefined(); // the same difference again: re-based
      for (const later of fields.slice(3)) {
        expect(later.envBase).toBeUndefined();
        expect(later.env).toEqual({ [COOKIE]: expect.any(String) });
        expect(later.envUnset).toBeUndefined();
      }
    },
  );

  it('two envs in turn are not re-based at every call', () => {
    const envs = [host];
    for (let i = 1; i <= 40; i++) envs.push(i % 2 ? call(i) : call(i, {}));
    const fields = send(envs);
    const rebases = fields.slice(1).filter((f) => f.envBase).length;
    expect(rebases).toBeLessThanOrEqual(2);
  });
});

describe.each([
  ['the unsandboxed supervisor', undefined],
  ...(bwrap || process.env.CI ? [['a sandboxed supervisor', 'workspace-write'] as const] : []),
] as [string, 'workspace-write' | undefined][])('spawns through %s', (_name, kind) => {
  let ws: string;
  let manager: ProcessManager;
  beforeEach(() => {
    ws = mkdtempSync(join(tmpdir(), 'conch-protocol-'));
    manager = new ProcessManager({ cwd: ws, tempDir: () => ws, killGraceMs: 300, drainMs: 300 });
  });
  afterEach(async () => {
    await manager.dispose();
    expect(survivors(manager.cookiePrefix)).toEqual([]);
    rmSync(ws, { recursive: true, force: true });
  });
  const sandbox = (): SandboxProfile | undefined =>
    kind ? { kind, writableRoots: [ws], readOnlyPaths: [], hiddenEnv: ['*_SECRET'] } : undefined;

  /** The env a child really got (no values with newlines here). */
  async function envOf(
    env: Record<string, string | undefined> | undefined,
    extendEnv = true,
    delay = 0,
  ): Promise<Record<string, string>> {
    const script = `${delay ? `sleep ${delay}; ` : ''}exec /usr/bin/env`;
    const proc = manager.spawn('/bin/sh', ['-c', script], {
      ...(env ? { env } : {}),
      extendEnv,
      ...(sandbox() ? { sandbox: sandbox()! } : {}),
    });
    const result = await proc.result;
    expect(result.exitCode).toBe(0);
    const seen: Record<string, string> = {};
    for (const line of result.stdout.head.split('\n')) {
      const eq = line.indexOf('=');
      if (eq > 0) seen[line.slice(0, eq)] = line.slice(eq + 1);
    }
    expect(seen[COOKIE]).toBe(proc.cookie);
    delete seen[COOKIE];
    delete seen.PWD; // sh sets it
    delete seen.SHLVL;
    delete seen._;
    return seen;
  }

  const inherited = () => {
    const out: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) {
      if (value === undefined || key === 'NODE_OPTIONS' || key === 'PWD' || key === 'SHLVL' || key === '_')
        continue;
      out[key] = value;
    }
    return out;
  };

  it('each spawn sees exactly its env: added, changed and removed keys, after small and whole changes', async () => {
    const host = inherited();
    expect(await envOf({ CONCH_T_A: '1', CONCH_T_B: '2' })).toEqual({
      ...host,
      CONCH_T_A: '1',
      CONCH_T_B: '2',
    });
    // Changed and removed against the base the first spawn left.
    expect(await envOf({ CONCH_T_A: '3' })).toEqual({ ...host, CONCH_T_A: '3' });
    const someKey = Object.keys(host).find((k) => k !== 'PATH' && k !== 'HOME')!;
    const without = await envOf({ [someKey]: undefined, CONCH_T_C: 'x y=z' });
    expect(without).toEqual({
      ...Object.fromEntries(Object.entries(host).filter(([k]) => k !== someKey)),
      CONCH_T_C: 'x y=z',
    });
    expect(someKey in without).toBe(false);
    // A whole different env (a new base), then back to the inherited one.
    expect(await envOf({ ONLY: 'this', PATH: '/usr/bin:/bin' }, false)).toEqual({
      ONLY: 'this',
      PATH: '/usr/bin:/bin',
    });
    expect(await envOf({ ONLY2: 'that' }, false)).toEqual({ ONLY2: 'that' });
    expect(await envOf(undefined)).toEqual(host);
    if (kind) {
      // The sandbox's filter applies to the host's variables; what the caller gives one spawn is its
      // author's choice (a template's env_vars) and passes, a credential-like name included.
      expect(await envOf({ MY_SECRET: 'given', CONCH_T_D: 'yes' })).toEqual({
        ...host,
        MY_SECRET: 'given',
        CONCH_T_D: 'yes',
      });
    }
  });

  it('concurrent spawns with different envs each get theirs', async () => {
    const host = inherited();
    const dropped = Object.keys(host)[0]!;
    // Sent in this order: differences against one base, a removal, a new base, back again.
    const envs = [
      { CONCH_T_P: 'first' },
      { CONCH_T_P: 'second', CONCH_T_Q: 'q' },
      { [dropped]: undefined },
      { ONLY: 'alone', PATH: '/usr/bin:/bin' },
      {},
    ];
    const seen = await Promise.all(envs.map((env, i) => envOf(env, i !== 3, 0.2)));
    expect(seen[0]).toEqual({ ...host, CONCH_T_P: 'first' });
    expect(seen[1]).toEqual({ ...host, CONCH_T_P: 'second', CONCH_T_Q: 'q' });
    expect(seen[2]).toEqual(Object.fromEntries(Object.entries(host).filter(([k]) => k !== dropped)));
    expect(seen[3]).toEqual({ ONLY: 'alone', PATH: '/usr/bin:/bin' });
    expect(seen[4]).toEqual(host);
  });

  it("a child's pid is its host pid: signalable and /proc/<pid> is the command", async () => {
    const procs = [1, 2, 3, 4].map((i) =>
      manager.spawn('sleep', [`3${i}`], sandbox() ? { sandbox: sandbox()! } : {}),
    );
    // A burst of commands that end at once between them: their lookups must not mix pids up.
    const quick = [1, 2, 3].map(() => manager.spawn('true', [], sandbox() ? { sandbox: sandbox()! } : {}));
    const pids = await Promise.all(procs.map((p) => p.spawned));
    expect(new Set(pids).size).toBe(pids.length);
    // A pid is known once the child's exec has replaced its memory, a moment before the kernel
    // fills in the new image's command line (empty until then).
    await waitFor(() => pids.every((pid) => readFileSync(`/proc/${pid}/cmdline`, 'latin1') !== ''), {
      what: 'every command line filled in',
      timeoutMs: 10_000,
    });
    pids.forEach((pid, i) => {
      expect(pid).toBeDefined();
      expect(() => process.kill(pid!, 0)).not.toThrow();
      expect(readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0')).toEqual(['sleep', `3${i + 1}`, '']);
      const nspid = /\nNSpid:\s+([^\n]*)/
        .exec(readFileSync(`/proc/${pid}/status`, 'latin1'))![1]!
        .split(/\s+/);
      expect(Number(nspid[0])).toBe(pid);
      // Sandboxed: it has a pid of its own inside (the one the supervisor reported).
      if (kind) expect(nspid.length).toBeGreaterThan(1);
      expect(procs[i]!.pid).toBe(pid);
    });
    for (const q of quick) expect((await q.result).exitCode).toBe(0);
    await Promise.all(procs.map((p) => p.kill()));
    for (const p of procs) expect((await p.result).killed).toBe(true);
    for (const pid of pids) expect(() => process.kill(pid!, 0)).toThrow();
  });

  // A sandboxed supervisor hands each child's pidfd to the host with its pipes (the host reads the
  // child's host pid from it): none may stay open on either side, whatever the command did.
  it('no pidfd or pipe is left open in the host or the supervisor after many commands', async () => {
    const pidfds = (pid: number | 'self') => {
      let n = 0;
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        try {
          if (readlinkSync(`/proc/${pid}/fd/${fd}`) === 'anon_inode:[pidfd]') n++;
        } catch {
          // closed while listed
        }
      }
      return n;
    };
    const options = sandbox() ? { sandbox: sandbox()! } : {};
    await manager.spawn('true', [], options).result;
    const before = readdirSync('/proc/self/fd').length;
    const runs = Array.from({ length: 40 }, (_, i) =>
      i % 4 === 0
        ? manager.spawn('sh', ['-c', 'exit 3'], options)
        : i % 4 === 1
          ? manager.spawn('sleep', ['0.05'], options)
          : i % 4 === 2
            ? manager.spawn('true', [], { ...options, capture: false })
            : manager.spawn('true', [], options),
    );
    for (const run of runs) await run.result;
    const sleeping = manager.spawn('sleep', ['30'], options);
    const pid = await sleeping.spawned;
    expect(pid).toBeDefined();
    await waitFor(() => readFileSync(`/proc/${pid}/cmdline`, 'latin1') !== '', {
      what: 'the command line filled in',
      timeoutMs: 10_000,
    });
    expect(readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0')).toEqual(['sleep', '30', '']);
    expect(pidfds('self')).toBe(0);
    const supervisors = manager.supervisorPids();
    expect(supervisors.length).toBeGreaterThan(0);
    for (const supervisor of supervisors) expect(pidfds(supervisor)).toBe(0);
    await sleeping.kill();
    await sleeping.result;
    await waitFor(() => readdirSync('/proc/self/fd').length <= before, {
      what: "the host's fds back to where they were",
      timeoutMs: 10_000,
    });
    expect(survivors(manager.cookiePrefix)).toEqual([]);
  });
});
