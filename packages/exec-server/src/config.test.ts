// The executor switch: bad configs are refused naming the field, each kind makes the right target, and the `executor` plugin provides it to a registry (from conch.config.json too) and closes it with the registry.
import 'reflect-metadata';
import { createRegistryFromConfig, PluginRegistry } from '@conch/core';
import { ProcessManager, probeSandbox } from '@conch/process';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { RemoteFileOperator } from './client/remote-file-operator.js';
import { RemoteProcessManager } from './client/remote-process-manager.js';
import { executorFromConfig, parseExecutorConfig } from './execution-target.js';
import { executorPlugin } from './executor-plugin.js';
import { fakeExecCommand, type FakeCommand } from './test-support/fake-kubectl.js';
import { EXECUTION_TARGET, FILE_OPERATIONS_TARGET, PROCESS_LAYER, TERMINAL_BACKEND } from './tokens.js';

describe('executor config', () => {
  test.each([
    [{ kind: 'ssh' }, /host: .*expected string.*received nothing/],
    [{ kind: 'ssh', host: 'box', port: 0 }, /port: .*>=1; received 0/],
    [
      { kind: 'cloud' },
      /kind: .*'local' \| 'bubblewrap' \| 'ssh' \| 'container' \| 'kubernetes'; received "cloud"/,
    ],
    [{ kind: 'container' }, /container: .*expected string/],
    [{ kind: 'kubernetes', pod: 'p', bogus: 1 }, /bogus/],
  ])('%j is refused naming the field', (config, message) => {
    let error: unknown;
    try {
      parseExecutorConfig(config);
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({
      code: 'INVALID_CONFIG',
      name: 'InvalidConfigError',
      pluginName: 'executor',
    });
    expect((error as Error).message).toMatch(message);
  });

  test('snake_case keys are accepted, defaults filled in', () => {
    expect(
      parseExecutorConfig({ kind: 'ssh', host: 'box', identity_file: '/k', control_persist_seconds: 5 }),
    ).toEqual({
      kind: 'ssh',
      host: 'box',
      identityFile: '/k',
      controlPersistSeconds: 5,
    });
    expect(parseExecutorConfig({ kind: 'container', container: 'c' })).toEqual({
      kind: 'container',
      engine: 'docker',
      container: 'c',
    });
  });

  test('local runs on this machine; remote kinds name their target and connect only when used', async () => {
    const local = executorFromConfig({ kind: 'local' }, { cwd: process.cwd() });
    try {
      expect(local.processes).toBeInstanceOf(ProcessManager);
      expect(local.target).toBe('local');
      const result = await local.processes.spawn('echo', ['here']).result;
      expect(result.stdout.head).toBe('here\n');
      expect((await local.files.stat('package.json')).type).toBe('file');
    } finally {
      await local.dispose();
    }
    const ssh = executorFromConfig(
      { kind: 'ssh', host: 'dev.example', user: 'me', port: 2222 },
      { cwd: '/' },
    );
    expect(ssh.target).toBe('ssh:me@dev.example:2222');
    expect(ssh.processes).toBeInstanceOf(RemoteProcessManager);
    expect(ssh.client!.currentGeneration).toBeUndefined();
    await ssh.dispose();
    const pod = executorFromConfig({ kind: 'kubernetes', pod: 'p', namespace: 'n' }, { cwd: '/' });
    expect(pod.target).toBe('kubernetes:n/p');
    await pod.dispose();
    expect(
      executorFromConfig({ kind: 'container', engine: 'podman', container: 'box' }, { cwd: '/' }).target,
    ).toBe('podman:box');
  });

  test('bubblewrap wraps every command of its process manager', async () => {
    if (!(await probeSandbox()).available) {
      expect(process.env.CI).not.toBe('true');
      return;
    }
    const wrapped = executorFromConfig({ kind: 'bubblewrap' }, { cwd: process.cwd() });
    try {
      expect(wrapped.executor?.name).toBe('bubblewrap');
      // The root is read-only inside; the workspace stays writable.
      const result = await wrapped.processes.spawn('sh', ['-c', 'touch /conch-bwrap-probe 2>&1; echo $?'])
        .result;
      expect(result.stdout.head).toMatch(/Read-only file system[\s\S]*\n1\n$/);
    } finally {
      await wrapped.dispose();
    }
  });
});

describe('the executor plugin', () => {
  let kubectl: FakeCommand;
  beforeAll(() => {
    kubectl = fakeExecCommand('kubectl');
  });
  afterAll(() => kubectl.remove());

  test("provides the target, its terminal backend and the files plugin's operations, reports status, and closes the connection on dispose", async () => {
    const registry = new PluginRegistry({ plugins: [executorPlugin] });
    await registry.expose('executor', { kind: 'kubernetes', pod: 'sandbox', kubectl: kubectl.path });
    const target = registry.resolveOptional(EXECUTION_TARGET)!;
    expect(target.target).toBe('kubernetes:default/sandbox');
    expect(registry.resolveOptional(TERMINAL_BACKEND)).toBe(target.terminal);
    expect(registry.resolveOptional(PROCESS_LAYER)).toBe(target.processes);
    const result = await target.processes.spawn('echo', ['from the pod']).result;
    expect(result.stdout.head).toBe('from the pod\n');
    // The files plugin's tools go to the pod: one RemoteFileOperator per request (a files config).
    const request = { policy: { maxReadLines: 5 }, protectedReason: () => undefined };
    const files = registry.resolveOptional(FILE_OPERATIONS_TARGET)!.operationsFor(request);
    expect(files).toBeInstanceOf(RemoteFileOperator);
    expect(registry.resolveOptional(FILE_OPERATIONS_TARGET)!.operationsFor(request)).toBe(files);
    expect(await files!.stat('.')).toMatchObject({ path: kubectl.workdir, type: 'directory' });
    const status = (await registry.status()) as unknown as { executor: { connected: boolean; cwd: string } };
    expect(status.executor).toMatchObject({ connected: true, cwd: kubectl.workdir });
    expect(registry.systemInstructions()).toContain('run on kubernetes:default/sandbox');
    await registry.dispose();
    expect(target.client!.disposed).toBe(true);
    expect(target.client!.currentGeneration).toBeUndefined();
  });

  test('the local kinds leave the files plugin on this machine (no FILE_OPERATIONS_TARGET)', async () => {
    const registry = new PluginRegistry({ plugins: [executorPlugin] });
    try {
      await registry.expose('executor', { kind: 'local' });
      expect(registry.resolveOptional(EXECUTION_TARGET)?.kind).toBe('local');
      expect(registry.resolveOptional(FILE_OPERATIONS_TARGET)).toBeUndefined();
    } finally {
      await registry.dispose();
    }
  });

  test('conch.config.json: `plugins.executor` is exposed like any plugin', async () => {
    const registry = await createRegistryFromConfig(
      { plugins: { executor: { kind: 'kubernetes', pod: 'cfg', kubectl: kubectl.path } } },
      { plugins: [executorPlugin] },
    );
    try {
      expect(registry.resolveOptional(EXECUTION_TARGET)?.target).toBe('kubernetes:default/cfg');
    } finally {
      await registry.dispose();
    }
  });
});
