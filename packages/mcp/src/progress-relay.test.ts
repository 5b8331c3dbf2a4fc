// Progress sent to MCP clients always increases, keeps a valid total, and keep-alives stop on close.
import { waitFor } from '@conch/test-support';
import { afterEach, expect, test } from 'vitest';
import { type ProgressNotification, ProgressRelay } from './progress-relay.js';

let relay: ProgressRelay | undefined;
afterEach(() => relay?.close());

test('tool reports pass through; non-increasing ones are bumped', () => {
  const sent: ProgressNotification[] = [];
  relay = new ProgressRelay((n) => sent.push(n), 0);
  relay.report({ progress: 1, total: 10, message: 'a' });
  relay.report({ progress: 1, total: 10 });
  relay.report({ progress: 5, total: 10 });
  relay.report({ progress: Number.NaN });
  expect(sent[0]).toEqual({ progress: 1, total: 10, message: 'a' });
  expect(sent[1]!.progress).toBeGreaterThan(1);
  expect(sent[1]!.total).toBe(10);
  expect(sent[2]).toEqual({ progress: 5, total: 10 });
  expect(sent[3]!.progress).toBeGreaterThan(5);
  for (let i = 1; i < sent.length; i++) expect(sent[i]!.progress).toBeGreaterThan(sent[i - 1]!.progress);
});

test('keep-alives increase, stay under a known total, and stop after close', async () => {
  const sent: ProgressNotification[] = [];
  relay = new ProgressRelay((n) => sent.push(n), 20);
  await waitFor(() => sent.length >= 2, { what: 'keep-alives', timeoutMs: 30_000 });
  expect(sent[0]!.message).toMatch(/^still running \(\d+s\)$/);
  relay.report({ progress: 9, total: 10 });
  const at = sent.length;
  await waitFor(() => sent.length >= at + 3, { what: 'more keep-alives', timeoutMs: 30_000 });
  for (let i = 1; i < sent.length; i++) expect(sent[i]!.progress).toBeGreaterThan(sent[i - 1]!.progress);
  expect(sent.at(-1)!.progress).toBeLessThan(10);
  expect(sent.at(-1)!.total).toBe(10);
  relay.close();
  const count = sent.length;
  await new Promise((r) => setTimeout(r, 100));
  expect(sent.length).toBe(count);
});
