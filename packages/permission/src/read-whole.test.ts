// Invariant: what the gate cannot read whole — a line over the parse limit, one the parser cannot parse or gives up on, a command string nested deeper than it reads — is denied in every mode and sandbox, and a human is shown the whole command or not asked at all.
import 'reflect-metadata';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, TOKENS, type ApprovalRequest, type ToolResult } from '@conch/core';
import { findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { loadShellParser, type ShellParser } from '@conch/shell-syntax';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { permissionConfigSchema, type PermissionConfigInput } from './config.js';
import { approvalDisplay, MAX_DISPLAY_CHARS } from './display.js';
import { PermissionEngine } from './gate.js';
import { permissionPlugin } from './plugin.js';

let parser: ShellParser;
let ws: string;
beforeAll(async () => {
  parser = await loadShellParser();
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-read-whole-')));
});
afterAll(() => rmSync(ws, { recursive: true, force: true }));

function engine(config: PermissionConfigInput, asked: ApprovalRequest[] = []) {
  return new PermissionEngine({
    parser,
    config: permissionConfigSchema.parse({
      ...config,
      approve: async (request: ApprovalRequest) => {
        asked.push(request);
        return 'once';
      },
    }),
    cwd: ws,
  });
}

const cmd = (command: string) => ({ kind: 'command' as const, tool: 'cli_based_tool', command, cwd: ws });
const MODES: PermissionConfigInput[] = [
  { sandbox: 'off' },
  { sandbox: 'off', mode: 'acceptAll' },
  { sandbox: 'off', mode: 'readOnly' },
  { sandbox: 'workspace-write' },
  { sandbox: 'workspace-write', mode: 'acceptAll' },
];

describe('what cannot be read whole is denied, in every mode', () => {
  const unread: [string, string, PermissionConfigInput?][] = [
    ['over the parse limit', `touch marker; echo ${'a'.repeat(70_000)}`],
    ['over a smaller limit', `touch marker # ${'b'.repeat(2000)}`, { maxCommandBytes: 1024 }],
    ['a parse error', 'touch marker; echo "unterminated'],
    ['a parse error in a nested string', `bash -c 'touch marker; echo "x'`],
    ['an unbalanced subshell', 'touch marker; (echo x'],
    [
      'a parse timeout',
      'touch marker; echo $(a && b) | c; '.repeat(30_000),
      { maxCommandBytes: 2 << 20, parseTimeoutMs: 1 },
    ],
    ['strings nested deeper than read', `bash -c "bash -c 'touch marker'"`, { maxNesting: 1 }],
  ];
  it.each(unread)('%s', async (_what, command, extra = {}) => {
    for (const mode of MODES) {
      const asked: ApprovalRequest[] = [];
      const e = engine({ ...mode, ...extra }, asked);
      expect(e.evaluate(command).verdict, JSON.stringify(mode)).toBe('deny');
      const d = await e.check(cmd(command), { callId: '1' });
      expect(d.outcome, JSON.stringify(mode)).toBe('deny');
      expect(d.rule).toMatch(/^failClosed:(parse|nesting|limit)$/);
      expect(asked).toEqual([]);
    }
  });
});

describe('a human sees the whole command or is not asked', () => {
  it('a command too long to show whole is denied instead of asked', async () => {
    const asked: ApprovalRequest[] = [];
    const e = engine({ sandbox: 'off' }, asked);
    const command = `echo ${'a'.repeat(MAX_DISPLAY_CHARS)}; touch marker`;
    const d = await e.check(cmd(command), { callId: '1' });
    expect(d).toMatchObject({ outcome: 'deny', rule: 'failClosed:display' });
    expect(d.reason).toMatch(/too long to show a human whole/);
    expect(asked).toEqual([]);
    // The audit keeps a bounded copy and says so.
    const [entry] = e.audit();
    expect(entry!.command.length).toBeLessThan(MAX_DISPLAY_CHARS + 100);
    expect(entry!.command).toMatch(/more characters not kept\)$/);
  });

  it('a command that fits raw but not once its hidden characters are escaped is denied, with the shown length', async () => {
    const asked: ApprovalRequest[] = [];
    const e = engine({ sandbox: 'off' }, asked);
    // 4,000 zero-width spaces are 4,000 characters raw and 32,000 escaped (`\u{200B}` each).
    for (const hidden of ['\u200b', '\u202e', '\u0430']) {
      const command = `touch marker; echo x${hidden.repeat(4000)}`;
      expect(command.length).toBeLessThan(MAX_DISPLAY_CHARS);
      const d = await e.check(cmd(command), { callId: hidden });
      expect(d).toMatchObject({ outcome: 'deny', rule: 'failClosed:display' });
      expect(d.reason).toContain(`(${approvalDisplay(cmd(command)).length} characters;`);
    }
    expect(asked).toEqual([]);
  });

  it('the audit copy of a command longer than it keeps is escaped at its head and counts the rest', async () => {
    const e = engine({ sandbox: 'off', mode: 'readOnly' });
    const cases = [
      `echo \u200bhead ${'a'.repeat(MAX_DISPLAY_CHARS * 3)}; touch marker`,
      `touch \u202emarker${'b'.repeat(MAX_DISPLAY_CHARS)}`,
      `${'\u3000'.repeat(MAX_DISPLAY_CHARS)}rm x`,
    ];
    for (const [i, command] of cases.entries()) {
      await e.check(cmd(command), { callId: String(i) });
      const entry = e.audit().at(-1)!;
      const whole = approvalDisplay(cmd(command));
      expect(entry.command.startsWith(whole.slice(0, 40))).toBe(true);
      expect(entry.command).toMatch(/… \(\d+ more characters not kept\)$/);
      const dropped = Number(/\((\d+) more characters not kept\)$/.exec(entry.command)![1]);
      // What is kept plus what is counted as not kept is the whole escaped display, or (past the
      // head) the raw characters, never less than the raw command's overflow.
      expect(dropped).toBeGreaterThanOrEqual(command.length - MAX_DISPLAY_CHARS);
      expect(dropped).toBeLessThanOrEqual(whole.length - MAX_DISPLAY_CHARS);
      expect(entry.command.length).toBeLessThan(MAX_DISPLAY_CHARS + 60);
    }
  });

  it('an escalation too long to show whole is denied', async () => {
    const asked: ApprovalRequest[] = [];
    const e = engine({ sandbox: 'workspace-write' }, asked);
    const d = await e.check(
      { ...cmd(`touch /tmp/x; echo ${'a'.repeat(MAX_DISPLAY_CHARS)}`), escalation: { justification: 'x' } },
      { callId: '1' },
    );
    expect(d).toMatchObject({ outcome: 'deny', rule: 'failClosed:display' });
    expect(asked).toEqual([]);
  });

  it('a long command nobody is asked about still runs as the policy says', async () => {
    const e = engine({ sandbox: 'off' });
    expect(await e.check(cmd(`echo ${'a'.repeat(MAX_DISPLAY_CHARS * 2)}`), { callId: '1' })).toMatchObject({
      outcome: 'allow',
    });
  });

  it('the display is the whole command, hidden characters escaped', async () => {
    const asked: ApprovalRequest[] = [];
    const e = engine({ sandbox: 'off' }, asked);
    const request = cmd(`touch m\u202e; echo ${'c'.repeat(MAX_DISPLAY_CHARS - 100)}`);
    await e.check(request, { callId: '1' });
    expect(asked).toHaveLength(1);
    expect(asked[0]!.display).toBe(approvalDisplay(request));
    expect(asked[0]!.display).toContain('\\u{202E}');
    expect(asked[0]!.display.endsWith('c'.repeat(50))).toBe(true);
  });
});

