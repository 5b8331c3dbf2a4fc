// Invariant: one plan per call reaches the gate and the runner; shell mode is bash (sh only as a fallback the gate reads as sh); the kernel enforces what the gate allowed — reads run read-only, protected paths stay read-only even for approved commands; leftovers are owned; every cut output keeps every byte in output_file.
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { backgroundPlugin } from '@conch/background';
import {
  PluginRegistry,
  type PermissionGate,
  type PermissionRequest,
  type PluginDefinition,
  type ToolResult,
} from '@conch/core';
import { findBwrap, PROCESS_MANAGER } from '@conch/process';
import { waitFor } from '@conch/test-support';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cliPlugin } from './plugin.js';
import { gatePlugin, survivors } from './test-support/registry.js';

const BWRAP = findBwrap();
if (process.env.CI && !BWRAP) throw new Error('the kernel wall tests need bubblewrap under CI');

type Result = ToolResult & Record<string, any>;
const sha1 = (b: Buffer) => createHash('sha1').update(b).digest('hex');

let dir: string;
const registries: PluginRegistry[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-walls-'));
});
afterEach(async () => {
  for (const r of registries.splice(0)) {
    const prefix = r.resolveOptional(PROCESS_MANAGER)?.cookiePrefix;
    await r.dispose();
    if (prefix) expect(survivors(prefix)).toEqual([]);
  }
  rmSync(dir, { recursive: true, force: true });
});

/** A gate that allows everything and calls it a read (a parser mistake, made on purpose). */
function misjudgingGate(readOnlyPaths: string[] = []) {
  const seen: PermissionRequest[] = [];
  const gate: PermissionGate = {
    check: async (request) => {
      seen.push(request);
      return { outcome: 'allow', reason: 'test: allowed as a read', readOnly: true };
    },
    kernelPolicy: () => ({ mode: 'off', writableRoots: [], readOnlyPaths, pinnedPaths: [], env: {} }),
  };
  const plugin = gatePlugin(gate);
  return { plugin, seen };
}

async function registryWith(
  plugins: PluginDefinition[],
  expose: [string, Record<string, unknown>][],
): Promise<PluginRegistry> {
  const registry = new PluginRegistry({ cwd: dir, plugins: [cliPlugin, backgroundPlugin, ...plugins] });
  registries.push(registry);
  for (const [name, config] of expose) await registry.expose(name, config);
  return registry;
}

const run = async (registry: PluginRegistry, args: Record<string, unknown>) =>
  (await registry.execute('cli_based_tool', args)) as Result;

describe('one plan, one dialect', () => {
  it('the gate judges the plan that runs: the same line, mode, shell and cwd', async () => {
    const { plugin, seen } = misjudgingGate();
    const registry = await registryWith(
      [plugin],
      [
        ['test-gate', {}],
        ['cli', {}],
      ],
    );
    const started: { command: string }[] = [];
    registry.events.on('process.started', (e) => started.push(e));
    await run(registry, { command: 'printf %s "$0"', args: ["it's"] });
    const plan = (seen[0] as { plan: { line: string; mode: string; shell: string; dialect: string } }).plan;
    expect(plan).toMatchObject({ line: `printf %s "$0" 'it'\\''s'`, mode: 'shell', dialect: 'bash' });
    expect(plan.shell).toMatch(/bash$/);
    expect(started[0]?.command).toBe(plan.line);
  });

  it('shell mode runs bash, so bash syntax the gate parses means the same thing when it runs', async () => {
    const { plugin } = misjudgingGate();
    const registry = await registryWith(
      [plugin],
      [
        ['test-gate', {}],
        ['cli', {}],
      ],
    );
    const r = await run(registry, { command: '[[ a == a ]] && echo "bash ${BASH_VERSINFO[0]}" | cat' });
    expect(r).toMatchObject({ returncode: 0, mode: 'shell' });
    expect(r.stdout).toMatch(/^bash \d/);
  });
});

describe.skipIf(!BWRAP)('the kernel wall', () => {
  it('a command allowed as a read that writes fails with EROFS, and the result says so', async () => {
    const { plugin } = misjudgingGate();
    const registry = await registryWith(
      [plugin],
      [
        ['test-gate', {}],
        ['cli', {}],
      ],
    );
    const r = await run(registry, { command: 'touch made-by-a-read; echo done' });
    expect(existsSync(join(dir, 'made-by-a-read'))).toBe(false);
    expect(r.stderr).toMatch(/Read-only file system/);
    // The script's last command succeeded; the sandbox refusal is still reported when the exit is non-zero:
    const failed = await run(registry, { command: 'echo x > made-by-a-read' });
    expect(failed).toMatchObject({ error_code: 'SANDBOX_REFUSED_WRITE' });
    expect(failed.error).toMatch(/read-only sandbox/);
    expect(existsSync(join(dir, 'made-by-a-read'))).toBe(false);
  });

  it('a read runs without network and with a private /tmp', async () => {
    const { plugin } = misjudgingGate();
    const registry = await registryWith(
      [plugin],
      [
        ['test-gate', {}],
        ['cli', {}],
      ],
    );
    const marker = join(tmpdir(), `conch-wall-${process.pid}-${Date.now()}`);
    const server = createServer((socket) => socket.end('reached\n'));
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
    const port = (server.address() as AddressInfo).port;
    try {
      // A fresh network namespace: its loopback is not the host's, so the host's server is unreachable.
      const r = await run(registry, {
        command: `touch ${marker}; cat < /dev/tcp/127.0.0.1/${port}; echo "rc=$?"`,
      });
      expect(r.stdout).not.toContain('reached');
      expect(r.stdout).toMatch(/rc=1/);
      // The file it made went to the sandbox's private /tmp, not the host's.
      expect(existsSync(marker)).toBe(false);
    } finally {
      server.close();
    }
  });
});

