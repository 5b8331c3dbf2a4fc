// Invariant: with the permission config's `engine`, a sandboxed command reaches the host's container engine only through conch's policy socket (DOCKER_HOST and /run/docker.sock inside): allowed calls answer, escapes are refused with their rule before the engine sees them; without it there is no engine socket in the sandbox at all.
import 'reflect-metadata';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, type ToolResult } from '@conch/core';
import { findBwrap } from '@conch/process';
import { startPodmanService } from '@conch/test-support/podman';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { permissionPlugin } from './plugin.js';

const TEST_TIMEOUT = 10 * 60_000;
type Result = ToolResult & Record<string, any>;

const podmanWorks = spawnSync('podman', ['--version']).status === 0;

let ws: string;
let saved: string | undefined;
const registries: PluginRegistry[] = [];
let service: { socket: string; stop: () => Promise<void> } | undefined;

beforeEach(() => {
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-engine-door-')));
  saved = process.env.DOCKER_HOST;
});
afterEach(async () => {
  for (const r of registries.splice(0)) await r.dispose();
  await service?.stop();
  service = undefined;
  if (saved === undefined) delete process.env.DOCKER_HOST;
  else process.env.DOCKER_HOST = saved;
  rmSync(ws, { recursive: true, force: true });
});

async function setup(permission: Record<string, unknown>) {
  const registry = new PluginRegistry({ cwd: ws, plugins: [permissionPlugin, cliPlugin] });
  registries.push(registry);
  await registry.expose('permission', { ...permission, approve: async () => 'deny' as const });
  await registry.expose('cli', {});
  return async (command: string) =>
    (await registry.execute('cli_based_tool', { command, background: false, timeout: 600 })) as Result;
}

const api = (method: string, path: string, body?: unknown) =>
  `curl -s -X ${method} --unix-socket /run/docker.sock -H 'Content-Type: application/json' ${
    body === undefined ? '' : `-d '${JSON.stringify(body)}'`
  } http://d${path}`;

describe.runIf((findBwrap() || process.env.CI) && podmanWorks)('the container engine door', () => {
  it(
    'engine: true answers inside through the policy; escapes are refused with their rule',
    async () => {
      service = await startPodmanService();
      process.env.DOCKER_HOST = `unix://${service.socket}`;
      const run = await setup({ engine: true });
      const ping = await run(
        `${api('GET', '/_ping')}; echo; ${api('GET', '/v1.41/version')}; echo; printenv DOCKER_HOST`,
      );
      expect(ping.sandbox, JSON.stringify(ping)).toBe('workspace-write');
      expect(ping.stdout, JSON.stringify(ping)).toMatch(/^OK/);
      expect(ping.stdout).toContain('"ApiVersion"');
      expect(ping.stdout).toContain('unix:///run/conch-engine/docker.sock');
      expect(ping.error_code).toBeUndefined();
      // The docker CLI, where the machine has one, finds the socket by itself.
      if (spawnSync('docker', ['--version']).status === 0) {
        const cli = await run(
          "docker version --format '{{.Server.APIVersion}}'; docker run --rm --privileged x true 2>&1",
        );
        expect(cli.stdout, JSON.stringify(cli)).toMatch(/^\d+\.\d+/);
        expect(cli.stdout).toContain('conch: privileged');
      }
      for (const [body, rule] of [
        [{ Image: 'x', HostConfig: { Privileged: true } }, 'privileged'],
        [{ Image: 'x', HostConfig: { Binds: ['/:/host'] } }, 'conch:'],
        [{ Image: 'x', HostConfig: { PidMode: 'host' } }, 'conch:'],
        [{ Image: 'x', HostConfig: { CapAdd: ['SYS_ADMIN'] } }, 'conch:'],
        [{ Image: 'x', HostConfig: { Binds: [`${service.socket}:/var/run/docker.sock`] } }, 'conch:'],
      ] as const) {
        const refused = await run(api('POST', '/v1.41/containers/create', body));
        expect(refused.stdout, JSON.stringify({ body, refused })).toContain(rule);
        expect(refused.stdout).toContain('conch:');
        // The result says it was the wall, whatever curl's exit status, with the rule.
        expect(refused.error_code, JSON.stringify(refused)).toBe('ENGINE_REFUSED');
        expect(refused.engine_refusals[0]).toMatchObject({ route: 'container.create' });
        expect(refused.error).toContain(refused.engine_refusals[0].rule);
      }
    },
    TEST_TIMEOUT,
  );

  it(
    'without engine in the config there is no engine socket inside',
    async () => {
      service = await startPodmanService();
      process.env.DOCKER_HOST = `unix://${service.socket}`;
      const run = await setup({});
      const result = await run(
        `test -e /run/docker.sock && echo has-socket; test -e /run/conch-engine && echo has-dir; curl -s --max-time 60 --unix-socket "${service.socket}" http://d/_ping || echo unreachable`,
      );
      expect(result.stdout, JSON.stringify(result)).not.toContain('has-socket');
      expect(result.stdout).not.toContain('has-dir');
      expect(result.stdout).not.toMatch(/^OK/m);
    },
    TEST_TIMEOUT,
  );
});
