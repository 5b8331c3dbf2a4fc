// Nothing a client sends ends conch-mcp, and every answer stays within its bound: through the real server over stdio, every string field of every tool (cli, background, files, terminal, trash, command templates, a third-party defineTool plugin, the browser) gets values up to 16 MB, and malformed JSON-RPC, huge ids and deep nesting are sent raw; after each, tools/list answers, no error answer passes 64 KiB and none echoes the value beyond a bounded prefix.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { requireUnderCi } from '@conch/test-support';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DEFAULT_MAX_ANSWER_BYTES, MAX_ERROR_ANSWER_BYTES } from './stdio-transport.js';
import { errorToCallToolResult, toCallToolResult } from './to-call-tool-result.js';
import { GIT_HELPERS, type Harness, PACKAGE_DIR, startServer, WORD_COUNT } from './test-support/harness.js';
import { type RawServer, startRawServer } from './test-support/raw-client.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const BROWSER = resolve(PACKAGE_DIR, '../browser');
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find((p) =>
  existsSync(p),
);
const withBrowser = requireUnderCi(CHROMIUM !== undefined, 'Chromium', 'apt-get install chromium');

/** Every tool conch ships, a command template plugin, a plain defineTool plugin, and the browser. */
const CONFIG = {
  pluginDirs: [GIT_HELPERS, WORD_COUNT, ...(withBrowser ? [BROWSER] : [])],
  plugins: {
    permission: {},
    cli: {},
    background: {},
    files: {},
    terminal: {},
    trash: {},
    'git-helpers': {},
    'word-count': {},
    ...(withBrowser ? { browser: { cdpUrl: 'auto' } } : {}),
  },
};

/** The most of a fuzz value an answer may carry (an error keeps 8,000 characters of a message). */
const MAX_ECHO = 10_000;

type Schema = {
  type?: string | string[];
  enum?: unknown[];
  items?: Schema;
  additionalProperties?: Schema | boolean;
  default?: unknown;
};

/** Where a string can go in a tool's arguments: a string property, a list of strings, a record of strings. */
function stringSlots(tool: Tool): { field: string; place: (value: string) => unknown }[] {
  const properties = (tool.inputSchema.properties ?? {}) as Record<string, Schema>;
  const slots: { field: string; place: (value: string) => unknown }[] = [];
  for (const [name, schema] of Object.entries(properties)) {
    const types = ([] as unknown[]).concat(schema.type ?? []);
    if (types.includes('string') && !schema.enum) slots.push({ field: name, place: (v) => v });
    if (types.includes('array') && schema.items?.type === 'string')
      slots.push({ field: `${name}.*`, place: (v) => [v] });
    if (
      types.includes('object') &&
      typeof schema.additionalProperties === 'object' &&
      schema.additionalProperties.type === 'string'
    )
      slots.push({ field: `${name}.*`, place: (v) => ({ FUZZ: v }) });
  }
  return slots;
}

/** Small valid-looking values for the tool's other required fields. */
function companions(tool: Tool, except: string): Record<string, unknown> {
  const properties = (tool.inputSchema.properties ?? {}) as Record<string, Schema>;
  const out: Record<string, unknown> = {};
  for (const name of (tool.inputSchema.required ?? []) as string[]) {
    if (name === except) continue;
    const schema = properties[name] ?? {};
    const type = ([] as unknown[]).concat(schema.type ?? 'string')[0];
    out[name] = schema.enum
      ? schema.enum[0]
      : type === 'number' || type === 'integer'
        ? 1
        : type === 'boolean'
          ? false
          : type === 'array'
            ? []
            : type === 'object'
              ? {}
              : 'fuzz.txt';
  }
  return out;
}

/** The longest run of `char` in `text`. */
function longestRun(text: string, char: string): number {
  let best = 0;
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === char) best = Math.max(best, ++run);
    else run = 0;
  }
  return best;
}

