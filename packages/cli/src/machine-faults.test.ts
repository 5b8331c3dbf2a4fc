// Invariant: when the machine misbehaves — an output directory that cannot be made, a full or read-only disk, a stopped or killed supervisor, a runaway output, numbers and sizes past the system's limits — cli_based_tool comes back with an error_code and a message saying what was kept, the host lives, and nothing is lost that the result does not name; a finished command's leftovers are never mistaken for a backgrounded command.
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { PluginRegistry } from '@conch/core';
import { findBwrap, PROCESS_MANAGER, procTable, type ProcessManager } from '@conch/process';
import { canMount, fillToTheLastByte, mountTmpfs, unmountAll, waitFor } from '@conch/test-support';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeRegistry, sandboxedRegistry, survivors, type Result } from './test-support/registry.js';

const BWRAP = findBwrap();
const BYTES = (n: number) => `head -c ${n} /dev/zero | tr '\\0' a`;

let dir: string;
const registries: PluginRegistry[] = [];
const stopped: number[] = [];
const savedTmpdir = process.env.TMPDIR;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-cli-faults-'));
});
afterEach(async () => {
  for (const pid of stopped.splice(0)) {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // killed, as it should be
    }
  }
  if (savedTmpdir === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTmpdir;
  unmountAll();
  for (const r of registries.splice(0)) {
    const prefix = r.resolveOptional(PROCESS_MANAGER)?.cookiePrefix;
    await r.dispose();
    if (prefix) expect(survivors(prefix)).toEqual([]);
  }
  rmSync(dir, { recursive: true, force: true });
});

/** A real tmpfs of `size` in this test's dir (or at `at`), read-only when asked; unmounted after the test. */
function tmpfs(size: string, options: { readOnly?: boolean; at?: string } = {}): string {
  return mountTmpfs(size, { ...options, at: options.at ?? mkdtempSync(join(dir, 'fs-')) });
}

function setup(config: Record<string, unknown> = {}) {
  const registry = makeRegistry(dir, config);
  registries.push(registry);
  const run = async (args: Record<string, unknown>) =>
    (await registry.execute('cli_based_tool', args)) as Result;
  return { registry, run, manager: () => registry.resolve(PROCESS_MANAGER) as ProcessManager };
}

/** A registry whose gate runs every command in the workspace-write sandbox. */
async function sandboxed(config: Record<string, unknown> = {}) {
  const registry = await sandboxedRegistry(dir, { config });
  registries.push(registry);
  const run = async (args: Record<string, unknown>) =>
    (await registry.execute('cli_based_tool', args)) as Result;
  return { registry, run, manager: () => registry.resolve(PROCESS_MANAGER) };
}

const gone = (pid: number) => !procTable().some((p) => p.pid === pid && p.state !== 'Z');

