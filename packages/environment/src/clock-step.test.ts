// Invariant: the wall clock does not drive a timeout or a wait. With the host's clock stepped back an
// hour (or forward a day) while calls wait, a cli timeout still kills its command, a terminal's timeout
// still returns, and a background task's wait_seconds still ends — all on the monotonic clock.
// libfaketime steps only the host process's wall clock (DONT_FAKE_MONOTONIC keeps the monotonic
// one real), so the machine's clock is never touched.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const FAKETIME = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1',
  '/usr/lib/faketime/libfaketimeMT.so.1',
].find((p) => existsSync(p));
if (!FAKETIME && process.env.CI)
  throw new Error('CI needs libfaketime (apt: faketime) for the clock-step tests');
const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');

let scratch: string;
beforeEach(() => {
  scratch = realpathSync(mkdtempSync(join(tmpdir(), 'conch-clock-')));
});
afterEach(() => rmSync(scratch, { recursive: true, force: true }));

/**
 * Runs `body` in a host process whose wall clock reads `clockFile` (an offset such as "-3600"), with
 * permission, cli, background and terminal plugins; `step()` in the body writes the new offset. The
 * host prints one JSON line per `report(x)`.
 */
async function host(body: string, step: string): Promise<unknown[]> {
  const clockFile = join(scratch, 'clock');
  writeFileSync(clockFile, '+0');
  const ws = join(scratch, 'ws');
  const home = join(scratch, 'home');
  const script = `
    import { mkdirSync, writeFileSync } from 'node:fs';
    import { PluginRegistry } from '@conch/core';
    import { permissionPlugin } from '@conch/permission';
    import { cliPlugin } from '@conch/cli';
    import { backgroundPlugin } from '@conch/background';
    import { terminalPlugin } from '@conch/terminal';
    // libfaketime is loaded in this process; the commands it starts keep the real clock.
    // (libfaketime reads its FAKETIME_* variables on each call: they stay.)
    delete process.env.LD_PRELOAD;
    mkdirSync(${JSON.stringify(ws)}, { recursive: true });
    mkdirSync(${JSON.stringify(home)}, { recursive: true });
    const registry = new PluginRegistry({ cwd: ${JSON.stringify(ws)}, plugins: [permissionPlugin, cliPlugin, backgroundPlugin, terminalPlugin] });
    for (const p of ['permission', 'background', 'cli', 'terminal']) await registry.exposeTool(p, {});
    const wsDir = ${JSON.stringify(ws)};
    const report = (x) => console.log(JSON.stringify(x));
    // The clock keeps stepping the same way every 100 ms from then on (a deadline computed on the
    // wall clock at any moment — a timeout, a kill's grace, a wait — is then never met, or met early).
    const step = () => {
      let n = 1;
      // (libfaketime reads an offset with its sign: "-3600", "+86400")
      const write = () => writeFileSync(${JSON.stringify(clockFile)}, (${Number(step)} < 0 ? '' : '+') + ${Number(step)} * n++);
      write();
      setInterval(write, 100).unref();
    };
    try { ${body} } finally { await registry.dispose(); }
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    cwd: packageDir,
    env: {
      ...process.env,
      HOME: home,
      LD_PRELOAD: FAKETIME,
      FAKETIME_TIMESTAMP_FILE: clockFile,
      FAKETIME_NO_CACHE: '1',
      DONT_FAKE_MONOTONIC: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  expect(code, err).toBe(0);
  return out
    .split('\n')
    .filter((l) => l.startsWith('{') || l.startsWith('['))
    .map((l) => JSON.parse(l) as unknown);
}

const waitForFile = `
  const waitFile = async (path) => { const { existsSync } = await import('node:fs'); while (!existsSync(path)) await new Promise((r) => setTimeout(r, 20)); };
`;

describe.runIf(FAKETIME).each([
  ['back an hour', '-3600'],
  ['forward a day', '+86400'],
])('the host clock stepping %s', (_name, offset) => {
  it('a cli timeout still kills the command, and the host sees the wall clock moved', async () => {
    const [seen, res] = await host(
      `${waitForFile}
      const before = Date.now();
      const call = registry.execute('cli_based_tool', { command: "trap '' TERM; touch started; sleep 60", timeout: 2, background: false });
      await waitFile(wsDir + '/started');
      step();
      report({ stepped: Math.abs(Date.now() - before) > 1_800_000 });
      const r = await call;
      report({ returncode: r.returncode, error_code: r.error_code });
      `,
      offset,
    );
    expect(seen).toEqual({ stepped: true });
    expect(res).toMatchObject({ error_code: 'TIMED_OUT' });
  });

  it("a terminal's timeout still returns, and the session keeps working", async () => {
    const [first, second] = await host(
      `${waitForFile}
      const call = registry.execute('terminal', { command: 'touch started; sleep 60', timeout: 2 });
      await waitFile(wsDir + '/started');
      step();
      const r = await call;
      report({ session: typeof r.session_id, running: r.running ?? r.status });
      await registry.execute('terminal', { session_id: r.session_id, kill: true });
      const again = await registry.execute('terminal', { command: 'echo fine', timeout: 20 });
      report({ out: String(again.output ?? again.stdout ?? '').trim() });
      `,
      offset,
    );
    expect(first).toMatchObject({ session: 'number' });
    expect(second).toEqual({ out: 'fine' });
  });

  it("a background task's wait_seconds still ends, and its elapsed time is the monotonic one", async () => {
    const [res] = await host(
      `${waitForFile}
      const started = await registry.execute('cli_based_tool', { command: 'touch started; sleep 60', background: true });
      await waitFile(wsDir + '/started');
      const wait = registry.execute('check_background_task', { task_id: started.background_task_id, wait_seconds: 2 });
      await new Promise((r) => setTimeout(r, 200));
      step();
      const r = await wait;
      report({ status: r.status, elapsed: r.elapsed_seconds });
      await registry.execute('cancel_background_task', { task_id: started.background_task_id });
      `,
      offset,
    );
    // elapsed stays near the real seconds (a wall-clock difference would be about ±3,600 or 86,400)
    expect(res).toMatchObject({ status: 'running' });
    expect((res as { elapsed: number }).elapsed).toBeGreaterThanOrEqual(1);
    expect((res as { elapsed: number }).elapsed).toBeLessThan(600);
  });
});
