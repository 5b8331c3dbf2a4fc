// conch-mcp with an `executor` entry in conch.config.json drives a remote target (a real sshd on 127.0.0.1): cli_based_tool, background tasks and terminal run there, and stopping the server leaves nothing running there.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { processesMentioning, removeTempDirs, tempDir, waitFor } from '@conch/test-support';
import { sshdAvailable, startSshd, type TestSshd } from '@conch/test-support/sshd';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Harness, startServer } from './test-support/harness.js';

type Structured = Record<string, unknown>;

describe.skipIf(!sshdAvailable())('conch-mcp with an ssh executor in conch.config.json', () => {
  let sshd: TestSshd;
  let harness: Harness | undefined;
  let targetName: string;

  const call = async (name: string, args: Record<string, unknown>) => {
    const result = (await harness!.client.callTool({ name, arguments: args })) as CallToolResult;
    return result.structuredContent as Structured;
  };

  beforeAll(async () => {
    sshd = await startSshd();
    targetName = `ssh:${sshd.user}@127.0.0.1:${sshd.port}`;
    const cwd = tempDir('conch-mcp-ssh-');
    writeFileSync(
      join(cwd, 'conch.config.json'),
      JSON.stringify({
        plugins: {
          executor: {
            kind: 'ssh',
            host: sshd.host,
            port: sshd.port,
            user: sshd.user,
            identity_file: sshd.identityFile,
            options: sshd.options,
          },
          permission: { mode: 'acceptAll' },
          cli: {},
          background: {},
          terminal: {},
        },
      }),
    );
    harness = await startServer({ cwd });
  });

  afterAll(async () => {
    await harness?.close();
    await sshd?.stop();
    removeTempDirs();
  });

  test('cli_based_tool and terminal run in the target and say so', async () => {
    const cli = await call('cli_based_tool', { command: 'echo "$PWD|$HOME"' });
    expect(cli).toMatchObject({ returncode: 0, stdout: `${sshd.home}|${sshd.home}\n`, target: targetName });
    const term = await call('terminal', { command: 'echo "$HOME"' });
    expect(term).toMatchObject({ exit_code: 0, target: targetName });
    expect(String(term.output)).toContain(sshd.home);
  });

  test('closing the server ends what it started in the target', async () => {
    const seconds = `${300 + Math.floor(Math.random() * 600)}.${process.pid}`;
    const started = await call('cli_based_tool', { command: `sleep ${seconds}`, background: true });
    expect(started).toMatchObject({ target: targetName });
    await waitFor(() => processesMentioning(`sleep ${seconds}`).length > 0, { what: 'the remote sleep' });
    await harness!.close();
    harness = undefined;
    await waitFor(() => processesMentioning(`sleep ${seconds}`).length === 0, {
      what: 'the remote sleep ended with the server',
      timeoutMs: 30_000,
    });
  });
});