describe('without bubblewrap', () => {
  it('commands run unsandboxed, and the process layer says why', async () => {
    const saved = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      const { plugin } = misjudgingGate();
      const registry = await registryWith(
        [plugin],
        [
          ['test-gate', {}],
          ['cli', { extraPaths: ['/usr/bin', '/bin'] }],
        ],
      );
      const r = await run(registry, { command: 'echo unsandboxed > out.txt' });
      expect(r).toMatchObject({ returncode: 0 });
      expect(readFileSync(join(dir, 'out.txt'), 'utf8')).toBe('unsandboxed\n');
      const status = (await registry.status()) as unknown as {
        processes: { sandbox: { available: boolean; reason?: string } };
      };
      expect(status.processes.sandbox).toMatchObject({ available: false });
      expect(status.processes.sandbox.reason).toMatch(/bwrap/);
    } finally {
      process.env.PATH = saved;
    }
  });
});

describe('leftovers', () => {
  it('are adopted as a background task that check, read and cancel work on', async () => {
    const { plugin } = misjudgingGate();
    const registry = await registryWith(
      [plugin],
      [
        ['test-gate', {}],
        ['cli', {}],
      ],
    );
    const prefix = registry.resolve(PROCESS_MANAGER).cookiePrefix;
    const r = await run(registry, { command: '(sleep 2; echo late; sleep 300) & echo started' });
    expect(r).toMatchObject({ returncode: 0, stdout: 'started\n' });
    expect(r.left_running.length).toBeGreaterThan(0);
    expect(r.left_running_message).toMatch(/background task/);
    // The command finished: its own result, with the leftovers' task named apart from
    // background_task_id (which would say the command itself was backgrounded).
    expect(r.background_task_id).toBeUndefined();
    const id = r.left_running_task_id as string;
    await waitFor(() => survivors(prefix).length > 0, { what: 'leftovers running', timeoutMs: 5_000 });
    const logs = () => registry.execute('read_background_output', { task_id: id }) as Promise<Result>;
    await waitFor(async () => String((await logs()).output ?? '').includes('late'), {
      what: "the leftover's late output",
      timeoutMs: 10_000,
      intervalMs: 100,
    });
    expect(String((await logs()).output)).toContain('late');
    await registry.execute('cancel_background_task', { task_id: id });
    await waitFor(() => survivors(prefix).length === 0, { what: 'leftovers killed', timeoutMs: 10_000 });
  });

  it("are killed with leftovers: 'kill', and without a background plugin", async () => {
    const { plugin } = misjudgingGate();
    for (const [cli, withBackground] of [
      [{ leftovers: 'kill' }, true],
      [{ background: false }, false],
    ] as const) {
      const registry = new PluginRegistry({
        cwd: dir,
        plugins: [cliPlugin, ...(withBackground ? [backgroundPlugin] : []), plugin],
      });
      registries.push(registry);
      await registry.expose('test-gate');
      await registry.expose('cli', cli);
      const prefix = registry.resolve(PROCESS_MANAGER).cookiePrefix;
      const r = await run(registry, { command: 'setsid sleep 300 & echo ok' });
      expect(r.left_running.length).toBeGreaterThan(0);
      expect(r.left_running_message).toMatch(/killed/);
      expect(r.background_task_id).toBeUndefined();
      expect(r.left_running_task_id).toBeUndefined();
      await waitFor(() => survivors(prefix).length === 0, { what: 'leftovers killed', timeoutMs: 10_000 });
    }
  });
});

describe('nothing lost', () => {
  it.each([50_001, 120_000, 199_999])(
    'an output of %i bytes keeps every byte in output_file',
    async (size) => {
      const { plugin } = misjudgingGate();
      const registry = await registryWith(
        [plugin],
        [
          ['test-gate', {}],
          ['cli', {}],
        ],
      );
      const r = await run(registry, { command: `yes 0123456789abcdef | head -c ${size}` });
      const expected = '0123456789abcdef\n'.repeat(Math.ceil(size / 17)).slice(0, size);
      expect(r.truncated).toBe(true);
      expect(typeof r.output_file).toBe('string');
      const bytes = readFileSync(r.output_file as string);
      expect(sha1(bytes)).toBe(sha1(Buffer.from(expected)));
      expect(r.truncation_message).toContain(r.output_file);
    },
  );
});
