// Drives the real conch-mcp bin over stdio with the official SDK client. Polling, /proc checks and
// temp dirs are @conch/test-support's.
import { writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '@conch/test-support';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  ElicitRequestSchema,
  type ElicitRequest,
  type ElicitResult,
} from '@modelcontextprotocol/sdk/types.js';

const here = dirname(fileURLToPath(import.meta.url));
export const PACKAGE_DIR = resolve(here, '../..');
export const BIN = join(PACKAGE_DIR, 'dist/bin.js');
export const FIXTURE_PLUGINS = join(here, 'fixture-plugins');
export const WORD_COUNT = resolve(PACKAGE_DIR, '../../examples/word-count');
export const GIT_HELPERS = resolve(PACKAGE_DIR, '../../examples/git-helpers');

export interface Harness {
  client: Client;
  transport: StdioClientTransport;
  cwd: string;
  serverPid: number;
  stderr(): string;
  close(): Promise<void>;
}

export async function startServer(options: {
  config?: Record<string, unknown>;
  cwd?: string;
  elicit?: (request: ElicitRequest) => ElicitResult | Promise<ElicitResult>;
  args?: string[];
  /** More environment for the server (e.g. CONCH_CONFIG). */
  env?: Record<string, string>;
}): Promise<Harness> {
  const cwd = options.cwd ?? tempDir('conch-mcp-');
  const args = [BIN, ...(options.args ?? [])];
  if (options.config) {
    writeFileSync(join(cwd, 'test.config.json'), JSON.stringify(options.config));
    args.push('--config', 'test.config.json');
  }
  const transport = new StdioClientTransport({
    command: process.execPath,
    args,
    cwd,
    // A CONCH_CONFIG of the shell running the tests would replace every test's config.
    env: { ...withoutConchConfig(), CONCH_LOG_LEVEL: 'warn', ...options.env },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const client = new Client(
    { name: 'conch-mcp-test', version: '0.0.0' },
    { capabilities: options.elicit ? { elicitation: {} } : {} },
  );
  if (options.elicit) client.setRequestHandler(ElicitRequestSchema, options.elicit);
  try {
    await client.connect(transport);
  } catch (error) {
    throw new Error(`conch-mcp did not start: ${String(error)}\n${stderr}`);
  }
  const serverPid = transport.pid;
  if (serverPid === null) throw new Error('no server pid');
  return { client, transport, cwd, serverPid, stderr: () => stderr, close: () => client.close() };
}

/** The test runner's environment without CONCH_CONFIG (and CONCH_TRUST, which would accept every config). */
export function withoutConchConfig(): Record<string, string> {
  const { CONCH_CONFIG: _ignored, CONCH_TRUST: _alsoIgnored, ...env } = process.env as Record<string, string>;
  return env;
}
