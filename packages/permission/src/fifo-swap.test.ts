// Invariant: no file a sandboxed command could have written makes the gate wait. A process the
// agent left running that renames a FIFO and fresh files over a repository's .git/config (or its
// HEAD's commondir, a hook manager's config) in turn never blocks a decision in open(): the gate's
// reads open only a regular file (@conch/core readRegularFileSync). Measured before: the same
// swapper blocked the host's event loop in open() within seconds in every run. The decisions run
// in a child with a timeout, so a blocked open() fails the test instead of hanging its worker.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startFifoSwapper } from '@conch/test-support';
import { afterAll, describe, expect, it } from 'vitest';

const here = fileURLToPath(import.meta.url);
const gateJs = pathToFileURL(resolve(here, '../../dist/gate.js')).href;
const configJs = pathToFileURL(resolve(here, '../../dist/config.js')).href;
const dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-fifo-swap-')));
// Retried: a mkfifo the killed swapper started can still be finishing.
afterAll(() => rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 }));

/** `count` decisions of each command in a child with the engine; their verdicts, or a timeout. */
function decide(ws: string, commands: string[], count: number) {
  const script = `
    import { loadShellParser } from '@conch/shell-syntax';
    import { PermissionEngine } from ${JSON.stringify(gateJs)};
    import { permissionConfigSchema } from ${JSON.stringify(configJs)};
    const engine = new PermissionEngine({
      parser: await loadShellParser(),
      config: permissionConfigSchema.parse({}),
      cwd: ${JSON.stringify(ws)},
      home: ${JSON.stringify(join(dir, 'home'))},
    });
    const verdicts = {};
    for (let i = 0; i < ${count}; i++)
      for (const command of ${JSON.stringify(commands)}) {
        const v = engine.evaluate(command).verdict;
        verdicts[v] = (verdicts[v] ?? 0) + 1;
      }
    console.log(JSON.stringify(verdicts));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: resolve(here, '../..'),
    encoding: 'utf8',
    timeout: 120_000,
    killSignal: 'SIGKILL',
  });
  if (r.signal) return { timedOut: true as const };
  if (r.status !== 0) throw new Error(`decisions failed: ${r.stderr}`);
  return { timedOut: false as const, verdicts: JSON.parse(r.stdout.trim()) as Record<string, number> };
}

describe('a FIFO swapped over a file the gate reads', () => {
  it.each([
    ['.git/config', ['git status', 'git log -1', 'git diff']],
    ['.git/commondir', ['git status', 'git branch']],
  ])('%s: every decision returns', async (file, commands) => {
    const ws = join(dir, file.replace(/\W/g, '-'));
    mkdirSync(join(dir, 'home'), { recursive: true });
    mkdirSync(ws, { recursive: true });
    execFileSync('git', ['init', '-q', ws]);
    const target = join(ws, file);
    const swapper = startFifoSwapper(target, { text: '[core]\n\trepositoryformatversion = 0\n' });
    try {
      const result = decide(ws, commands, 3000);
      expect(result.timedOut, 'a decision blocked (open() of a FIFO)').toBe(false);
      if (!result.timedOut) {
        const total = Object.values(result.verdicts).reduce((a, b) => a + b, 0);
        expect(total).toBe(3000 * commands.length);
      }
    } finally {
      // Gone before the directory is removed (it renames files into it until it dies).
      await swapper.stop();
    }
  });
});
