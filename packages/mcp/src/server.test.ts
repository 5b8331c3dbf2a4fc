// createConchMcpServer serves a host's own registry over any SDK transport and leaves the registry to the host.
import 'reflect-metadata';
import { PluginRegistry } from '@conch/core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { ElicitRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, expect, test } from 'vitest';
import { createConchMcpServer } from './server.js';
// @ts-expect-error plain-JS test fixture without types
import { fixture, fixtureGate } from './test-support/fixture-plugins/fixture/plugin.js';

let registry: PluginRegistry | undefined;
afterEach(async () => {
  await registry?.dispose();
});

async function connect(options: { elicitation?: boolean } = {}) {
  registry = new PluginRegistry({ plugins: [fixture, fixtureGate] });
  registry.exposeSync('fixture-gate');
  registry.exposeSync('fixture');
  const server = createConchMcpServer(registry, { name: 'host', version: '9.9.9', progressIntervalMs: 0 });
  const client = new Client(
    { name: 'test', version: '0' },
    { capabilities: options.elicitation ? { elicitation: {} } : {} },
  );
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(b);
  await client.connect(a);
  return { server, client };
}

test('a host registry is served; closing the server leaves the registry alive', async () => {
  const { client, server } = await connect();
  expect(client.getServerVersion()).toMatchObject({ name: 'host', version: '9.9.9' });
  expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual([
    'explode',
    'guarded_echo',
    'slow_steps',
  ]);
  const result = (await client.callTool({
    name: 'guarded_echo',
    arguments: { text: 'hi' },
  })) as CallToolResult;
  expect(result.structuredContent).toEqual({ stdout: 'hi\n', returncode: 0, display: '✓' });
  await client.close();
  await server.close();
  expect(registry!.disposed).toBe(false);
  expect(await registry!.execute('guarded_echo', { text: 'still here' })).toMatchObject({ returncode: 0 });
});

test('the elicitation form offers once / always / deny and an invalid answer denies', async () => {
  const { client } = await connect({ elicitation: true });
  const forms: unknown[] = [];
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    forms.push(request.params);
    return { action: 'accept', content: { decision: 'maybe' } };
  });
  const result = (await client.callTool({
    name: 'guarded_echo',
    arguments: { text: 'risky' },
  })) as CallToolResult;
  expect(result).toMatchObject({ isError: true, structuredContent: { permission_denied: true } });
  expect(forms[0]).toMatchObject({
    mode: 'form',
    message: expect.stringContaining('echo risky'),
    requestedSchema: {
      type: 'object',
      properties: { decision: { type: 'string', enum: ['once', 'always', 'deny'] } },
      required: ['decision'],
    },
  });
  await client.close();
});
