// Invariant: at most maxWorkers tasks run (adopted ones included), queued tasks can be cancelled before they start, output pages never lose or split a byte, and history stays bounded.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventBus } from '@conch/core';
import { findCookiePids, pidAlive, ProcessManager } from '@conch/process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { shellRun } from './test-support/runs.js';
import { BackgroundTasks } from './background-tasks.js';
import { UnknownTaskError } from './unknown-task-error.js';

let dir: string;
let manager: ProcessManager;
let service: BackgroundTasks | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-bg-'));
  manager = new ProcessManager({ tempDir: () => dir, cwd: dir, killGraceMs: 300, drainMs: 200 });
});
afterEach(async () => {
  await service?.dispose();
  service = undefined;
  await manager.dispose();
  expect(findCookiePids({ prefix: manager.cookiePrefix }).filter(pidAlive)).toEqual([]);
  rmSync(dir, { recursive: true, force: true });
});

const sh = (script: string) => shellRun(() => manager, script);

async function waitDone(s: BackgroundTasks, id: string) {
  return s.wait(id, 60_000);
}

describe('BackgroundTasks', () => {
  it('runs at most maxWorkers at once and emits task events', async () => {
    const events = new EventBus();
    service = new BackgroundTasks({ maxWorkers: 2, events });
    const s = service;
    let running = 0;
    let peak = 0;
    const seen: string[] = [];
    events.on('background.task.created', () => seen.push('created'));
    events.on('background.task.started', () => {
      running++;
      peak = Math.max(peak, running);
    });
    events.on('background.task.finished', (e) => {
      running--;
      seen.push(`finished:${e.task.status}`);
    });
    const infos = Array.from({ length: 5 }, (_, i) =>
      s.submit({ command: `task ${i}`, tool: 'test', start: sh(`sleep 0.2; echo ${i}`) }),
    );
    expect(infos.map((i) => i.status)).toEqual(['running', 'running', 'queued', 'queued', 'queued']);
    for (const [i, info] of infos.entries()) {
      const done = await waitDone(s, info.id);
      expect(done).toMatchObject({ status: 'completed', result: { stdout: `${i}\n` } });
    }
    expect(peak).toBeLessThanOrEqual(2);
    expect(seen.filter((e) => e === 'created')).toHaveLength(5);
    expect(seen.filter((e) => e === 'finished:completed')).toHaveLength(5);
  });

  it('adopted work takes a worker slot: a submitted task queues until it ends', async () => {
    service = new BackgroundTasks({ maxWorkers: 1 });
    const adopted = service.adopt({ command: 'adopted', tool: 'test', run: sh('sleep 0.5; echo a')() });
    expect(adopted.status).toBe('running');
    const queued = service.submit({ command: 'next', tool: 'test', start: sh('echo b') });
    expect(queued.status).toBe('queued');
    await new Promise((r) => setTimeout(r, 100));
    expect(service.get(queued.id)!.status).toBe('queued');
    expect((await waitDone(service, adopted.id)).status).toBe('completed');
    expect((await waitDone(service, queued.id)).result).toMatchObject({ stdout: 'b\n' });
  });

  it('adopt never queues: it runs at once even with every worker busy, and the queue waits for both', async () => {
    service = new BackgroundTasks({ maxWorkers: 1 });
    const first = service.submit({ command: 'first', tool: 'test', start: sh('sleep 0.4; echo 1') });
    expect(first.status).toBe('running');
    const adopted = service.adopt({ command: 'adopted', tool: 'test', run: sh('sleep 0.6; echo a')() });
    expect(adopted.status).toBe('running');
    expect(service.runningCount).toBe(2);
    const queued = service.submit({ command: 'queued', tool: 'test', start: sh('echo q') });
    expect(queued.status).toBe('queued');
    // The first task's end frees one slot, but the adopted task still holds the only worker.
    await waitDone(service, first.id);
    expect(service.get(queued.id)!.status).toBe('queued');
    await waitDone(service, adopted.id);
    expect((await waitDone(service, queued.id)).result).toMatchObject({ stdout: 'q\n' });
    expect(service.runningCount).toBe(0);
  });

  it('queued tasks start first in, first out; a start that throws frees its slot for the next', async () => {
    service = new BackgroundTasks({ maxWorkers: 1 });
    const order: string[] = [];
    const blocker = service.submit({ command: 'blocker', tool: 'test', start: sh('sleep 0.3') });
    const broken = service.submit({
      command: 'broken',
      tool: 'test',
      start: () => {
        order.push('broken');
        throw new Error('no such program');
      },
    });
    const ids = ['a', 'b', 'c'].map(
      (name) =>
        service!.submit({
          command: name,
          tool: 'test',
          start: () => {
            order.push(name);
            return sh(`echo ${name}`)();
          },
        }).id,
    );
    await waitDone(service, blocker.id);
    for (const id of ids) expect((await waitDone(service, id)).status).toBe('completed');
    expect(order).toEqual(['broken', 'a', 'b', 'c']);
    expect(service.get(broken.id)).toMatchObject({
      status: 'failed',
      result: { error: 'Could not start: no such program' },
    });
  });

  it('a cancelled queued task never starts; a cancelled running one is killed', async () => {
    service = new BackgroundTasks({ maxWorkers: 1 });
    const marker = join(dir, 'never');
    const first = service.submit({ command: 'long', tool: 'test', start: sh('sleep 300') });
    const second = service.submit({ command: 'queued', tool: 'test', start: sh(`touch ${marker}`) });
    await service.kill(second.id);
    expect(service.get(second.id)!.status).toBe('cancelled');
    await service.kill(first.id);
    expect(service.get(first.id)!.status).toBe('cancelled');
    await new Promise((r) => setTimeout(r, 100));
    expect(existsSync(marker)).toBe(false);
  });

  it('pages output by byte offset without splitting a character or losing a byte', async () => {
    service = new BackgroundTasks();
    const text = 'héllo wörld € ünïcode\n'.repeat(50);
    const source = join(dir, 'source.txt');
    writeFileSync(source, text);
    const info = service.submit({
      command: 'print',
      tool: 'test',
      start: sh(`cat ${source}`),
    });
    await waitDone(service, info.id);
    let offset = 0;
    let out = '';
    for (let i = 0; i < 10_000; i++) {
      const page = await service.logs(info.id, { offset, limit: 7 });
      out += page.text;
      if (page.nextOffset >= page.totalBytes) break;
      expect(page.nextOffset).toBeGreaterThan(offset);
      offset = page.nextOffset;
    }
    expect(out).toBe(text);
  });

  it('keeps historyLimit delivered results, the longest ago delivered evicted first', async () => {
    service = new BackgroundTasks({ historyLimit: 2 });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const info = service.submit({ command: `t${i}`, tool: 'test', start: sh('true') });
      await waitDone(service, info.id); // a wait that returns the result delivers it
      ids.push(info.id);
    }
    expect(service.list().map((t) => t.id)).toEqual(ids.slice(2));
    // Reading t2 again makes it the most recent: the next delivery evicts t3, not t2.
    await service.wait(ids[2]!, 0);
    const last = service.submit({ command: 't4', tool: 'test', start: sh('true') });
    await waitDone(service, last.id);
    expect(service.list().map((t) => t.id)).toEqual([ids[2], last.id]);
    expect(service.evictedInfo(ids[3]!)).toMatchObject({ id: ids[3], status: 'completed', delivered: true });
  });

  it('never evicts an unread result for historyLimit: a burst of 6 with a limit of 2 keeps all 6', async () => {
    service = new BackgroundTasks({ historyLimit: 2 });
    const s = service;
    const infos = Array.from({ length: 6 }, (_, i) =>
      s.submit({ command: `t${i}`, tool: 'test', start: sh(`echo r${i}`) }),
    );
    // whenFinished (a host waiting for the end) is not a delivery.
    for (const info of infos) await s.whenFinished(info.id);
    expect(s.list().map((t) => t.id)).toEqual(infos.map((i) => i.id));
    // The first one, checked last, still has its result; reading the others evicts the first
    // ones read, never the one read last (its read_background_output follows).
    for (const [i, info] of [...infos.entries()].reverse()) {
      const done = await s.wait(info.id, 0);
      expect(done).toMatchObject({
        status: 'completed',
        result: {
          stdout: `r${i}
`,
        },
      });
      expect(s.get(info.id)).toBeDefined();
      expect((await s.logs(info.id)).text).toBe(`r${i}
`);
    }
    expect(s.list().map((t) => t.id)).toEqual([infos[0]!.id, infos[1]!.id]);
  });

  it('evicts unread results only past unreadLimit, oldest first, and says so by id', async () => {
    service = new BackgroundTasks({ historyLimit: 1, unreadLimit: 3 });
    const s = service;
    const infos = Array.from({ length: 5 }, (_, i) =>
      s.submit({ command: `echo u${i}`, tool: 'test', start: sh(`exit ${i}`) }),
    );
    for (const info of infos) await s.whenFinished(info.id);
    expect(s.list().map((t) => t.id)).toEqual(infos.slice(2).map((i) => i.id));
    const gone = infos[0]!.id;
    expect(s.get(gone)).toBeUndefined();
    expect(s.evictedInfo(gone)).toMatchObject({ status: 'completed', delivered: false, returncode: 0 });
    expect(s.evictedInfo(infos[1]!.id)).toMatchObject({ status: 'failed', returncode: 1 });
    const error = await s.kill(gone).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(UnknownTaskError);
    expect(error).toMatchObject({ code: 'TASK_EVICTED', evicted: { id: gone } });
    expect((error as Error).message).toMatch(/before its result was read.*unreadLimit/);
    expect((error as Error).message).toContain('echo u0');
    // A new task never takes an evicted task's id.
    expect(s.evictedInfo('nope')).toBeUndefined();
  });

  it('a cancelled task counts as delivered (the cancel returned its result)', async () => {
    service = new BackgroundTasks({ historyLimit: 1 });
    const a = service.submit({ command: 'a', tool: 'test', start: sh('sleep 300') });
    const b = service.submit({ command: 'b', tool: 'test', start: sh('sleep 300') });
    await service.kill(a.id);
    await service.kill(b.id);
    expect(service.list().map((t) => t.id)).toEqual([b.id]);
    expect(service.evictedInfo(a.id)).toMatchObject({ status: 'cancelled', delivered: true });
  });

  it('unknown ids throw UnknownTaskError naming the known ids', async () => {
    service = new BackgroundTasks();
    const info = service.submit({ command: 'x', tool: 'test', start: sh('true') });
    await expect(service.kill('nope')).rejects.toSatisfy(
      (e: unknown) =>
        e instanceof UnknownTaskError && e.code === 'UNKNOWN_TASK' && e.message.includes(info.id),
    );
    await waitDone(service, info.id);
  });

  it('dispose cancels queued and running tasks and refuses new ones', async () => {
    service = new BackgroundTasks({ maxWorkers: 1 });
    const a = service.submit({ command: 'a', tool: 'test', start: sh('sleep 300') });
    const b = service.submit({ command: 'b', tool: 'test', start: sh('sleep 300') });
    await service.dispose();
    expect(service.get(a.id)!.status).toBe('cancelled');
    expect(service.get(b.id)!.status).toBe('cancelled');
    expect(() => service!.submit({ command: 'c', tool: 'test', start: sh('true') })).toThrow(/disposed/);
  });
});
