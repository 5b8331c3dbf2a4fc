// Invariant: readRegularFileSync reads a regular file (symlinks followed) and never opens anything
// else for reading: a FIFO, socket, device or directory in its place fails at once (EFTYPE), more
// than maxBytes fails (EFBIG), and a name swapped between a FIFO and files while it reads never
// blocks the caller. FIFO cases run in a child with a timeout: a blocked open() would otherwise
// hang the test's own worker.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { resolvedAfter, startFifoSwapper } from '@conch/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { readRegularFileSync } from './regular-file.js';

const dist = pathToFileURL(resolve(fileURLToPath(import.meta.url), '../../dist/index.js')).href;
const dir = mkdtempSync(join(tmpdir(), 'conch-regular-file-'));
// Retried: a mkfifo the killed swapper started can still be finishing.
afterAll(() => rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 }));

const code = (path: string, maxBytes: number) => {
  try {
    return readRegularFileSync(path, { maxBytes, encoding: 'utf8' });
  } catch (error) {
    return (error as NodeJS.ErrnoException).code;
  }
};

/** Runs `body` in a child node with readRegularFileSync imported as `read`; its stdout, or a timeout. */
function inChild(body: string, timeoutMs = 30_000): { out: string; timedOut: boolean } {
  const script = `import { readRegularFileSync as read } from ${JSON.stringify(dist)};\n${body}`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: timeoutMs,
    killSignal: 'SIGKILL',
  });
  if (r.status !== 0 && r.signal === null) throw new Error(`child failed: ${r.stderr}`);
  return { out: r.stdout.trim(), timedOut: r.signal !== null };
}

describe('readRegularFileSync', () => {
  it('reads a regular file, through a symlink too, as bytes or text', () => {
    writeFileSync(join(dir, 'a'), 'hello\n');
    symlinkSync(join(dir, 'a'), join(dir, 'link'));
    expect(code(join(dir, 'a'), 100)).toBe('hello\n');
    expect(code(join(dir, 'link'), 100)).toBe('hello\n');
    expect(readRegularFileSync(join(dir, 'a'), { maxBytes: 6 }).equals(Buffer.from('hello\n'))).toBe(true);
    writeFileSync(join(dir, 'empty'), '');
    expect(code(join(dir, 'empty'), 0)).toBe('');
  });

  it('refuses more than maxBytes, a directory, a device behind a symlink, and says what is missing', () => {
    writeFileSync(join(dir, 'big'), 'x'.repeat(5000));
    expect(code(join(dir, 'big'), 4999)).toBe('EFBIG');
    expect(code(join(dir, 'big'), 5000)).toHaveLength(5000);
    expect(code(dir, 100)).toBe('EFTYPE');
    symlinkSync('/dev/null', join(dir, 'null'));
    expect(code(join(dir, 'null'), 100)).toBe('EFTYPE');
    expect(code(join(dir, 'missing'), 100)).toBe('ENOENT');
    expect(code(join(dir, 'a', 'under-a-file'), 100)).toBe('ENOTDIR');
    expect(() => readRegularFileSync(dir, { maxBytes: 1 })).toThrow(/is a directory, not a regular file/);
  });

  it('reads a /proc file (its size says 0) to the end, within the bound', () => {
    const status = code('/proc/self/status', 1 << 20);
    expect(status).toMatch(/^Name:/m);
    expect(status).toMatch(/^Pid:/m);
    expect(code('/proc/self/status', 10)).toBe('EFBIG');
  });

  it('a FIFO with no writer fails at once (readFileSync would wait forever), and so does one behind a symlink', () => {
    spawnSync('mkfifo', [join(dir, 'fifo')]);
    symlinkSync(join(dir, 'fifo'), join(dir, 'to-fifo'));
    const { out, timedOut } = inChild(`
      const codes = [];
      for (const p of ${JSON.stringify([join(dir, 'fifo'), join(dir, 'to-fifo')])}) {
        try { read(p, { maxBytes: 100 }); codes.push('read'); } catch (e) { codes.push(e.code); }
      }
      console.log(codes.join(' '));`);
    expect(timedOut).toBe(false);
    expect(out).toBe('EFTYPE EFTYPE');
  });

  it("leaves node's shared stat buffer off the socket or FIFO it refused (nodejs/node#51142)", () => {
    const core = `import * as core from ${JSON.stringify(dist)};`;
    for (const what of ['sock', 'fifo'])
      expect(
        resolvedAfter(
          `try { core.readRegularFileSync(join(dir, '${what}'), { maxBytes: 10 }); } catch {}`,
          core,
        ),
        what,
      ).toMatch(/\/store\/second\/index\.js$/);
  });

  it('never blocks while another process renames FIFOs and fresh files over the name it reads', async () => {
    const race = mkdtempSync(join(dir, 'race-'));
    const name = join(race, 'config');
    writeFileSync(name, 'x');
    const swapper = startFifoSwapper(name, { padding: 50 });
    try {
      const { out, timedOut } = inChild(
        `
        const seen = new Map();
        for (let i = 0; i < 20000; i++) {
          let k;
          try { k = 'read ' + read(${JSON.stringify(name)}, { maxBytes: 100 }).length; } catch (e) { k = e.code; }
          k = k.startsWith('read') ? 'read' : k;
          seen.set(k, (seen.get(k) ?? 0) + 1);
        }
        console.log(JSON.stringify(Object.fromEntries(seen)));`,
        120_000,
      );
      expect(timedOut).toBe(false);
      const seen = JSON.parse(out) as Record<string, number>;
      // Only the three things the name can be when opened: a file (read), a FIFO (refused), nothing.
      expect(Object.keys(seen).every((k) => ['read', 'EFTYPE', 'ENOENT'].includes(k))).toBe(true);
      expect(Object.values(seen).reduce((a, b) => a + b, 0)).toBe(20000);
      expect(seen.EFTYPE).toBeGreaterThan(0);
    } finally {
      // Gone before the directory is removed (it renames files into it until it dies).
      await swapper.stop();
    }
  });
});
