// Invariant: the MCP elicitation prompt shows the human the whole command that would run, or it is not shown at all and the call is denied.
import type { ApprovalRequest, PermissionRequest } from '@conch/core';
import { MAX_DISPLAY_CHARS } from '@conch/permission';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { elicitationApprover, elicitationMessage, incompleteDisplay } from './elicitation-approver.js';

/** A server stand-in that records each form it would show and answers `once`. */
function fakeServer() {
  const shown: string[] = [];
  const server = {
    elicitInput: async (params: { message: string }) => {
      shown.push(params.message);
      return { action: 'accept', content: { decision: 'once' } };
    },
  } as unknown as Server;
  return { server, shown };
}

const approver = (server: Server) =>
  elicitationApprover(server, { relatedRequestId: 1, timeoutMs: 1000, logger: pino({ level: 'silent' }) });

const command = (text: string, args?: string[]): PermissionRequest => ({
  kind: 'command',
  tool: 'cli_based_tool',
  command: text,
  cwd: '/w',
  ...(args ? { args } : {}),
});

const ask = (request: PermissionRequest, display: string): ApprovalRequest => ({
  tool: request.tool,
  display,
  request,
  reason: 'it is not known to be read-only',
});

describe('the elicitation prompt', () => {
  it('shows the whole command, however long, and asks', async () => {
    const { server, shown } = fakeServer();
    const text = `echo ${'a'.repeat(MAX_DISPLAY_CHARS - 100)}; touch the-end`;
    expect(await approver(server)(ask(command(text), text), {})).toBe('once');
    expect(shown).toHaveLength(1);
    expect(shown[0]).toContain(text);
    expect(elicitationMessage(ask(command(text), text))).toContain('touch the-end');
  });

  it('shows direct-mode arguments as the shell would receive them', async () => {
    const { server, shown } = fakeServer();
    const request = command('ls', ['-la', 'my dir']);
    expect(await approver(server)(ask(request, "ls -la 'my dir'"), {})).toBe('once');
    expect(shown).toHaveLength(1);
  });

  it.each([
    ['a cut-down display', (t: string) => `${t.slice(0, 40)}… (${t.length - 40} more characters not shown)`],
    ['a display of another command', () => 'ls'],
    ['a display without the hidden characters escaped', (t: string) => t.replace('\\u{202E}', '\u202e')],
    ['a display missing the end', (t: string) => t.slice(0, -12)],
  ])('refuses %s without asking', async (_what, cut) => {
    const { server, shown } = fakeServer();
    const text = `echo safe\u202e; ${'b'.repeat(200)}; rm -rf ~/x`;
    const whole = text.replace('\u202e', '\\u{202E}');
    expect(incompleteDisplay(ask(command(text), whole))).toBeUndefined();
    const request = ask(command(text), cut(whole));
    expect(incompleteDisplay(request)).toBeDefined();
    expect(await approver(server)(request, {})).toBe('deny');
    expect(shown).toEqual([]);
  });

  it('refuses a command longer than a prompt shows', async () => {
    const { server, shown } = fakeServer();
    const text = `echo ${'a'.repeat(MAX_DISPLAY_CHARS)}; touch the-end`;
    expect(await approver(server)(ask(command(text), text), {})).toBe('deny');
    expect(shown).toEqual([]);
  });

  it('a command that asks to leave the sandbox shows what it will reach there, one line each', async () => {
    const { server, shown } = fakeServer();
    const reaches = ['writes anywhere your user can write', 'the network, without the allow-list'];
    const request: ApprovalRequest = {
      ...ask(command('make deploy'), 'make deploy'),
      escalation: { justification: 'deploys need the VPN', reaches },
    };
    expect(await approver(server)(request, {})).toBe('once');
    expect(shown[0]).toContain(
      'Outside the sandbox it will reach:\n  - writes anywhere your user can write\n  - the network, without the allow-list',
    );
    // A sandboxed ask has nothing of the kind to show.
    expect(elicitationMessage(ask(command('make deploy'), 'make deploy'))).not.toContain(
      'Outside the sandbox',
    );
  });

  it('an action (a file write, a network destination) is shown by its whole summary', async () => {
    const { server, shown } = fakeServer();
    const request: PermissionRequest = {
      kind: 'action',
      tool: 'write_file',
      summary: 'write 5 bytes to a.txt',
    };
    expect(await approver(server)(ask(request, 'write 5 bytes to a.txt'), {})).toBe('once');
    expect(await approver(server)(ask(request, 'write 5 bytes'), {})).toBe('deny');
    expect(shown).toHaveLength(1);
  });
});
