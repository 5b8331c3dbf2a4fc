// A zsh user's sessions run zsh with its rc files and the same marker protocol as bash.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from './test-support/harness.js';

const ZSH = '/usr/bin/zsh';

// zsh is not on every machine (apt-get install zsh); the bash suites cover the protocol there.
// Under CI (.ci/run installs zsh) a missing zsh fails these tests instead of skipping them.
describe.skipIf(!existsSync(ZSH) && !process.env.CI)('terminal on zsh', () => {
  let zdotdir: string;
  const saved = process.env.ZDOTDIR;
  let h: Harness | undefined;

  beforeAll(() => {
    zdotdir = mkdtempSync(join(tmpdir(), 'conch-zdotdir-'));
    writeFileSync(
      join(zdotdir, '.zshrc'),
      [
        'export FROM_ZSHRC=loaded',
        "PROMPT='%n@%m %~ %# '",
        "RPROMPT='[%?]'",
        'precmd_functions+=(user_hook)',
        'user_hook() { :; }',
        '',
      ].join('\n'),
    );
    process.env.ZDOTDIR = zdotdir;
  });
  afterAll(() => {
    if (saved === undefined) delete process.env.ZDOTDIR;
    else process.env.ZDOTDIR = saved;
    rmSync(zdotdir, { recursive: true, force: true });
  });
  afterEach(async () => {
    await h?.dispose();
    h = undefined;
  });

  it('loads the rc files and keeps cwd, exports and exit codes', async () => {
    h = createHarness({ shell: ZSH });
    expect(await h.call({ command: 'echo $ZSH_VERSION:$FROM_ZSHRC' })).toMatchObject({
      exit_code: 0,
      output: expect.stringMatching(/^5\.\d+(\.\d+)?:loaded\n$/),
    });
    await h.call({ command: 'cd /tmp && export X=1' });
    expect(await h.call({ command: 'pwd; echo $X' })).toEqual({
      exit_code: 0,
      output: '/tmp\n1\n',
      cwd: '/tmp',
      display: '✓ exit=0 · 1',
    });
    expect(await h.call({ command: 'false' })).toMatchObject({ exit_code: 1, output: '' });
  });

  it('runs heredocs, answers prompts and applies per-call env once', async () => {
    h = createHarness({ shell: ZSH });
    const heredoc = await h.call({ command: "cat <<'EOF'\nliteral $HOME !x\nEOF\nprint -r -- done" });
    expect(heredoc).toMatchObject({ exit_code: 0, output: 'literal $HOME !x\ndone\n' });
    const waiting = await h.call({ command: `read "answer?Continue? [Y/n] "; echo "got=$answer"` });
    expect(waiting).toMatchObject({ state: 'waiting', output: 'Continue? [Y/n] ' });
    const done = await h.call({ session_id: waiting.session_id, input: 'y\n' });
    expect(done.output).toContain('got=y');
    expect(await h.call({ command: 'echo $ONCE', env: { ONCE: 'yes' } })).toMatchObject({ output: 'yes\n' });
    expect(await h.call({ command: 'echo "[${ONCE-unset}]"' })).toMatchObject({ output: '[unset]\n' });
  });

  it('interrupts with Ctrl-C and never runs late input as a command', async () => {
    h = createHarness({ shell: ZSH });
    const marker = join(zdotdir, 'should-not-exist');
    const waiting = await h.call({ command: 'sleep 300', idle_ms: 300 });
    expect(waiting).toMatchObject({ state: 'waiting' });
    expect(await h.call({ session_id: waiting.session_id, input: '\u0003' })).toMatchObject({
      exit_code: 130,
    });
    const quick = await h.call({ command: `printf 'name? '; sleep 1`, idle_ms: 100_000 });
    expect(quick).toMatchObject({ state: 'waiting' });
    expect(await h.call({ session_id: quick.session_id, input: `touch ${marker}\n` })).toMatchObject({
      exit_code: 0,
    });
    expect(await h.call({ command: 'echo next' })).toMatchObject({ output: 'next\n' });
    expect(existsSync(marker)).toBe(false);
  });
});
