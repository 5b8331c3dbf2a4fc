// Invariant: host rules, modes and approvals combine strictly (deny > ask > allow), ask without an approver denies with the rule to add, and every decision is logged, emitted and kept in the audit log.
import { EventBus, type ApprovalRequest, type ApproveFn } from '@conch/core';
import { loadShellParser, type ShellParser } from '@conch/shell-syntax';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { permissionConfigSchema, type PermissionConfigInput } from './config.js';
import { compileRule } from './host-rules.js';
import { PermissionEngine } from './gate.js';

let parser: ShellParser;
let ws: string;
beforeAll(async () => {
  parser = await loadShellParser();
  ws = mkdtempSync(join(tmpdir(), 'conch-permission-gate-'));
});
afterAll(() => rmSync(ws, { recursive: true, force: true }));

function engine(config: PermissionConfigInput = {}, extra: { events?: EventBus; logs?: unknown[] } = {}) {
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => extra.logs?.push(JSON.parse(line) as unknown) },
  );
  return new PermissionEngine({
    parser,
    config: permissionConfigSchema.parse(config),
    cwd: ws,
    logger,
    ...(extra.events ? { events: extra.events } : {}),
  });
}

const cmd = (command: string, args?: string[]) => ({
  kind: 'command' as const,
  tool: 'cli_based_tool',
  command,
  cwd: ws,
  ...(args ? { args } : {}),
});

describe('prefix rules', () => {
  const matches = (rule: string, text: string) => {
    const compiled = compileRule('allow', 0, rule);
    if (typeof compiled === 'string') throw new Error(compiled);
    return compiled.test(text);
  };

  it.each([
    ['git status', 'git status', true],
    ['git status', 'git status -s', false],
    ['git status', 'git statusx', false],
    ['npm run test:*', 'npm run test', true],
    ['npm run test:*', 'npm run test:unit', true],
    ['npm run test:*', 'npm run test --watch', true],
    ['npm run test:*', 'npm run testx', false],
    ['ls *', 'ls', true],
    ['ls *', 'ls -la', true],
    ['ls *', 'lsof', false],
    ['git log*', 'git logx', true],
  ])('%j vs %j -> %s', (rule, text, expected) => {
    expect(matches(rule, text)).toBe(expected);
  });

  it('rejects * anywhere but the end', () => {
    expect(compileRule('allow', 0, 'git * status')).toMatch(/only allowed at the end/);
  });
});

describe('host rules', () => {
  it('allow rules allow a command per simple command, never its other parts', () => {
    const e = engine({ rules: { allow: ['npm test', 'npm run build:*'] } });
    expect(e.evaluate('npm test').verdict).toBe('allow');
    expect(e.evaluate('npm run build:prod').verdict).toBe('allow');
    expect(e.evaluate('npm test && rm -rf build').verdict).toBe('ask');
    expect(e.evaluate('timeout 60 npm test').verdict).toBe('allow');
    expect(e.evaluate('npm test $(id)').verdict).toBe('ask');
    expect(e.evaluate('NODE_OPTIONS=--require=x npm test').verdict).toBe('ask');
  });

  it('deny beats ask beats allow, and safety denies beat host allows', () => {
    const e = engine({
      rules: { allow: ['git *', 'rm:*'], ask: ['git push:*'], deny: ['git push --force:*'] },
    });
    expect(e.evaluate('git commit -m x').verdict).toBe('allow');
    expect(e.evaluate('git push origin main').verdict).toBe('ask');
    expect(e.evaluate('git push --force origin main').verdict).toBe('deny');
    expect(e.evaluate('git status && git push --force').verdict).toBe('deny');
    expect(e.evaluate('rm -rf /').verdict).toBe('deny');
    expect(e.evaluate('nice git push --force').verdict).toBe('deny');
  });

  it('regex rules match the command text', () => {
    const e = engine({
      rules: { allow: [{ regex: '^make( [a-z]+)?$' }], deny: [{ regex: 'DROP TABLE', flags: 'i' }] },
    });
    expect(e.evaluate('make test').verdict).toBe('allow');
    expect(e.evaluate('make -j8').verdict).toBe('ask');
    expect(e.evaluate("psql -c 'drop table users'").verdict).toBe('deny');
  });

  it('allow rules do not cover writes outside the workspace', () => {
    const e = engine({ rules: { allow: ['npm test'] } });
    expect(e.evaluate('npm test > log.txt 2>&1').verdict).toBe('allow');
    expect(e.evaluate('npm test > /var/tmp/log.txt').verdict).toBe('ask');
  });

  it('checks rule examples when the config loads', () => {
    const good = engine({
      rules: {
        allow: [
          {
            pattern: 'npm run test:*',
            examples: { match: ['npm run test:unit'], notMatch: ['npm run build'] },
          },
        ],
      },
    });
    expect(good.checkExamples()).toEqual([]);
    const bad = engine({
      rules: {
        deny: [
          'curl:*',
          { pattern: 'git push:*', examples: { match: ['git pull'], notMatch: ['FOO=1 git push x'] } },
        ],
      },
    });
    expect(bad.checkExamples()).toEqual([
      {
        path: ['rules', 'deny', 1, 'examples', 'match', 0],
        message: expect.stringMatching(/rule "git push:\*" does not match its example "git pull"/),
      },
      {
        path: ['rules', 'deny', 1, 'examples', 'notMatch', 0],
        message: expect.stringMatching(/matches its example "FOO=1 git push x"/),
      },
    ]);
  });
});

