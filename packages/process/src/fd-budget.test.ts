// Invariant: under a low open-file limit, one command too many is refused on its own with EMFILE
// and words that say why, before anything runs; the commands already running are not touched (no
// supervisor lost, no output lost), and the next command after them runs.
import { spawnSync } from 'node:child_process';
import { realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { removeTempDirs, tempDir } from '@conch/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { findBwrap } from '@conch/sandbox';

afterAll(removeTempDirs);

const bwrap = findBwrap();
// The built package, as a host runs it (the README's test command builds first).
const DIST = pathToFileURL(join(import.meta.dirname, '..', 'dist', 'index.js')).href;

interface Outcome {
  ok: number;
  refused: string[];
  other: string[];
  next: string;
}

/** A host under `ulimit -n <limit>` starting `count` commands at once (real processes, real limit). */
function crowd(limit: number, count: number, sandboxed: boolean, hostFiles = 0): Outcome {
  const ws = realpathSync(tempDir('conch-fd-ws-'));
  const script = join(ws, 'host.mjs');
  // Every command waits for the gate, opened once all of them were started or refused: they all
  // hold their pipes at once. Refusals are decided as each is submitted, before any could end.
  writeFileSync(
    script,
    `import { closeSync, openSync, writeFileSync } from 'node:fs';
import { ProcessManager } from ${JSON.stringify(DIST)};
const sandbox = ${sandboxed} ? { kind: 'workspace-write', writableRoots: [${JSON.stringify(ws)}], readOnlyPaths: [] } : undefined;
const m = new ProcessManager({ cwd: ${JSON.stringify(ws)}, tempDir: () => ${JSON.stringify(ws)} });
const gate = ${JSON.stringify(join(ws, 'go'))};
// Files the host itself holds open (its own work: a tool reading files, sockets).
const held = Array.from({ length: ${hostFiles} }, () => openSync('/dev/null', 'r'));
const procs = Array.from({ length: ${count} }, (_, i) =>
  m.spawn('while [ ! -e ' + gate + ' ]; do sleep 0.05; done; echo done-' + i, [], { shell: true, ...(sandbox ? { sandbox } : {}) }));
await Promise.all(procs.map((p) => p.spawned.catch(() => undefined)));
writeFileSync(gate, '');
const out = { ok: 0, refused: [], other: [], next: '' };
for (const [i, p] of procs.entries()) {
  const r = await p.result;
  if (r.exitCode === 0 && r.stdout.head === 'done-' + i + '\\n') out.ok++;
  else if (r.spawnError?.code === 'EMFILE') out.refused.push(r.spawnError.message);
  else out.other.push(JSON.stringify({ i, exitCode: r.exitCode, signal: r.signal, spawnError: r.spawnError, lost: r.supervisorLost, out: r.stdout.head }));
}
for (const fd of held) closeSync(fd);
const next = await m.spawn('echo next', [], { shell: true, ...(sandbox ? { sandbox } : {}) }).result;
out.next = next.stdout.head;
await m.dispose();
console.log(JSON.stringify(out));
`,
  );
  const run = spawnSync('bash', ['-c', `ulimit -n ${limit} && exec "$0" "$1"`, process.execPath, script], {
    encoding: 'utf8',
    cwd: ws,
    timeout: 300_000,
  });
  expect(run.status, run.stderr).toBe(0);
  return JSON.parse(run.stdout.trim().split('\n').pop()!) as Outcome;
}

describe.each([
  ['a supervisor outside any sandbox', false],
  ...(bwrap || process.env.CI ? ([['a sandboxed supervisor (bubblewrap, the guard)', true]] as const) : []),
] as const)('ulimit -n 256 and 100 commands at once: %s', (_name, sandboxed) => {
  it('each one either runs to its end or is refused alone with EMFILE, and the next command runs', () => {
    const out = crowd(256, 100, sandboxed);
    expect(out.other, 'no command was lost, killed or cut short').toEqual([]);
    expect(out.ok + out.refused.length).toBe(100);
    expect(out.ok).toBeGreaterThan(20);
    expect(out.refused.length).toBeGreaterThan(0);
    expect(out.refused[0]).toMatch(
      /^too many open files: .*256 file descriptors \(ulimit -n\).*Nothing was started\. .*raise the limit/,
    );
    expect(out.next).toBe('next\n');
  });

  it("the host's own open files count: with 180 of 256 held, fewer commands start and none is lost", () => {
    const out = crowd(256, 40, sandboxed, 180);
    expect(out.other).toEqual([]);
    expect(out.ok + out.refused.length).toBe(40);
    expect(out.refused.length).toBeGreaterThan(0);
    expect(out.refused.some((m) => /the host process has \d+ of its 256 file descriptors/.test(m))).toBe(
      true,
    );
    expect(out.next).toBe('next\n');
  });

  it('under the usual limit the same crowd runs whole', () => {
    const out = crowd(4096, 100, sandboxed);
    expect(out).toEqual({ ok: 100, refused: [], other: [], next: 'next\n' });
  });
});