const VALUES: { label: string; char: string; make: () => string }[] = [
  { label: '64 KiB + 1 (x)', char: 'x', make: () => 'x'.repeat(64 * KiB + 1) },
  { label: '1 MiB + 2 bytes (é)', char: 'é', make: () => 'é'.repeat(512 * KiB + 1) },
  { label: '16 MiB (x)', char: 'x', make: () => 'x'.repeat(16 * MiB) },
  // 16 MiB of quotes is 32 MiB as JSON: past the line conch-mcp reads, skipped as it streams in.
  { label: '16 MiB (")', char: '"', make: () => '"'.repeat(16 * MiB) },
];

describe('every string field of every tool, up to 16 MB', () => {
  let harness: Harness;
  let tools: Tool[];
  beforeAll(async () => {
    harness = await startServer({ config: CONFIG });
    tools = (await harness.client.listTools()).tools;
  }, 120_000);
  afterAll(async () => {
    await harness?.close();
  });

  test(
    'each call answers within its bound without echoing the value, and tools/list answers after it',
    async () => {
      const expected = [
        'cli_based_tool',
        'check_background_task',
        'read_background_output',
        'cancel_background_task',
        'read_file',
        'write_file',
        'edit_file',
        'list_directory',
        'glob',
        'stat_file',
        'terminal',
        'trash',
        'git_status_summary',
        'word_count',
        ...(withBrowser ? ['browser_navigate', 'browser_evaluate'] : []),
      ];
      expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(expected));
      const seen: string[] = [];
      let largestError = 0;
      for (const tool of tools) {
        for (const slot of stringSlots(tool)) {
          for (const value of VALUES) {
            const text = value.make();
            const field = slot.field.replace(/\.\*$/, '');
            const args = { ...companions(tool, field), [field]: slot.place(text) };
            const what = `${tool.name} ${slot.field} = ${value.label}`;
            let result: CallToolResult | undefined;
            let rpcError: string | undefined;
            try {
              result = (await harness.client.callTool({ name: tool.name, arguments: args }, undefined, {
                timeout: 120_000,
              })) as CallToolResult;
            } catch (error) {
              // A JSON-RPC error answer (the message was too long to read): the SDK throws it.
              rpcError = String(error);
              expect(rpcError, what).toMatch(/-32600.*more than the 33554432 conch-mcp reads/);
            }
            const bytes = Buffer.byteLength(JSON.stringify(result ?? { error: rpcError }));
            const isError = rpcError !== undefined || result?.isError === true;
            if (isError) largestError = Math.max(largestError, bytes);
            expect(bytes, what).toBeLessThanOrEqual(
              isError ? MAX_ERROR_ANSWER_BYTES : DEFAULT_MAX_ANSWER_BYTES,
            );
            // JSON escapes a quote: count the value's character as the answer's strings hold it.
            const body = rpcError ?? JSON.stringify(result?.structuredContent ?? result?.content);
            const shown = value.char === '"' ? body.replace(/\\"/g, '"') : body;
            expect(longestRun(shown, value.char), what).toBeLessThanOrEqual(MAX_ECHO);
            // The server is still there.
            expect((await harness.client.listTools()).tools.length, what).toBe(tools.length);
            seen.push(what);
          }
        }
      }
      // Every tool's string fields were reached (a tool whose fields are all enums has none).
      expect(new Set(seen.map((s) => s.split(' ')[0]))).toEqual(
        new Set(tools.filter((t) => stringSlots(t).length > 0).map((t) => t.name)),
      );
      expect(largestError).toBeLessThanOrEqual(MAX_ERROR_ANSWER_BYTES);
    },
    30 * 60_000,
  );

  test("a value past its field's limit is refused naming the field, the limit and the size", async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      [
        'stat_file',
        { path: 'p'.repeat(1_500_000) },
        /path: a string of at most 4096 bytes \(UTF-8\); received a string of 1500000 bytes/,
      ],
      [
        'write_file',
        { path: 'a.txt', content: 'c'.repeat(4 * MiB + 1) },
        /content: a string of at most 4194304 bytes/,
      ],
      ['cli_based_tool', { command: 'c'.repeat(MiB + 1) }, /command: a string of at most 1048576 bytes/],
      [
        'terminal',
        { command: 'true', env: { V: 'v'.repeat(128 * KiB + 1) } },
        /env\.V: a string of at most 131072 bytes/,
      ],
      ['check_background_task', { task_id: 't'.repeat(257) }, /task_id: a string of at most 256 bytes/],
      ['word_count', { text: 'w '.repeat(40 * KiB) }, /text: a string of at most 65536 bytes/],
    ];
    for (const [name, args, message] of cases) {
      const result = (await harness.client.callTool({ name, arguments: args })) as CallToolResult;
      expect(result.isError, name).toBe(true);
      expect(result.structuredContent, name).toMatchObject({ error_code: 'INVALID_ARGUMENTS' });
      expect((result.structuredContent as { error: string }).error, name).toMatch(message);
      expect(JSON.stringify(result).length, name).toBeLessThan(2000);
    }
  });
});

