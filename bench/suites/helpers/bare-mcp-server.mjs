// The MCP server start done raw: the MCP SDK's own McpServer with one tool (its input schema in
// zod), over stdio, nothing of conch's. The per-call suite starts it as it starts conch-mcp, to its
// answer to tools/list.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'bench-bare', version: '0' });
server.registerTool(
  'echo',
  { description: 'echoes', inputSchema: { text: z.string() } },
  async ({ text }) => ({ content: [{ type: 'text', text }] }),
);
await server.connect(new StdioServerTransport());
