// @conch/mcp: a tools/call round trip through conch's MCP server (in-memory transport, JSON-RPC,
// structured + text result) against the same round trip done raw: the MCP SDK's own low-level
// Server whose tools/call handler calls registry.execute and returns its result as text and
// structuredContent, over the same kind of transport. Both pay the SDK and the registry; the
// ratio is what conch's server adds (lookup, execute options, result mapping), on any machine.
import { createConchMcpServer } from '@conch/mcp';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { alternate, median, time } from '../lib.mjs';
import { incRegistry } from './helpers/inc-registry.mjs';

async function connected(server) {
  const client = new Client({ name: 'bench', version: '0' });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  await client.connect(clientSide);
  return client;
}

export default async function () {
  const registry = await incRegistry();
  const raw = new Server({ name: 'bench-raw', version: '0' }, { capabilities: { tools: {} } });
  raw.setRequestHandler(CallToolRequestSchema, async (request) => {
    const result = await registry.execute(request.params.name, request.params.arguments ?? {});
    return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result };
  });
  const conchClient = await connected(createConchMcpServer(registry));
  const rawClient = await connected(raw);
  try {
    const call = (client) => () => client.callTool({ name: 'inc', arguments: { n: 1 } });
    const { conch, baseline } = await alternate(call(conchClient), call(rawClient), {
      runs: 2000,
      warmup: 200,
    });
    const execute = median(await time(() => registry.execute('inc', { n: 1 }), { runs: 2000, warmup: 200 }));
    return [
      {
        name: `mcp tools/call round trip through conch's server vs the MCP SDK's bare Server calling registry.execute (median; registry.execute alone ${execute.toFixed(4)} ms)`,
        conch,
        baseline,
        unit: 'ms',
        ratio: conch / baseline,
        goal: 'ratio <= 1.5',
        pass: conch / baseline <= 1.5,
      },
    ];
  } finally {
    await Promise.all([conchClient.close(), rawClient.close()]);
    await registry.dispose();
  }
}