describe('through cli_based_tool', () => {
  const registries: PluginRegistry[] = [];
  let dir: string;
  afterEach(async () => {
    for (const registry of registries.splice(0)) {
      const prefix = registry.resolveOptional<ProcessManager>(TOKENS.ProcessManager)?.cookiePrefix;
      await registry.dispose();
      if (prefix) expect(findCookiePids({ prefix }).filter((pid) => pidAlive(pid))).toEqual([]);
    }
    rmSync(dir, { recursive: true, force: true });
  });
  const run = async (permission: Record<string, unknown>, command: string) => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-read-whole-e2e-')));
    const asked: string[] = [];
    const registry = new PluginRegistry({
      cwd: dir,
      plugins: [permissionPlugin, cliPlugin, backgroundPlugin],
    });
    registries.push(registry);
    registry.exposeSync('permission', {
      ...permission,
      approve: async (request: ApprovalRequest) => (asked.push(request.display), 'once'),
    });
    registry.exposeSync('cli', {});
    const result = (await registry.execute('cli_based_tool', { command })) as ToolResult &
      Record<string, any>;
    return { result, asked };
  };

  it.each([
    [{ sandbox: 'off', mode: 'acceptAll' }, `: ${'a'.repeat(70_000)}; touch marker`],
    [{ sandbox: 'off' }, `: ${'a'.repeat(70_000)}; touch marker`],
    [{ sandbox: 'off' }, `: ${'a'.repeat(MAX_DISPLAY_CHARS)}; touch marker`],
    [{ sandbox: 'off', mode: 'acceptAll' }, 'touch marker; echo "unterminated'],
  ])('%j: the command at the end never runs', async (permission, command) => {
    const { result, asked } = await run(permission, command);
    expect(result).toMatchObject({ permission_denied: true });
    expect(asked).toEqual([]);
    expect(existsSync(join(dir, 'marker'))).toBe(false);
    if (command.length > 60_000 || !command.includes('unterminated')) {
      // bash runs the tail of such a line.
      execFileSync('bash', ['-c', command], { cwd: dir, stdio: 'pipe' });
      expect(existsSync(join(dir, 'marker'))).toBe(true);
    }
  });
});
