// Invariant: every refusal by the sandbox says it was the wall, with its code and the way out — a signal to a process outside (SANDBOX_REFUSED_SIGNAL, the process unharmed), a write and a secret in one command (both codes), CMake's own wording of a refused install — and a pid that exists nowhere is a plain mistake, not a wall.
import 'reflect-metadata';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, type ToolResult } from '@conch/core';
import { findBwrap, pidAlive } from '@conch/process';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { permissionPlugin } from './plugin.js';

const TEST_TIMEOUT = 10 * 60_000;
type Result = ToolResult & Record<string, any>;

let ws: string;
let home: string;
let savedHome: string | undefined;
const registries: PluginRegistry[] = [];
const children: ChildProcess[] = [];

beforeEach(() => {
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-wall-codes-')));
  home = realpathSync(mkdtempSync(join(tmpdir(), 'conch-wall-codes-home-')));
  savedHome = process.env.HOME;
  process.env.HOME = home;
});
afterEach(async () => {
  for (const r of registries.splice(0)) await r.dispose();
  for (const c of children.splice(0)) c.kill('SIGKILL');
  if (savedHome === undefined) delete process.env.HOME;
  else process.env.HOME = savedHome;
  rmSync(ws, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

async function setup() {
  const registry = new PluginRegistry({ cwd: ws, plugins: [permissionPlugin, cliPlugin] });
  registries.push(registry);
  await registry.expose('permission', { approve: async () => 'deny' as const });
  await registry.expose('cli', {});
  return async (command: string) =>
    (await registry.execute('cli_based_tool', { command, background: false, timeout: 600 })) as Result;
}

describe.runIf(findBwrap() || process.env.CI)('the wall names itself', () => {
  it(
    'a signal to a host process is SANDBOX_REFUSED_SIGNAL, in every spelling, and the process lives',
    async () => {
      const sleeper = spawn('sleep', ['1000'], { stdio: 'ignore' });
      children.push(sleeper);
      const pid = sleeper.pid!;
      const run = await setup();
      for (const command of [
        `kill ${pid}`,
        `kill -9 ${pid}`,
        `/bin/kill -TERM ${pid}`,
        `python3 -c "import os, signal; os.kill(${pid}, signal.SIGTERM)"`,
      ]) {
        const result = await run(command);
        expect(result.sandbox, JSON.stringify(result)).toBe('workspace-write');
        if (result.permission_denied) continue; // the gate may refuse some spellings outright
        expect(result.error_code, JSON.stringify(result)).toBe('SANDBOX_REFUSED_SIGNAL');
        expect(result.refused_pid).toBe(pid);
        expect(result.error).toContain('sandbox: false');
        expect(pidAlive(pid)).toBe(true);
      }
      // A pid nobody has is the command's own mistake.
      const nobody = await run('kill 4000000');
      expect(nobody.error_code).not.toBe('SANDBOX_REFUSED_SIGNAL');
    },
    TEST_TIMEOUT,
  );

  it(
    'a write outside and a hidden secret in one command carry both codes',
    async () => {
      writeFileSync(join(ws, '.env'), 'TOKEN=abc123\n');
      const run = await setup();
      const result = await run('touch /usr/conch-wall-codes-probe; cat .env');
      expect(result.error_code, JSON.stringify(result)).toBe('SANDBOX_REFUSED_WRITE');
      expect(result.error_codes).toEqual(['SANDBOX_REFUSED_WRITE', 'SECRET_HIDDEN']);
      expect(result.stdout ?? '').not.toContain('abc123');
    },
    TEST_TIMEOUT,
  );

  it(
    "CMake's wording of a refused install is SANDBOX_REFUSED_WRITE with its path",
    async () => {
      // A stand-in that fails as CMake does when an install directory is not writable.
      mkdirSync(join(ws, 'bin'));
      const fake = join(ws, 'bin', 'fake-cmake');
      writeFileSync(
        fake,
        '#!/bin/sh\nmkdir -p /usr/local/lib/cmake/conch-probe 2>/dev/null || { echo "CMake Error at cmake_install.cmake:41 (file):" >&2; echo "  file cannot create directory: /usr/local/lib/cmake/conch-probe.  Maybe need" >&2; echo "  administrative privileges." >&2; exit 1; }\n',
      );
      chmodSync(fake, 0o755);
      const run = await setup();
      const result = await run('./bin/fake-cmake');
      expect(result.error_code, JSON.stringify(result)).toBe('SANDBOX_REFUSED_WRITE');
      expect(result.refused_path).toBe('/usr/local/lib/cmake/conch-probe');
    },
    TEST_TIMEOUT,
  );
});