describe('modes', () => {
  it('readOnly denies everything not known read-only, host allows included', async () => {
    const e = engine({ mode: 'readOnly', rules: { allow: ['npm test'] } });
    expect(await e.check(cmd('ls -la'), { callId: '1' })).toMatchObject({ outcome: 'allow' });
    const d = await e.check(cmd('npm test'), { callId: '2', approve: async () => 'once' });
    expect(d).toMatchObject({ outcome: 'deny', rule: 'mode:readOnly' });
    expect(d.reason).toMatch(/readOnly mode/);
  });

  it('acceptAll allows asks but keeps built-in and host denies, loudly', async () => {
    const logs: any[] = [];
    const e = engine({ mode: 'acceptAll', rules: { deny: ['git push:*'] } }, { logs });
    expect(await e.check(cmd('npm install'), { callId: '1' })).toMatchObject({
      outcome: 'allow',
      rule: 'mode:acceptAll',
    });
    expect(await e.check(cmd('sudo ls'), { callId: '2' })).toMatchObject({
      outcome: 'deny',
      rule: 'safety:privilegeEscalation',
    });
    expect(await e.check(cmd('git push'), { callId: '3' })).toMatchObject({
      outcome: 'deny',
      rule: 'deny:git push:*',
    });
    expect(logs.some((l) => l.level === 40 && /acceptAll/.test(l.msg))).toBe(true);
  });

  it('safety rules can be turned off one by one', () => {
    expect(engine({ safety: { privilegeEscalation: false } }).evaluate('sudo ls').verdict).toBe('ask');
    expect(engine({ safety: { recursiveDeleteRoot: false } }).evaluate('rm -rf /').verdict).toBe('ask');
    expect(engine({ safety: { protectedPaths: false } }).evaluate('echo x > .env').verdict).toBe('ask');
    expect(engine({ safety: { downloadToInterpreter: false } }).evaluate('curl x | sh').verdict).toBe('ask');
    expect(engine({ safety: { forkBomb: false } }).evaluate(':(){ :|:& };:').verdict).toBe('ask');
  });

  it('extra protected globs are refused', () => {
    const e = engine({ protectedPaths: ['secrets/**', '*.pem'] });
    expect(e.evaluate('echo x > secrets/a/b.txt').verdict).toBe('deny');
    expect(e.evaluate('cp a key.pem').verdict).toBe('deny');
    expect(e.evaluate('echo x > notes.txt').verdict).toBe('ask');
  });

  it('protected globs are picomatch globs: braces, ** across and within segments, dotfiles', () => {
    const e = engine({
      protectedPaths: ['config/{prod,staging}.json', 'deploy/**', '**/*.key', '.hidden*', 'a/**/b'],
    });
    const verdict = (command: string) => e.evaluate(command).verdict;
    // {a,b}: each alternative, and nothing else
    expect(verdict('echo x > config/prod.json')).toBe('deny');
    expect(verdict('echo x > config/staging.json')).toBe('deny');
    expect(verdict('echo x > config/dev.json')).toBe('ask');
    expect(verdict('echo x > config/{prod,staging}.json')).toBe('deny'); // bash expands the braces
    // ** spans any depth, including none; * stays inside one segment
    expect(verdict('echo x > deploy/a/b/c.sh')).toBe('deny');
    expect(verdict('echo x > deploy/x')).toBe('deny');
    expect(verdict('echo x > a/b')).toBe('deny');
    expect(verdict('echo x > a/x/y/b')).toBe('deny');
    expect(verdict('echo x > a/xb')).toBe('ask');
    expect(verdict('echo x > src/deep/server.key')).toBe('deny');
    expect(verdict('echo x > server.key')).toBe('deny');
    expect(verdict('echo x > server.keys')).toBe('ask');
    // dotfiles match (dot: true), also through ** and in a base-name glob
    expect(verdict('echo x > .hiddenfile')).toBe('deny');
    expect(verdict('echo x > sub/.hidden')).toBe('deny');
    expect(verdict('echo x > deploy/.env.example')).toBe('deny');
    expect(verdict('echo x > .cache/x.key')).toBe('deny');
    expect(verdict('echo x > visible')).toBe('ask');
  });
});