describe('raw JSON-RPC a client should never send', () => {
  let server: RawServer;
  beforeAll(async () => {
    server = await startRawServer({ config: { plugins: { permission: {}, cli: {}, files: {} } } });
  }, 60_000);
  afterAll(async () => {
    server?.child.stdin?.end();
    await server?.exited;
  });

  /**
   * Sends `line`, waits for the answer with `id` when one is named (a tool call answers when its
   * work is done), then for a tools/list; returns the answers that came besides the list's.
   */
  async function after(line: string | Buffer, id?: string | number) {
    const from = server.answers.length;
    await server.send(line);
    if (id !== undefined) await server.answer(id, from, 120_000);
    const list = await server.request('tools/list', undefined, 120_000);
    expect(list.message.result?.tools?.length).toBeGreaterThan(0);
    const got = server.answers.slice(from).filter((a) => a !== list);
    for (const a of got) expect(a.bytes).toBeLessThanOrEqual(MAX_ERROR_ANSWER_BYTES);
    return got;
  }

  test('a line that is not JSON gets a parse error, and the server serves on', async () => {
    const [answer] = await after(`{"jsonrpc":"2.0","id":1,"method":${'x'.repeat(MiB)}\n`);
    expect(answer?.message).toMatchObject({ id: null, error: { code: -32700 } });
    expect(answer!.bytes).toBeLessThan(500);
  });

  test('JSON that is not JSON-RPC gets an invalid-request error naming no value', async () => {
    for (const line of ['{"hello":1}', '[1,2,3]', '"just a string"', `{"jsonrpc":"2.0","id":5,"method":7}`]) {
      const [answer] = await after(`${line}\n`);
      expect(answer?.message.error?.code, line).toBe(-32600);
    }
  });

  test('a 16 MB string id is refused without being echoed; an id that is a 16 MB number too', async () => {
    const [byString] = await after(
      `${JSON.stringify({ jsonrpc: '2.0', id: 'i'.repeat(16 * MiB), method: 'tools/list' })}\n`,
    );
    expect(byString?.message).toMatchObject({ id: null, error: { code: -32600 } });
    expect(byString!.bytes).toBeLessThan(500);
    const [byNumber] = await after(`{"jsonrpc":"2.0","id":${'9'.repeat(16 * MiB)},"method":"tools/list"}\n`);
    expect(byNumber?.message).toMatchObject({ id: null, error: { code: -32600 } });
  });

  test('arguments nested a million deep are INVALID_ARGUMENTS naming the field', async () => {
    const deep = `${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}`;
    const [answer] = await after(
      `{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"stat_file","arguments":{"path":${deep}}}}\n`,
      'deep',
    );
    expect(answer?.message.id).toBe('deep');
    expect(answer?.message.result?.structuredContent).toMatchObject({ error_code: 'INVALID_ARGUMENTS' });
    expect(answer?.message.result?.structuredContent.error).toMatch(
      /at most 64 levels of nested objects and arrays/,
    );
    // Deep params beside the arguments, and a deep id, too.
    const [beside] = await after(
      `{"jsonrpc":"2.0","id":"beside","method":"tools/call","params":{"name":"stat_file","arguments":{"path":"x"},"extra":${deep}}}\n`,
      'beside',
    );
    expect(beside?.message.id).toBe('beside');
    const [deepId] = await after(`{"jsonrpc":"2.0","id":${deep},"method":"tools/list"}\n`);
    expect(deepId?.message).toMatchObject({ id: null, error: { code: -32600 } });
  });

  test('a 40 MB line is skipped as it streams in and answered with its id', async () => {
    const [last] = await after(
      `{"method":"tools/call","params":{"name":"stat_file","arguments":{"path":"${'p'.repeat(40 * MiB)}"}},"jsonrpc":"2.0","id":"huge-last"}\n`,
      'huge-last',
    );
    expect(last?.message).toMatchObject({ id: 'huge-last', error: { code: -32600 } });
    expect(last?.message.error.message).toMatch(/more than the 33554432 conch-mcp reads/);
    const [first] = await after(
      `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"stat_file","arguments":{"path":"${'p'.repeat(40 * MiB)}"}}}\n`,
      42,
    );
    expect(first?.message).toMatchObject({ id: 42, error: { code: -32600 } });
  });

  test('a 16 MB tool name, method name or arguments of the wrong type get a short error', async () => {
    const [name] = await after(
      `${JSON.stringify({ jsonrpc: '2.0', id: 'n', method: 'tools/call', params: { name: 'n'.repeat(16 * MiB), arguments: {} } })}\n`,
      'n',
    );
    expect(name?.message.id).toBe('n');
    expect(name!.bytes).toBeLessThan(2000);
    const [method] = await after(
      `${JSON.stringify({ jsonrpc: '2.0', id: 'm', method: 'm'.repeat(16 * MiB) })}\n`,
      'm',
    );
    expect(method?.message).toMatchObject({ id: 'm', error: { code: -32601 } });
    const [typed] = await after(
      `${JSON.stringify({ jsonrpc: '2.0', id: 't', method: 'tools/call', params: { name: 'stat_file', arguments: 'a'.repeat(16 * MiB) } })}\n`,
      't',
    );
    expect(typed?.message.id).toBe('t');
    expect(typed!.bytes).toBeLessThan(2000);
  });

  test('bytes that are not UTF-8, empty lines and CRLF are no end either', async () => {
    await after(Buffer.from([0xff, 0xfe, 0x00, 0x0a]));
    await after('\n\n\r\n');
    const [crlf] = await after(
      `${JSON.stringify({ jsonrpc: '2.0', id: 'crlf', method: 'ping' })}\r\n`,
      'crlf',
    );
    expect(crlf?.message).toMatchObject({ id: 'crlf', result: {} });
  });
});

