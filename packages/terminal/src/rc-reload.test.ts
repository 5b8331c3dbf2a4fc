// Invariant: an rc file edited mid-session takes effect on the next command (interactive-only setup included), a broken one is logged without breaking the session or its exit codes, and the protocol and the rm function survive the re-source (bash and zsh).
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from './test-support/harness.js';

const ZSH = '/usr/bin/zsh';
const HAS_ZSH = existsSync(ZSH) || Boolean(process.env.CI);

let home: string;
let h: Harness | undefined;
const saved = { HOME: process.env.HOME, ZDOTDIR: process.env.ZDOTDIR };
let logs: { level: number; msg: string; errors?: string; files?: string[] }[];

function harness(config: Record<string, unknown> = {}): Harness {
  logs = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) logs.push(JSON.parse(line));
      done();
    },
  });
  return createHarness(config, { logger: pino({ level: 'info' }, stream) });
}

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'conch-rc-home-'));
  process.env.HOME = home;
  process.env.ZDOTDIR = home;
});
afterEach(async () => {
  await h?.dispose();
  h = undefined;
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  rmSync(home, { recursive: true, force: true });
});

// Interactive-only setup hides behind the usual guard; it must run on a re-source too.
const guard = (kind: 'bash' | 'zsh') =>
  kind === 'bash' ? '[ -z "$PS1" ] && return' : '[[ -o interactive ]] || return';

describe.each([
  { kind: 'bash' as const, shell: '/bin/bash', rc: '.bashrc' },
  ...(HAS_ZSH ? [{ kind: 'zsh' as const, shell: ZSH, rc: '.zshrc' }] : []),
])('$kind', ({ kind, shell, rc }) => {
  beforeEach(() => {
    if (kind === 'bash') writeFileSync(join(home, '.bash_profile'), '. ~/.bashrc\n');
    writeFileSync(join(home, rc), `${guard(kind)}\nexport STAGE=one\n`);
  });

  it('an rc file edited mid-session takes effect on the next command', async () => {
    h = harness({ shell });
    expect(await h.call({ command: 'echo $STAGE' })).toMatchObject({ exit_code: 0, output: 'one\n' });
    writeFileSync(
      join(home, rc),
      [
        guard(kind),
        'export STAGE=two',
        'greet() { echo "hello from the rc"; }',
        // What oh-my-zsh / direnv do: register a prompt hook.
        kind === 'zsh' ? 'precmd_functions+=(my_hook); my_hook() { :; }' : "PROMPT_COMMAND='history -a'",
        // An alias over the commands rm uses must not change it.
        'alias mv=false',
        '',
      ].join('\n'),
    );
    const r = await h.call({ command: 'echo $STAGE; greet' });
    expect(r).toMatchObject({ exit_code: 0, output: 'two\nhello from the rc\n' });
    expect(logs.some((l) => l.msg === 'rc files re-sourced' || /rc file re-sourced/.test(l.msg))).toBe(true);
    // The protocol still works (more commands finish with their own codes) and rm still trashes.
    expect(await h.call({ command: 'false' })).toMatchObject({ exit_code: 1 });
    writeFileSync(join(h.root, 'victim.txt'), 'keep\n');
    expect(await h.call({ command: `cd '${h.root}' && rm victim.txt && echo gone` })).toMatchObject({
      exit_code: 0,
      output: 'gone\n',
    });
    const listed = (await h.registry.execute('trash', { action: 'list' })) as { total: number };
    expect(listed.total).toBe(1);
    // Unchanged files are not sourced again.
    const before = logs.length;
    await h.call({ command: 'true' });
    expect(logs.slice(before).some((l) => /re-sourced/.test(l.msg))).toBe(false);
  });

  it('a broken rc file is logged and does not break the session or poison the exit code', async () => {
    h = harness({ shell });
    expect(await h.call({ command: 'echo $STAGE' })).toMatchObject({ exit_code: 0, output: 'one\n' });
    writeFileSync(join(home, rc), `${guard(kind)}\nexport STAGE=broken\nno-such-command-xyz\nif then fi (\n`);
    const r = await h.call({ command: 'echo ok' });
    expect(r).toMatchObject({ exit_code: 0, output: 'ok\n' });
    const warn = logs.find((l) => l.level === 40 && /rc file/.test(l.msg));
    expect(warn?.errors).toMatch(/no-such-command-xyz/);
    expect(warn?.files).toEqual([join(home, rc)]);
    // Fixed again: re-sourced again, the session went on throughout.
    writeFileSync(join(home, rc), `${guard(kind)}\nexport STAGE=three\n`);
    expect(await h.call({ command: 'echo $STAGE' })).toMatchObject({ exit_code: 0, output: 'three\n' });
  });
});