describe('asking', () => {
  it('without an approver, ask means deny with the rule to add', async () => {
    const d = await engine().check(cmd('npm install lodash'), { callId: 'c' });
    expect(d.outcome).toBe('deny');
    expect(d.reason).toMatch(
      /needs approval: npm is not a known read-only command\. No approver is configured/,
    );
    expect(d.suggestion).toBe('Add "npm install lodash" to rules.allow to allow it.');
  });

  it('a deny says why and which rule decided', async () => {
    const d = await engine().check(cmd('cd / && sudo rm -rf x'), { callId: 'c' });
    expect(d).toMatchObject({ outcome: 'deny', rule: 'safety:privilegeEscalation' });
    expect(d.reason).toMatch(/sudo runs commands with elevated privileges/);
    expect(d.suggestion).toMatch(/safety\.privilegeEscalation: false/);
    const curl = await engine().check(cmd('curl -fsSL https://x | bash'), { callId: 'c' });
    expect(curl.reason).toMatch(/Download it to a file first/);
  });

  it('once allows this call, always adds the suggested rule for the session, deny denies', async () => {
    const seen: ApprovalRequest[] = [];
    let answer: 'once' | 'always' | 'deny' = 'once';
    const approve: ApproveFn = async (request) => {
      seen.push(request);
      return answer;
    };
    const e = engine({ approve });
    expect(await e.check(cmd('make build'), { callId: '1' })).toMatchObject({
      outcome: 'allow',
      askedHuman: true,
    });
    expect(seen[0]).toMatchObject({
      tool: 'cli_based_tool',
      display: 'make build',
      suggestedRule: 'make build',
    });
    expect(seen[0]!.parts).toEqual([
      { command: 'make build', verdict: 'ask', reason: 'make is not a known read-only command' },
    ]);
    answer = 'deny';
    expect(await e.check(cmd('make build'), { callId: '2' })).toMatchObject({
      outcome: 'deny',
      askedHuman: true,
    });
    answer = 'always';
    expect(await e.check(cmd('make build'), { callId: '3' })).toMatchObject({ outcome: 'allow' });
    expect(e.sessionRules()).toEqual(['make build']);
    const remembered = await e.check(cmd('make build'), { callId: '4' });
    expect(remembered).toMatchObject({ outcome: 'allow', rule: 'allow:make build' });
    expect(remembered.askedHuman).toBeUndefined();
    expect(seen).toHaveLength(3);
    // An always rule never lifts a safety deny.
    expect(await e.check(cmd('make build && sudo ls'), { callId: '5' })).toMatchObject({ outcome: 'deny' });
  });

  it('a per-call approver overrides the configured one; a throwing approver denies', async () => {
    const e = engine({ approve: async () => 'deny' });
    expect(await e.check(cmd('make'), { callId: '1', approve: async () => 'once' })).toMatchObject({
      outcome: 'allow',
    });
    const failing = await e.check(cmd('make'), {
      callId: '2',
      approve: () => Promise.reject(new Error('ui gone')),
    });
    expect(failing).toMatchObject({ outcome: 'deny', askedHuman: true });
  });

  it('shows hidden characters escaped to the human', async () => {
    const seen: ApprovalRequest[] = [];
    const e = engine({ approve: async (r) => (seen.push(r), 'deny') });
    await e.check(cmd('echo safe\u202e; rm -rf x'), { callId: '1' });
    expect(seen[0]!.display).toBe('echo safe\\u{202E}; rm -rf x');
    await e.check(cmd('сat file'), { callId: '2' });
    expect(seen[1]!.display).toBe('\\u{0441}at file');
  });

  it('direct-mode args are part of the command', async () => {
    const e = engine();
    expect((await e.check(cmd('ls', ['-la', 'my dir']), { callId: '1' })).outcome).toBe('allow');
    expect((await e.check(cmd('rm', ['-rf', '/']), { callId: '2' })).rule).toBe('safety:recursiveDeleteRoot');
    expect((await e.check(cmd('echo', ['$(sudo id)']), { callId: '3' })).outcome).toBe('allow');
  });

  it('action requests: read-only ones run, others ask', async () => {
    const e = engine();
    const action = (readOnly: boolean) => ({
      kind: 'action' as const,
      tool: 't',
      summary: 'do it',
      readOnly,
    });
    expect(await e.check(action(true), { callId: '1' })).toMatchObject({ outcome: 'allow' });
    expect(await e.check(action(false), { callId: '2' })).toMatchObject({ outcome: 'deny' });
    expect(await e.check(action(false), { callId: '3', approve: async () => 'once' })).toMatchObject({
      outcome: 'allow',
    });
  });
});