describe('answers past their bound are cut to fit, saying so', () => {
  test('a result larger than maxAnswerBytes keeps the start and end of its longest strings', () => {
    const stdout = `${'a'.repeat(3 * MiB)}THE END`;
    const answer = toCallToolResult({ stdout, stderr: 'short', returncode: 0, display: '✓ exit=0' });
    const bytes = Buffer.byteLength(JSON.stringify(answer));
    expect(bytes).toBeLessThanOrEqual(DEFAULT_MAX_ANSWER_BYTES);
    const body = answer.structuredContent as Record<string, string>;
    expect(body.stdout).toMatch(/^a+\n… \[\d+ characters cut to fit the answer\] …\na+THE END$/);
    expect(body).toMatchObject({ stderr: 'short', returncode: 0, display: '✓ exit=0' });
    expect(body.answer_cut).toMatch(/more than the \d+ conch-mcp sends/);
    // Within the bound, a result is sent as it is.
    const small = toCallToolResult({ stdout: 'hello', returncode: 0 });
    expect(small.structuredContent).toEqual({ stdout: 'hello', returncode: 0 });
  });

  test('a thrown error with a huge message is an answer of at most 64 KiB', () => {
    const answer = errorToCallToolResult(new Error(`bad ${'m'.repeat(5 * MiB)}`));
    expect(Buffer.byteLength(JSON.stringify(answer))).toBeLessThanOrEqual(MAX_ERROR_ANSWER_BYTES);
    expect(answer.isError).toBe(true);
  });
});
