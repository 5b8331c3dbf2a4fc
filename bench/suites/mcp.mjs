// @conch/mcp: a tools/call round trip through the MCP server (in-memory transport, JSON-RPC,
// structured + text result) against registry.execute of the same trivial tool.
import { createConchMcpServer } from '@conch/mcp';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { incRegistry } from './helpers/inc-registry.mjs';

export default async function ({ median, time }) {
  const registry = await incRegistry();
  const server = createConchMcpServer(registry);
  const client = new Client({ name: 'bench', version: '0' });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  await client.connect(clientSide);
  try {
    const opts = { runs: 2000, warmup: 200 };
    const baseline = median(await time(() => registry.execute('inc', { n: 1 }), opts));
    const conch = median(await time(() => client.callTool({ name: 'inc', arguments: { n: 1 } }), opts));
    return [
      {
        name: 'mcp tools/call round trip vs registry.execute (median)',
        conch,
        baseline,
        unit: 'ms',
        ratio: conch / baseline,
        goal: 'overhead < 0.5 ms',
        pass: conch - baseline < 0.5,
      },
    ];
  } finally {
    await client.close();
    await registry.dispose();
  }
}