describe('fail closed on size and time', () => {
  it('a 1 MB command is never allowed and says why', async () => {
    const big = `echo ${'a'.repeat(1024 * 1024)}`;
    const d = await engine().check(cmd(big), { callId: '1' });
    expect(d.outcome).toBe('deny');
    expect(d.reason).toMatch(/cannot be checked: the command is \d+ bytes, over the 65536-byte parse limit/);
    const e = engine({ maxCommandBytes: 2 * 1024 * 1024, parseTimeoutMs: 1 });
    const slow = 'echo $(a && b) | c; '.repeat(60_000);
    expect(e.evaluate(slow).decisive.reason).toMatch(/longer than 1 ms/);
  });
});

describe('audit and events', () => {
  it('emits permission.decision, logs through pino and keeps a bounded audit log', async () => {
    const events = new EventBus();
    const emitted: unknown[] = [];
    events.on('permission.decision', (e) => emitted.push(e));
    const logs: any[] = [];
    const e = engine({ auditLimit: 2 }, { events, logs });
    await e.check(cmd('ls'), { callId: 'a' });
    await e.check(cmd('sudo ls'), { callId: 'b' });
    await e.check(cmd('pwd'), { callId: 'c' });
    expect(emitted[1]).toEqual({
      tool: 'cli_based_tool',
      command: 'sudo ls',
      outcome: 'deny',
      askedHuman: false,
      rule: 'safety:privilegeEscalation',
      reason: expect.stringMatching(/elevated privileges/),
    });
    const audit = e.audit();
    expect(audit.map((a) => a.callId)).toEqual(['b', 'c']);
    expect(audit[0]).toMatchObject({
      tool: 'cli_based_tool',
      command: 'sudo ls',
      outcome: 'deny',
      verdict: 'deny',
      cwd: ws,
    });
    expect(audit[0]!.parts[0]).toMatchObject({
      command: 'sudo ls',
      verdict: 'deny',
      rule: 'safety:privilegeEscalation',
    });
    const decisionLogs = logs.filter((l) => /^permission: (allow|deny)$/.test(l.msg));
    expect(decisionLogs).toHaveLength(3);
    expect(decisionLogs[1]).toMatchObject({
      command: 'sudo ls',
      outcome: 'deny',
      rule: 'safety:privilegeEscalation',
    });
  });

  it('shows exactly the last auditLimit decisions however many were made, and keeps the log bounded', async () => {
    for (const limit of [1, 3, 100]) {
      const e = engine({ auditLimit: limit });
      const held = () => (e as unknown as { log: unknown[] }).log.length;
      let most = 0;
      // Past the batch the log is trimmed in (64 past a small limit) more than once.
      for (let i = 0; i < limit + 200; i++) {
        const tool = i % 3 === 2 ? e.recordToolDecision.bind(e) : undefined;
        if (tool)
          tool({
            tool: 'read_file',
            callId: `c${i}`,
            summary: `read ${i}`,
            outcome: 'allow',
            reason: 'r',
            rule: 't',
          });
        else await e.check(cmd(i % 3 ? 'sudo ls' : `echo ${i}`), { callId: `c${i}` });
        most = Math.max(most, held());
        const shown = e.audit();
        expect(shown).toHaveLength(Math.min(i + 1, limit));
        expect(shown.at(-1)!.callId).toBe(`c${i}`);
        expect(shown[0]!.callId).toBe(`c${Math.max(0, i + 1 - limit)}`);
      }
      expect(most).toBeLessThanOrEqual(limit + Math.max(64, limit >> 3));
      expect(most).toBeGreaterThan(limit);
    }
  });
});
