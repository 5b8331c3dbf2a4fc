// Invariant: a capture keeps head and tail with exact byte/line counts, never splits a UTF-8 char, and loses no byte to the sink.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { OutputCapture } from './output-capture.js';
import { SpillSink } from './spill-sink.js';
import { looksBinary } from './utf8.js';

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'conch-cap-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('OutputCapture', () => {
  it('keeps everything when small and counts lines', () => {
    const cap = new OutputCapture({ headBytes: 16, tailBytes: 16 });
    cap.write(Buffer.from('a\nb\n'));
    cap.write(Buffer.from('c'));
    const snap = cap.snapshot();
    expect(snap).toMatchObject({ totalBytes: 5, lines: 3, truncated: false, head: 'a\nb\nc', tail: '' });
  });

  it('keeps head and tail of a large stream with the omitted size, and the sink holds every byte', async () => {
    const dir = tmp();
    const sink = new SpillSink({ dir: () => dir, name: 'out', pendingLimit: 64 });
    const cap = new OutputCapture({ headBytes: 32, tailBytes: 32, sink });
    const lines = Array.from({ length: 1000 }, (_, i) => `line ${i}\n`);
    for (const line of lines) cap.write(Buffer.from(line));
    const snap = cap.snapshot();
    await sink.end();
    const all = lines.join('');
    expect(snap.totalBytes).toBe(all.length);
    expect(snap.lines).toBe(1000);
    expect(snap.truncated).toBe(true);
    expect(snap.omittedBytes).toBe(all.length - 64);
    expect(all.startsWith(snap.head)).toBe(true);
    expect(all.endsWith(snap.tail)).toBe(true);
    expect(snap.tail.endsWith('line 999\n')).toBe(true);
    expect(readFileSync(snap.spillPath!, 'utf8')).toBe(all);
  });

  it('never cuts a multi-byte character at the head or tail boundary', () => {
    const cap = new OutputCapture({ headBytes: 4, tailBytes: 4 });
    cap.write(Buffer.from('€€€€€€€€')); // 3 bytes each
    const snap = cap.snapshot();
    expect(snap.head).toBe('€');
    expect(snap.tail).toBe('€');
    expect(snap.head + snap.tail).not.toContain('\ufffd');
  });

  it('reports binary output instead of dumping it', () => {
    const cap = new OutputCapture();
    cap.write(Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 0, 1, 2]));
    expect(cap.snapshot()).toMatchObject({ binary: true, head: '', totalBytes: 8 });
    expect(looksBinary(Buffer.from('plain text\n'))).toBe(false);
    expect(looksBinary(Buffer.from([0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0x41]))).toBe(true);
  });

  it('decodes a lone invalid byte to U+FFFD without throwing', () => {
    const cap = new OutputCapture();
    cap.write(Buffer.from([0x61, 0xff, 0x62]));
    expect(cap.snapshot().head).toBe('a\ufffdb');
  });
});

describe('SpillSink', () => {
  it('never touches the disk for small output, and reads pages from memory or file', async () => {
    const dir = tmp();
    const sink = new SpillSink({ dir: () => dir, name: 's', pendingLimit: 10 });
    sink.write(Buffer.from('hello'));
    expect(sink.path).toBeUndefined();
    expect((await sink.read(1, 3)).toString()).toBe('ell');
    sink.write(Buffer.from(' world, more'));
    expect(sink.path).toBeDefined();
    await sink.end();
    expect((await sink.read(6, 5)).toString()).toBe('world');
    expect(sink.totalBytes).toBe(17);
  });
});
