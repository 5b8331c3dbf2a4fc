// The files plugin ships with conch-mcp and its default config exposes it; the output_file of a
// command whose output passed the cap lies outside the workspace (the per-user output directory),
// and read_file through the MCP client reads it back whole.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { tempDir } from '@conch/test-support';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, test } from 'vitest';
import { withOutputFilesReadable } from './start.js';
import { type Harness, startServer } from './test-support/harness.js';

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

type Structured = Record<string, any>;
const call = async (h: Harness, name: string, args: Record<string, unknown>) =>
  ((await h.client.callTool({ name, arguments: args })) as CallToolResult).structuredContent as Structured;

// 1,500 lines of 41 characters: 61,500 characters, past the cap and within one read_file.
const COMMAND = "seq -f 'line %05g of the long output, padded.' 1 1500";
const EXPECTED = Array.from(
  { length: 1500 },
  (_, i) => `line ${String(i + 1).padStart(5, '0')} of the long output, padded.\n`,
).join('');

describe('output files read back through read_file', () => {
  test('the default config exposes files, and read_file returns the whole output_file', async () => {
    harness = await startServer({});
    const names = (await harness.client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['cli_based_tool', 'read_file', 'write_file', 'edit_file']));
    const ran = await call(harness, 'cli_based_tool', { command: COMMAND });
    expect(ran).toMatchObject({ returncode: 0, truncated: true });
    const outputFile = ran.output_file as string;
    expect(outputFile.startsWith(harness.cwd)).toBe(false);
    expect(readFileSync(outputFile, 'utf8')).toBe(EXPECTED);
    const read = await call(harness, 'read_file', { path: outputFile });
    expect(read.error).toBeUndefined();
    expect(read).toMatchObject({ content: EXPECTED, total_lines: 1500 });
    expect(read.truncated).not.toBe(true);
    // Only the output directories were opened: other paths outside the workspace stay refused.
    const outside = await call(harness, 'read_file', { path: '/etc/hostname' });
    expect(outside.error_code).toBe('OUTSIDE_WORKING_DIR');
  });

  test('with a config naming cli.outputDir and files, output files there are readable too', async (ctx) => {
    const cwd = tempDir('conch-mcp-out-');
    // Not under /tmp: sandboxed commands and file operations have a private /tmp.
    mkdirSync(join(homedir(), '.cache'), { recursive: true });
    const outDir = mkdtempSync(join(homedir(), '.cache', 'conch-mcp-spill-'));
    ctx.onTestFinished(() => rmSync(outDir, { recursive: true, force: true }));
    harness = await startServer({
      cwd,
      config: { plugins: { permission: {}, cli: { outputDir: outDir }, files: { maxReadLines: 5000 } } },
    });
    const ran = await call(harness, 'cli_based_tool', { command: COMMAND });
    expect((ran.output_file as string).startsWith(outDir)).toBe(true);
    const read = await call(harness, 'read_file', { path: ran.output_file });
    expect(read).toMatchObject({ content: EXPECTED });
  });
});

describe('withOutputFilesReadable', () => {
  test('adds the output directories to files.allowedRoots, keeping the config’s own', () => {
    const cwd = '/work/project';
    const config = withOutputFilesReadable(
      { plugins: { cli: { outputDir: 'spill' }, files: { allowedRoots: ['/data'] } } },
      cwd,
    );
    const roots = config.plugins?.files?.allowedRoots as string[];
    expect(roots[0]).toBe('/data');
    expect(roots).toContain(join(cwd, 'spill'));
    expect(roots.some((r) => r.endsWith(join('conch', 'output')))).toBe(true);
  });

  test('leaves a config without files, or with files anywhere, as it is', () => {
    const noFiles = { plugins: { cli: {} } };
    expect(withOutputFilesReadable(noFiles, '/w')).toBe(noFiles);
    const anywhere = { plugins: { files: { allowOutsideWorkingDir: true } } };
    expect(withOutputFilesReadable(anywhere, '/w')).toBe(anywhere);
  });
});
