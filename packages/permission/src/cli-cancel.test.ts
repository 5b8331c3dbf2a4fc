// Invariant: an aborted cli_based_tool call answers only once the command's whole tree is gone —
// SIGTERM first (a program that handles it cleans up), SIGKILL soon after for one that ignores it
// — in the default sandbox and outside it, foreground and before a background handoff.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PluginRegistry, TOKENS } from '@conch/core';
import { cliPlugin } from '@conch/cli';
import { findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { waitFor } from '@conch/test-support';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { permissionPlugin } from './plugin.js';

let dir: string;
let registry: PluginRegistry;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-cli-cancel-'));
});
afterEach(async () => {
  const prefix = registry.resolve<ProcessManager>(TOKENS.ProcessManager).cookiePrefix;
  await registry.dispose();
  expect(findCookiePids({ prefix }).filter((pid) => pidAlive(pid))).toEqual([]);
  rmSync(dir, { recursive: true, force: true });
});

async function pidsIn(file: string): Promise<number[]> {
  while (!(existsSync(file) && readFileSync(file, 'utf8').includes('\n')))
    await new Promise((r) => setTimeout(r, 20));
  return readFileSync(file, 'utf8').trim().split(/\s+/).map(Number);
}

describe.each([
  ['in the workspace sandbox', {}],
  ['with the sandbox off', { sandbox: 'off' }],
] as const)('an aborted call, %s', (_name, permission) => {
  test.each([
    ['a tree that ignores SIGTERM', `trap "" TERM; sleep 300 & echo $$ $! > pids; wait`],
    ['a plain sleep and its shell', `sleep 301 & echo $$ $! > pids; wait`],
    ['a pipeline of two', `echo $$ $$ > pids; sleep 302 | cat; true`],
    // The shell dies at SIGTERM and the pipes close with it, while a child lives on: one that
    // ignores SIGTERM with its output elsewhere, one in a session of its own, one stopped.
    [
      'a child that ignores SIGTERM, its output closed',
      `(trap "" TERM; exec >/dev/null 2>&1; sleep 303 & echo $$ $! > pids; wait) & wait`,
    ],
    [
      'an escapee in its own session, its output closed',
      `setsid sh -c 'exec >/dev/null 2>&1 </dev/null; sleep 304 & echo $$ $! > pids; wait' & wait`,
    ],
    [
      // (No `$$` here: a line that kills and names its own shell is refused by safety:selfKill.)
      'a stopped child, its output closed',
      `(exec >/dev/null 2>&1; sleep 305 & kill -STOP $!; echo $! > pids; wait) & wait`,
    ],
  ])('%s: nothing of it is alive when the call rejects', async (_case, command) => {
    registry = new PluginRegistry({ cwd: dir, plugins: [permissionPlugin, cliPlugin] });
    await registry.exposeTool('permission', { mode: 'acceptAll', ...permission });
    await registry.exposeTool('cli', { autoBackgroundThreshold: 600, background: false });
    const controller = new AbortController();
    const call = registry.execute(
      'cli_based_tool',
      { command, background: false, timeout: 600 },
      { signal: controller.signal },
    );
    call.catch(() => undefined);
    await pidsIn(join(dir, 'pids'));
    // Host pids of the command's tree (in the sandbox, $$ is a pid of its own namespace): the
    // processes carrying the manager's cookie that are not the registry's own (the supervisor).
    // The pids file is written right after the fork: the child may still be inside its exec, when
    // its environ reads empty and the cookie cannot be seen yet.
    const prefix = registry.resolve<ProcessManager>(TOKENS.ProcessManager).cookiePrefix;
    const tree = await waitFor(
      () => {
        const live = findCookiePids({ prefix })
          .filter((pid) => pidAlive(pid))
          .filter((pid) => {
            try {
              return !/supervisor/.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8'));
            } catch {
              return false; // ended meanwhile
            }
          });
        return live.length > 1 ? live : undefined;
      },
      { what: 'the command and its shell', timeoutMs: 30_000 },
    );
    controller.abort();
    await expect(call).rejects.toMatchObject({ code: 'ABORTED' });
    expect(tree.filter((pid) => pidAlive(pid))).toEqual([]);
  });
});
