// Invariant: the health check judges a supervisor by the work it does not do, on real processes read through /proc — stopped or idle with a ping unanswered is stalled, a busy loop is caught by its CPU time, a booting supervisor is never stalled unless stopped, and any message from the supervisor clears the evidence.
import { spawn, type ChildProcess } from 'node:child_process';
import { waitFor } from '@conch/test-support';
import { afterEach, describe, expect, it } from 'vitest';
import {
  sampleProc,
  stoppedOrStopping,
  SupervisorHealth,
  type SupervisorHealthOptions,
} from './supervisor-health.js';

const children: ChildProcess[] = [];
const checks: SupervisorHealth[] = [];
afterEach(() => {
  for (const c of checks.splice(0)) c.stop();
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

function standIn(script: string): number {
  const child = spawn('sh', ['-c', script], { stdio: 'ignore' });
  children.push(child);
  return child.pid!;
}

/** A health check on a stand-in process that never answers pings; counts its ticks. */
function watch(pid: number, options: Partial<SupervisorHealthOptions> = {}) {
  const state = { ticks: 0, fired: undefined as string | undefined, pings: 0 };
  const health = new SupervisorHealth({
    unresponsiveMs: 1000,
    tickMs: 100,
    phase: () => {
      state.ticks++;
      return 'ready';
    },
    pid: () => pid,
    rootPid: () => pid,
    ping: () => void state.pings++,
    overdue: () => false,
    onUnresponsive: (why) => {
      state.fired = why;
    },
    ...options,
  });
  checks.push(health);
  health.start();
  return { health, state };
}

describe('SupervisorHealth', () => {
  it('a stopped process that does not answer is unresponsive, and says it is stopped', async () => {
    const pid = standIn('sleep 60');
    process.kill(pid, 'SIGSTOP');
    const { state } = watch(pid);
    await waitFor(() => state.fired !== undefined, { what: 'the check to fire', timeoutMs: 30_000 });
    expect(state.fired).toMatch(/stopped \(SIGSTOP\)/);
    expect(state.pings).toBe(1);
  });

  it('a process spinning without answering is caught by the CPU it burns', async () => {
    const pid = standIn('while :; do :; done');
    const { state } = watch(pid, { unresponsiveMs: 500, tickMs: 100 });
    await waitFor(() => state.fired !== undefined, { what: 'the check to fire', timeoutMs: 30_000 });
    expect(state.fired).toMatch(/CPU without answering/);
  });

  it('every message from the supervisor clears the evidence: one that talks is never declared dead', async () => {
    const pid = standIn('sleep 60');
    process.kill(pid, 'SIGSTOP');
    const { health, state } = watch(pid);
    const talk = setInterval(() => health.heard(), 50);
    try {
      await waitFor(() => state.ticks >= 30, { what: '30 ticks', timeoutMs: 30_000 });
      expect(state.fired).toBeUndefined();
    } finally {
      clearInterval(talk);
    }
  });

  it('while it starts only a stopped process counts: a slow boot is waited for, a stopped one is not', async () => {
    const booting = standIn('sleep 60');
    const slow = watch(booting, { phase: () => (slow.state.ticks++, 'starting') });
    await waitFor(() => slow.state.ticks >= 20, { what: '20 ticks', timeoutMs: 30_000 });
    expect(slow.state.fired).toBeUndefined();
    expect(slow.state.pings).toBe(0);
    const frozen = standIn('sleep 60');
    process.kill(frozen, 'SIGSTOP');
    const stopped = watch(frozen, { phase: () => 'starting' });
    await waitFor(() => stopped.state.fired !== undefined, { what: 'the check to fire', timeoutMs: 30_000 });
  });

  it('a call past its limit needs two stalled ticks in a row, not the whole bound', async () => {
    const pid = standIn('sleep 60');
    process.kill(pid, 'SIGSTOP');
    const { state } = watch(pid, { unresponsiveMs: 600_000, overdue: () => true });
    await waitFor(() => state.fired !== undefined, { what: 'the check to fire', timeoutMs: 30_000 });
    expect(state.fired).toMatch(/did not answer for \d+\.\d s/);
  });
});

// A terminal's start blocks the host on the supervisor's reply, so the look before it must see a
// SIGSTOP the moment kill() has returned, not once the target got a CPU to stop on.
describe('stoppedOrStopping', () => {
  const kinds: [string, string[], (pid: number) => boolean][] = [
    ['a sleeping single-threaded process', ['sleep', '60'], (pid) => sampleProc(pid)?.state === 'S'],
    [
      'a multi-threaded node process, idle',
      [process.execPath, '-e', 'setInterval(() => {}, 1000)'],
      (pid) => sampleProc(pid)?.state === 'S',
    ],
    [
      'a process spinning on a CPU',
      [process.execPath, '-e', 'for (;;);'],
      (pid) => sampleProc(pid)?.state === 'R',
    ],
  ];

  it.each(kinds)(
    '%s: true at once after kill(SIGSTOP), false once continued or gone',
    async (_kind, argv, settled) => {
      for (let round = 0; round < 10; round++) {
        const child = spawn(argv[0]!, argv.slice(1), { stdio: 'ignore' });
        children.push(child);
        const pid = child.pid!;
        await waitFor(() => settled(pid), { what: 'the process to settle', timeoutMs: 30_000 });
        expect(stoppedOrStopping(pid)).toBe(false);
        process.kill(pid, 'SIGSTOP');
        expect(stoppedOrStopping(pid)).toBe(true);
        await waitFor(() => sampleProc(pid)?.state === 'T', { what: 'stopped', timeoutMs: 30_000 });
        expect(stoppedOrStopping(pid)).toBe(true);
        process.kill(pid, 'SIGCONT');
        await waitFor(() => !stoppedOrStopping(pid), { what: 'continued', timeoutMs: 30_000 });
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
        expect(stoppedOrStopping(pid)).toBe(false);
      }
    },
    120_000,
  );
});
