// A session's state has one owner: its lifecycle allows only the documented transitions, and the pool hands sessions out as leases or typed errors.
import pino from 'pino';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConchError, EventBus } from '@conch/core';
import { terminalConfigSchema } from './config.js';
import { InvalidSessionTransitionError } from './errors/invalid-session-transition-error.js';
import { TerminalSessionError } from './errors/terminal-session-error.js';
import { MarkerParser } from './marker-parser.js';
import { SessionPool } from './session-pool.js';
import { SessionLifecycle, publicState, type SessionLifecycleState } from './session-state.js';

describe('SessionLifecycle', () => {
  it('walks a command through its states and reports each change', () => {
    const seen: string[] = [];
    const life = new SessionLifecycle(7, (state, previous) => seen.push(`${previous}>${state}`));
    life.ready();
    life.start();
    life.report('waiting');
    life.report('running');
    life.finish();
    life.takeResult();
    life.start();
    life.report('background');
    expect(life.close('killed')).toBe(true);
    expect(life.close('reaped')).toBe(false);
    life.exited();
    life.exited();
    expect(seen).toEqual([
      'starting>idle',
      'idle>running',
      'running>waiting',
      'waiting>running',
      'running>finished',
      'finished>idle',
      'idle>running',
      'running>background',
      'background>closing',
      'closing>exited',
    ]);
    expect(life.exitReason).toBe('killed');
    expect(life.alive).toBe(false);
  });

  it('throws a ConchError with a stable code on a transition the lifecycle does not allow', () => {
    const life = new SessionLifecycle(3);
    const illegal: [string, () => void][] = [
      ['start before ready', () => life.start()],
      ['finish while starting', () => life.finish()],
    ];
    for (const [what, act] of illegal) {
      let error: unknown;
      try {
        act();
      } catch (e) {
        error = e;
      }
      expect(error, what).toBeInstanceOf(InvalidSessionTransitionError);
      expect(ConchError.isInstance(error)).toBe(true);
      expect((error as ConchError).code).toBe('INVALID_SESSION_TRANSITION');
    }
    life.ready();
    life.start();
    life.report('background');
    expect(() => life.report('waiting')).toThrow(
      /terminal session 3: state 'background' cannot become 'waiting'; expected one of 'finished', 'closing', 'exited'/,
    );
    life.exited();
    expect(life.exitReason).toBe('exit');
    expect(() => life.ready()).toThrow(
      /state 'exited' cannot become 'idle'; expected one of \(none: final state\)/,
    );
    expect(life.state).toBe('exited');
  });

  it('shows hosts a finished command as idle and a closing session as exited', () => {
    const states: SessionLifecycleState[] = ['finished', 'closing', 'waiting'];
    expect(states.map(publicState)).toEqual(['idle', 'exited', 'waiting']);
  });

  it('marks a shell that dies while starting as a startup failure', () => {
    const life = new SessionLifecycle(1);
    life.exited();
    expect(life.exitReason).toBe('startup-failed');
  });
});

describe('MarkerParser', () => {
  const nonce = '0123456789abcdef';
  const B = (seq: number) => `\u001b]6973;B;${nonce};${seq}\u0007`;
  const E = (code: number, cwd: string) => `\u001b]6973;E;${nonce};${code};${cwd}\u0007`;

  function parser() {
    const log: string[] = [];
    const p = new MarkerParser(nonce, {
      ready: (cwd, before) => log.push(`ready ${cwd} ${JSON.stringify(before)}`),
      begin: () => log.push('begin'),
      output: (text) => log.push(`out ${JSON.stringify(text)}`),
      end: (code, cwd) => log.push(`end ${code} ${cwd}`),
      idle: (text) => log.push(`idle ${JSON.stringify(text)}`),
    });
    return { p, log };
  }

  it('splits startup, the typed echo, output and markers split across chunks', () => {
    const { p, log } = parser();
    p.push('rc noise\r\n');
    p.push(E(0, '/home/u;x').slice(0, 9));
    p.push(`${E(0, '/home/u;x').slice(9)}job`);
    p.expect(1);
    p.push(` \\builtin . '/x/cmd.sh'\r\n${B(1)}hel`);
    p.push('lo\r\n\u001b]69');
    p.push(`73;E;${nonce};2;/tmp\u0007late`);
    expect(log).toEqual([
      'ready /home/u;x "rc noise\\r\\n"',
      'idle "job"',
      'begin',
      'out "hel"',
      'out "lo\\r\\n"',
      'end 2 /tmp',
      'idle "late"',
    ]);
  });

  it('ignores a begin marker of another command and markers with another nonce', () => {
    const { p, log } = parser();
    p.push(E(0, '/'));
    p.expect(2);
    p.push(`${B(1)}${B(2)}\u001b]6973;E;ffffffffffffffff;0;/\u0007${E(5, '/')}`);
    expect(log.slice(1)).toEqual([
      'begin',
      `out ${JSON.stringify('\u001b]6973;E;ffffffffffffffff;0;/\u0007')}`,
      'end 5 /',
    ]);
  });
});

describe('SessionPool leases', () => {
  let root: string | undefined;
  let pool: SessionPool | undefined;
  afterEach(async () => {
    await pool?.dispose();
    pool = undefined;
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('hands out leases and throws typed errors for unknown, busy and full', async () => {
    root = mkdtempSync(join(tmpdir(), 'conch-pool-'));
    pool = new SessionPool({
      config: terminalConfigSchema.parse({ maxSessions: 1 }),
      logger: pino({ level: 'silent' }),
      events: new EventBus(),
      tempDir: () => root!,
      cwd: root,
    });
    const codeOf = async (p: Promise<unknown>) => {
      try {
        await p;
      } catch (error) {
        expect(TerminalSessionError.is(error)).toBe(true);
        return (error as TerminalSessionError).code;
      }
      return 'no error';
    };
    expect(await codeOf(pool.claim(9))).toBe('UNKNOWN_SESSION');
    const lease = await pool.claim(undefined);
    expect(lease.session.lifecycle.state).toBe('running');
    expect(await codeOf(pool.claim(lease.session.id))).toBe('SESSION_BUSY');
    expect(await codeOf(pool.claim(undefined))).toBe('POOL_FULL');
    expect(() => pool!.acquire(lease.session.id)).toThrow(/is being read by another call right now/);
    pool.abandon(lease);
    expect(lease.active).toBe(false);
    expect(lease.session.lifecycle.state).toBe('idle');
    expect(() => pool!.acquire(lease.session.id)).toThrow(/has no running command/);
    const again = await pool.claim(lease.session.id);
    expect(again.session).toBe(lease.session);
    again.release();
    await pool.dispose();
    expect(await codeOf(pool.claim(undefined))).toBe('POOL_DISPOSED');
  });
});