describe('output that cannot be kept where it was asked for', () => {
  it.each([60_000, 300_000])(
    'an outputDir under a file: %i bytes still land in a file, the result says where and why',
    async (size) => {
      writeFileSync(join(dir, 'a-file'), 'x');
      // Between 50,000 characters and 128 KiB the call used to throw after the command ran; over
      // 128 KiB the host died (ENOTDIR thrown inside a stream handler).
      const { run } = setup({ outputDir: 'a-file/out' });
      const r = await run({ command: BYTES(size) });
      expect(r).toMatchObject({ returncode: 0, truncated: true });
      expect(r.error_code).toBeUndefined();
      expect(readFileSync(r.output_file as string, 'latin1')).toBe('a'.repeat(size));
      expect(r.output_file_incomplete).toBeUndefined();
      expect(r.truncation_message).toContain(`The full output is in ${r.output_file}`);
      expect(r.truncation_message).toMatch(/not in .*a-file\/out, which could not be used \(.*ENOTDIR/);
    },
  );

  it.runIf(canMount)('a full disk: the result says how many bytes of how many the file holds', async () => {
    const small = tmpfs('2m');
    const { run } = setup({ outputDir: small });
    const r = await run({ command: BYTES(5_000_000) });
    expect(r.error_code).toBe('OUTPUT_TRUNCATED_DISK_FULL');
    expect(dirname(r.output_file as string)).toBe(small);
    const kept = statSync(r.output_file as string).size;
    expect(r.output_file_incomplete).toEqual({
      kept_bytes: kept,
      total_bytes: 5_000_000,
      reason: expect.stringMatching(/ENOSPC/),
    });
    expect(r.truncation_message).not.toMatch(/full output is in/i);
    expect(r.truncation_message).toContain(
      `Only the first ${kept.toLocaleString('en-US')} of 5,000,000 bytes`,
    );
    expect(r.error).toMatch(/disk filled up/);
    expect(r.display).toMatch(/OUTPUT_TRUNCATED_DISK_FULL.*\[partial: /);
  });

  it.runIf(canMount)(
    'a disk full before the first byte: no empty file is named, and the error says the disk is full',
    async () => {
      const small = tmpfs('1m');
      expect(fillToTheLastByte(small)).toBe(0);
      const { run } = setup({ outputDir: small });
      // Output within the memory budget, written out after the command because it was cut by
      // characters (named as saved in 1 run of 5 before the sink took the stream's error at once;
      // once in about 60 since, cause not found: see the session note), and output past the
      // budget, streamed to the file.
      for (const size of [300_000, 3_000_000, 5_000_000]) {
        const r = await run({ command: BYTES(size) });
        expect(r.returncode, JSON.stringify(r)).toBe(0);
        expect(r.error_code, JSON.stringify({ ...r, stdout: r.stdout.length })).toBe('OUTPUT_NOT_SAVED');
        expect(r.output_file).toBeUndefined();
        expect(r.output_file_incomplete).toMatchObject({ kept_bytes: 0, total_bytes: size });
        expect(r.error).toMatch(/could not be saved to a file.*tell the user the disk is full/);
        expect(r.display).not.toMatch(/\[partial: /);
        expect(r.stdout.startsWith('aaaa')).toBe(true);
      }
    },
  );

  it.runIf(canMount)(
    'a read-only disk: the file is made elsewhere and named; nowhere writable: OUTPUT_NOT_SAVED',
    async () => {
      const ro = tmpfs('1m', { readOnly: true });
      const { registry, run } = setup({ outputDir: ro });
      const moved = await run({ command: BYTES(300_000) });
      expect(moved.error_code).toBeUndefined();
      expect(readFileSync(moved.output_file as string, 'latin1')).toBe('a'.repeat(300_000));
      expect(moved.truncation_message).toMatch(/not in .*, which could not be used \(.*(EROFS|read-only)/i);
      // The registry's temp dir and the system's temp dir read-only too: no file anywhere.
      tmpfs('1m', { readOnly: true, at: registry.tempDir() });
      process.env.TMPDIR = ro;
      const lost = await run({ command: BYTES(300_000) });
      expect(lost.returncode).toBe(0);
      expect(lost.error_code).toBe('OUTPUT_NOT_SAVED');
      expect(lost.output_file).toBeUndefined();
      expect(lost.output_file_incomplete).toMatchObject({ kept_bytes: 0, total_bytes: 300_000 });
      expect(lost.error).toMatch(/could not be saved to a file/);
      expect(lost.stdout.startsWith('aaaa')).toBe(true);
    },
  );
});

describe('spill limits', () => {
  it('per call: the file stops at the limit and the result says how much was cut and that the command ran on', async () => {
    const { run } = setup({ spillLimitPerCall: 1_048_576 });
    const r = await run({ command: BYTES(3_000_000) });
    expect(r.returncode).toBe(0);
    expect(r.error_code).toBe('OUTPUT_LIMIT_REACHED');
    expect(statSync(r.output_file as string).size).toBe(1_048_576);
    expect(r.output_file_incomplete).toMatchObject({ kept_bytes: 1_048_576, total_bytes: 3_000_000 });
    expect(r.error).toMatch(/not stopped/);
  });

  it("onSpillLimit: 'stop' stops a runaway `cat /dev/zero` at the limit", async () => {
    const { run } = setup({ spillLimitPerCall: 1_048_576, onSpillLimit: 'stop' });
    const r = await run({ command: 'cat /dev/zero', background: false, timeout: 120 });
    expect(r.error_code).toBe('OUTPUT_LIMIT_REACHED');
    expect(r.error).toMatch(/was stopped/);
    expect(statSync(r.output_file as string).size).toBe(1_048_576);
  });

  it('per registry: the total is shared by every call', async () => {
    const { run } = setup({ spillLimitPerRegistry: 1_500_000 });
    expect((await run({ command: BYTES(1_000_000) })).error_code).toBeUndefined();
    const second = await run({ command: BYTES(1_000_000) });
    expect(second.error_code).toBe('OUTPUT_LIMIT_REACHED');
    expect(second.output_file_incomplete).toMatchObject({ kept_bytes: 500_000, total_bytes: 1_000_000 });
    expect(second.truncation_message).toMatch(/per-registry spill limit of 1,500,000 bytes/);
  });
});

const variants: [string, () => Promise<ReturnType<typeof setup>>][] = [
  ['unsandboxed', async () => setup()],
  ...(BWRAP || process.env.CI
    ? ([['in the workspace sandbox', () => sandboxed()]] as [
        string,
        () => Promise<ReturnType<typeof setup>>,
      ][])
    : []),
];

describe.each(variants)('a supervisor that misbehaves (%s)', (_name, make) => {
  it('stopped while the command runs: the error does not claim the command failed, and says to check its effects', async () => {
    const { run, manager, registry } = await make();
    expect((await run({ command: 'echo warm' })).stdout).toBe('warm\n');
    const pids = manager().supervisorPids();
    const off = registry.events.on('process.started', () => {
      process.kill(pids[0]!, 'SIGSTOP');
      stopped.push(pids[0]!);
    });
    // Still running when the supervisor is replaced (one that had ended is reported as it ended:
    // the next test).
    const r = await run({
      command: `touch ${join(dir, 'did-its-work')}; sleep 60`,
      timeout: 3,
      background: false,
    });
    off();
    expect(r.error_code, JSON.stringify(r)).toBe('SUPERVISOR_UNRESPONSIVE');
    expect(r.error).toMatch(/while it ran.*may have done its work.*check its effects/);
    expect(r.error).not.toMatch(/Run it again/);
    // (The health check's 10.5 s, then a new supervisor: 5x headroom on a busy machine.)
  }, 90_000);

  it('stopped after the command ended but before it could report it: its own exit and whole output, with a notice', async () => {
    const { run, manager, registry } = await make();
    expect((await run({ command: 'echo warm' })).stdout).toBe('warm\n');
    const pids = manager().supervisorPids();
    const go = join(dir, 'go');
    // Its first line in the host means its pipes are here too; then the supervisor stops and the
    // command ends, unreaped. The health check replaces the supervisor (10 s of stalled ticks).
    const off = registry.events.on('process.output', () => {
      off();
      process.kill(pids[0]!, 'SIGSTOP');
      stopped.push(pids[0]!);
      writeFileSync(go, '');
    });
    const r = await run({
      command: `echo first; while [ ! -e ${go} ]; do sleep 0.05; done; echo second; exit 4`,
      background: false,
    });
    expect(r.returncode, JSON.stringify(r)).toBe(4);
    expect(r.stdout).toBe('first\nsecond\n');
    expect(r.notice_code, JSON.stringify(r)).toBe('SUPERVISOR_REPLACED');
    expect(r.notice).toMatch(/had ended on its own \(exit 4\).*stopped answering.*output is complete/);
    expect(r.error_code).toBeUndefined();
    expect(r.error).toBeUndefined();
    expect((await run({ command: 'echo again' })).stdout).toBe('again\n');
  }, 90_000);

  it('stopped (SIGSTOP): timeout: 3 comes back as SUPERVISOR_UNRESPONSIVE, and the next call works', async () => {
    const { run, manager } = await make();
    expect((await run({ command: 'echo warm' })).stdout).toBe('warm\n');
    const pids = manager().supervisorPids();
    process.kill(pids[0]!, 'SIGSTOP');
    stopped.push(pids[0]!);
    const r = await run({ command: 'echo hi', timeout: 3 });
    expect(r.error_code).toBe('SUPERVISOR_UNRESPONSIVE');
    expect(r.error).toMatch(/stopped answering.*SIGSTOP/);
    for (const pid of pids)
      await waitFor(() => gone(pid), { what: `supervisor ${pid} gone`, timeoutMs: 10_000 });
    expect((await run({ command: 'echo again' })).stdout).toBe('again\n');
  }, 90_000);

  const targets: [string, (m: ProcessManager) => number, NodeJS.Signals][] = [
    ['SIGKILL of the supervisor', (m) => m.supervisorPids()[0]!, 'SIGKILL'],
    ['a crash (SIGSEGV)', (m) => m.supervisorPids()[0]!, 'SIGSEGV'],
  ];
  it.each(targets)(
    '%s: a foreground call and a background task both come back as SUPERVISOR_LOST',
    async (_how, target, signal) => {
      const { registry, run, manager } = await make();
      const task = await run({ command: 'sleep 60', background: true });
      const foreground = run({ command: 'sleep 60', background: false, timeout: 120 });
      await waitFor(
        () =>
          manager()
            .list()
            .filter((p) => p.isRunning && p.pid !== undefined).length === 2,
        {
          what: 'both commands running',
          timeoutMs: 10_000,
        },
      );
      process.kill(target(manager()), signal);
      const fg = await foreground;
      expect(fg.error_code).toBe('SUPERVISOR_LOST');
      expect(fg.error).toMatch(new RegExp(`supervisor (was killed|crashed).*${signal}`));
      const checked = (await registry.execute('check_background_task', {
        task_id: task.background_task_id,
        wait_seconds: 30,
      })) as Result;
      expect(checked.status).toBe('failed');
      expect(checked.result.error_code).toBe('SUPERVISOR_LOST');
      expect((await run({ command: 'echo again' })).stdout).toBe('again\n');
    },
  );
});

describe.runIf(BWRAP || process.env.CI)('a sandbox that dies around its supervisor', () => {
  function sandboxInit(supervisorPid: number): number {
    const ns = readlinkSync(`/proc/${supervisorPid}/ns/pid`);
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      try {
        const ids =
          /\nNSpid:\s+([^\n]*)/
            .exec(readFileSync(`/proc/${name}/status`, 'latin1'))?.[1]
            ?.trim()
            .split(/\s+/) ?? [];
        if (ids.length > 1 && ids.at(-1) === '1' && readlinkSync(`/proc/${name}/ns/pid`) === ns)
          return Number(name);
      } catch {
        // gone
      }
    }
    throw new Error('no pid 1 in the sandbox');
  }
  it.each([
    ['its bwrap', (m: ProcessManager) => m.supervisorPids()[1]!],
    ["the sandbox's pid 1", (m: ProcessManager) => sandboxInit(m.supervisorPids()[0]!)],
  ] as const)('SIGKILL of %s: SUPERVISOR_LOST', async (_what, target) => {
    const { run, manager } = await sandboxed();
    const call = run({ command: 'sleep 60', background: false, timeout: 120 });
    await waitFor(
      () =>
        manager()
          .list()
          .some((p) => p.isRunning && p.pid !== undefined),
      {
        what: 'the command running',
        timeoutMs: 10_000,
      },
    );
    process.kill(target(manager()), 'SIGKILL');
    const r = await call;
    expect(r.error_code).toBe('SUPERVISOR_LOST');
    expect(r.error).toMatch(/supervisor was killed \(SIGKILL/);
  });
});

describe('numbers and sizes past what the system takes', () => {
  it('a timeout past the timer limit is INVALID_ARGUMENTS naming the field and the maximum, never an instant TIMED_OUT', async () => {
    const { registry } = setup();
    const error = await registry
      .execute('cli_based_tool', { command: 'echo hi', timeout: 2 ** 31 / 1000 + 1 })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toMatchObject({ code: 'INVALID_ARGUMENTS' });
    expect((error as Error).message).toMatch(/timeout.*at most 2147483 seconds/);
    // The largest allowed value is a real (long) limit: the command runs to its end.
    const { run } = setup();
    expect(await run({ command: 'echo hi', timeout: 2147483, background: false })).toMatchObject({
      stdout: 'hi\n',
      returncode: 0,
    });
  });

  it('a 1 MB command runs (a shell script from a file); one argument of an external program that big is refused naming `command`; past 1 MiB the command is refused before it is parsed', async () => {
    const { run } = setup();
    // `echo` is a shell builtin, so the line runs in shell mode: from a file, it just works.
    const builtin = await run({ command: `echo ${'x'.repeat(1_000_000)}` });
    expect(builtin).toMatchObject({ returncode: 0, mode: 'shell' });
    expect(builtin.truncation_message).toMatch(/stdout 1,000,001 bytes/);
    expect(statSync(builtin.output_file as string).size).toBe(1_000_001);
    // An external program cannot be given one argument over 128 KiB by any means: said as such
    // (bash's "Argument list too long" exits 126, which is no permission problem).
    for (const args of [
      { command: `/bin/echo ${'x'.repeat(1_000_000)}` },
      { command: '/bin/echo', args: ['y'.repeat(131_072)] },
    ]) {
      const r = await run(args);
      expect(r.error_code).toBe('INVALID_ARGUMENTS');
      expect(r.error).toMatch(/too long.*131,072 bytes in one argument.*'(command|args)'/);
      expect(r.error).not.toMatch(/spawn E2BIG|Permission denied/);
    }
    // The tool's argument limits (CLI_ARGUMENT_LIMITS): a command past 1 MiB, an argument past
    // what a program can take, refused by the registry naming the field and the size.
    await expect(run({ command: `echo ${'x'.repeat(10_000_000)}` })).rejects.toThrow(
      /command: a string of at most 1048576 bytes \(UTF-8\); received a string of 10000005 bytes/,
    );
    await expect(run({ command: '/bin/echo', args: ['y'.repeat(200_000)] })).rejects.toThrow(
      /args\.0: a string of at most 131072 bytes \(UTF-8\); received a string of 200000 bytes/,
    );
  });

  it('a script over 128 KiB (a heredoc) runs from a file, exactly as judged', async () => {
    const { run } = setup();
    const body = Array.from({ length: 4000 }, (_, i) => `line ${i} ${'z'.repeat(40)}`).join('\n');
    const r = await run({ command: `cat > big.txt <<'EOF'\n${body}\nEOF\nwc -c < big.txt` });
    expect(r.error_code).toBeUndefined();
    expect(r.returncode).toBe(0);
    expect(readFileSync(join(dir, 'big.txt'), 'utf8')).toBe(`${body}\n`);
    expect(Number(r.stdout.trim())).toBe(body.length + 1);
  });
});

describe('one field, one meaning', () => {
  it('a finished command that left a server running returns its own result; the leftovers are left_running_task_id', async () => {
    const { registry, run } = setup();
    const r = await run({ command: 'sleep 300 & echo started' });
    expect(r).toMatchObject({ returncode: 0, stdout: 'started\n' });
    expect(r.background_task_id).toBeUndefined();
    expect(r.left_running).toHaveLength(1);
    expect(r.left_running_task_id).toEqual(expect.stringMatching(/^cli_/));
    const tasks = (await registry.execute('list_background_tasks', {})) as Result;
    expect(JSON.stringify(tasks)).toContain(r.left_running_task_id as string);
    await registry.execute('cancel_background_task', { task_id: r.left_running_task_id });
  });
});
