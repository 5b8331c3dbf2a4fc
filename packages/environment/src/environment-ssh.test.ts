// createEnvironment({ executor: { kind: 'ssh', ... } }) over a real sshd: the shell, the processes, the files and the model's tools all work in the target, and close() leaves nothing running there.
import { existsSync } from 'node:fs';
import { processesMentioning, removeTempDirs, tempDir, waitFor } from '@conch/test-support';
import { sshdAvailable, sshExecutorConfig, startSshd, type TestSshd } from '@conch/test-support/sshd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, type Environment } from './environment.js';

describe.skipIf(!sshdAvailable())('an environment whose executor is an ssh host (real sshd)', () => {
  let sshd: TestSshd;
  let env: Environment;
  let targetName: string;

  beforeAll(async () => {
    sshd = await startSshd();
    targetName = `ssh:${sshd.user}@127.0.0.1:${sshd.port}`;
    env = await createEnvironment({
      workingDir: tempDir('conch-env-host-'),
      tmpRoot: tempDir('conch-env-tmp-'),
      executor: {
        ...sshExecutorConfig(sshd),
      },
      plugins: { permission: { mode: 'acceptAll' }, cli: {}, background: {}, terminal: {} },
      files: true,
    });
  });

  afterAll(async () => {
    await env?.close();
    await sshd?.stop();
    removeTempDirs();
  });

  it('runs the shell in the target: its workspace and HOME, results naming where they ran', async () => {
    expect(env.target?.target).toBe(targetName);
    const result = await env.shell.run('echo "$PWD|$HOME"; echo err >&2');
    expect(result).toMatchObject({ returncode: 0, stdout: `${sshd.home}|${sshd.home}\n`, stderr: 'err\n' });
    expect((result as { target?: string }).target).toBe(targetName);
    // The shell's processes are the target's, listed with this machine's.
    expect(env.processes.list().some((p) => p.command.includes('echo "$PWD|$HOME"'))).toBe(true);
    expect((await env.status()).executor).toMatchObject({ kind: 'ssh', target: targetName });
  });

  it("env.files and the model's file tools work on the target's files", async () => {
    const name = `conch-env-${process.pid}.txt`;
    await env.files.write(name, 'one\ntwo\n');
    expect((await env.files.read(name)).content).toBe('one\ntwo\n');
    if (sshd.isolated) expect(existsSync(`/tmp/${name}`)).toBe(false);
    const read = await env.registry.execute('read_file', { path: name, offset: 2 });
    expect(read).toMatchObject({ path: name, content: 'two\n' });
    const edited = await env.registry.execute('edit_file', {
      path: name,
      old_string: 'two',
      new_string: '2',
    });
    expect(edited).toMatchObject({ path: name, replacements: 1 });
    expect((await env.shell.run(`cat ${name}`)).stdout).toBe('one\n2\n');
    // The host's protected-path rule judges the target's paths.
    const refused = await env.registry.execute('write_file', { path: '.ssh/authorized_keys', content: 'x' });
    expect(refused).toMatchObject({ error_code: 'PROTECTED_PATH' });
    await env.shell.run(`rm ${name}`);
  });

  it('the terminal tool runs its sessions in the target', async () => {
    const result = await env.registry.execute('terminal', { command: 'echo "$HOME"' });
    expect(result).toMatchObject({ exit_code: 0, target: targetName });
    expect(String(result.output)).toContain(sshd.home);
  });

  it('close() kills what runs in the target (a background task included)', async () => {
    const seconds = `${300 + Math.floor(Math.random() * 600)}.${process.pid}`;
    const started = await env.registry.execute('cli_based_tool', {
      command: `sleep ${seconds}`,
      background: true,
    });
    expect(started).toMatchObject({ target: targetName });
    await waitFor(() => processesMentioning(`sleep ${seconds}`).length > 0, { what: 'the remote sleep' });
    await env.close();
    await waitFor(() => processesMentioning(`sleep ${seconds}`).length === 0, {
      what: 'the remote sleep killed by close()',
      timeoutMs: 30_000,
    });
  });
});
