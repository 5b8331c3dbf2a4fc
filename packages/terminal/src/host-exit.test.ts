// A host that exits without dispose(), dies of an unhandled SIGTERM, or is SIGKILLed, still leaves no terminal process behind.
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isAlive, processesMentioning, waitFor } from '@conch/test-support';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const dir = mkdtempSync(join(tmpdir(), 'conch-terminal-exit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The start of each host script: a registry with the terminal plugin and an allow-all gate. */
const HOST_PRELUDE = `
import ${JSON.stringify(join(packageDir, 'node_modules/reflect-metadata/Reflect.js'))};
import { PluginRegistry, TOKENS } from ${JSON.stringify(join(packageDir, 'node_modules/@conch/core/dist/index.js'))};
import { terminalPlugin, TERMINAL_SERVICE } from ${JSON.stringify(join(packageDir, 'dist/index.js'))};
const registry = new PluginRegistry({ cwd: ${JSON.stringify(dir)}, tempRoot: ${JSON.stringify(dir)} });
registry.register(terminalPlugin);
registry.container.register(TOKENS.PermissionGate, { useValue: { check: async () => ({ outcome: 'allow', reason: 'test' }) } });
registry.exposeTool('terminal', {});
`;

describe('host exit', () => {
  it('SIGKILLs every session tree when the host process exits', async () => {
    const tag = `conch-exit-${process.pid}`;
    const script = join(dir, 'host.mjs');
    writeFileSync(
      script,
      `
${HOST_PRELUDE}const bg = await registry.execute('terminal', { command: "(exec -a ${tag}-server sleep 300)", background: true });
const esc = await registry.execute('terminal', { command: "setsid bash -c 'exec -a ${tag}-escapee sleep 300' & python3 -c 'input()'" });
console.log(JSON.stringify({ bg, esc }));
process.exit(0);
`,
    );
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, [script], { timeout: 60_000 }, (error, out, err) => {
        if (error) reject(new Error(`${error.message}\n${err}`));
        else resolve(out);
      });
    });
    const results = JSON.parse(stdout) as { bg: { state?: string }; esc: { state?: string } };
    expect(results.bg.state).toBe('background');
    expect(results.esc.state).toBe('waiting');
    await waitFor(() => processesMentioning(tag).length === 0, {
      what: 'the host-exit kill',
      timeoutMs: 10_000,
    });
    expect(processesMentioning(tag)).toEqual([]);
  });

  it('SIGKILLs every session tree when the host dies of an unhandled SIGTERM', async () => {
    const tag = `conch-sigterm-${process.pid}`;
    const script = join(dir, 'host-sigterm.mjs');
    writeFileSync(
      script,
      `
${HOST_PRELUDE}const bg = await registry.execute('terminal', { command: "(exec -a ${tag}-server sleep 300)", background: true });
console.log(JSON.stringify({ bg }));
setInterval(() => {}, 1000);
`,
    );
    const host = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    host.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await waitFor(() => out.includes('"state":"background"'), {
      what: 'the background session',
      timeoutMs: 60_000,
    });
    await waitFor(() => processesMentioning(tag).length > 0, {
      what: 'the server running',
      timeoutMs: 10_000,
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      host.on('exit', (_c, sig) => resolve(sig)),
    );
    host.kill('SIGTERM');
    expect(await exited).toBe('SIGTERM');
    await waitFor(() => processesMentioning(tag).length === 0, {
      what: 'the host-exit kill',
      timeoutMs: 10_000,
    });
    expect(processesMentioning(tag)).toEqual([]);
  });

  it('leaves nothing behind when the host is SIGKILLed: the supervisor owns the sessions', async () => {
    const tag = `conch-sigkill-${process.pid}`;
    const script = join(dir, 'host-sigkill.mjs');
    writeFileSync(
      script,
      `
${HOST_PRELUDE}const job = await registry.execute('terminal', {
  command: "setsid bash -c 'exec -a ${tag}-escapee sleep 300' & (exec -a ${tag}-job sleep 300) & echo started",
});
const bg = await registry.execute('terminal', { command: "(exec -a ${tag}-server sleep 300)", background: true });
const shells = registry.resolve(TERMINAL_SERVICE).list().map((s) => s.pid);
console.log(JSON.stringify({ job, bg, shells }));
setInterval(() => {}, 1000);
`,
    );
    const host = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      host.on('exit', (_c, sig) => resolve(sig)),
    );
    onTestFinished(() => {
      host.kill('SIGKILL');
    });
    let out = '';
    host.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await waitFor(() => out.includes('"shells"'), { what: 'the sessions', timeoutMs: 60_000 });
    const { job, bg, shells } = JSON.parse(out) as {
      job: { output?: string };
      bg: { state?: string };
      shells: number[];
    };
    expect(job.output).toBe('started\n');
    expect(bg.state).toBe('background');
    expect(shells.length).toBeGreaterThan(0);
    await waitFor(() => processesMentioning(tag).length === 3, {
      what: 'the three sleeps',
      timeoutMs: 10_000,
    });
    host.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    await new Promise((r) => setTimeout(r, 3000));
    expect(processesMentioning(tag)).toEqual([]);
    for (const pid of shells) expect(isAlive(pid)).toBe(false);
  });
});
