// The scripts the protocol writes keep their constants out of variables and refuse values they cannot write safely.
import { describe, expect, it } from 'vitest';
import { ConchError } from '@conch/core';
import { commandScript, initScript, rcReloadScript, releaseLine, sourceLine } from './shell-scripts.js';

const base = {
  nonce: '0123456789abcdef',
  key: 'fedcba9876543210',
  commandFile: "/tmp/it's/cmd.sh",
  sessionEnv: {},
};

describe('shell scripts', () => {
  it('bakes the nonce and key into the hook and makes its place read-only', () => {
    const bash = initScript({ kind: 'bash', ...base });
    expect(bash).toContain('6973;E;0123456789abcdef;%s;%s');
    expect(bash).toContain("*$'\\036'fedcba9876543210) break");
    expect(bash).toMatch(/\\builtin readonly -f __conch_prompt\n/);
    expect(bash).toMatch(/\\builtin readonly PROMPT_COMMAND\n/);
    expect(bash).toContain(`__conch_f='/tmp/it'\\''s/cmd.sh'\n\\builtin readonly __conch_f`);
    expect(bash).not.toMatch(/__conch_(key|nonce|post|seq)\b/);
    const zsh = initScript({ kind: 'zsh', ...base });
    expect(zsh).toMatch(/\\builtin typeset -r precmd_functions\n/);
    expect(zsh).not.toMatch(/__conch_(key|nonce|post|seq|f)\b/);
  });

  it('types the release line and a source line no alias or function named . reaches', () => {
    expect(releaseLine('abc')).toBe('\u001eabc\n');
    expect(sourceLine('bash', base.commandFile)).toBe(' \\builtin . "$__conch_f"\n');
    expect(sourceLine('zsh', base.commandFile)).toBe(` \\builtin . '/tmp/it'\\''s/cmd.sh'\n`);
  });

  it('restores the previous call env before the begin marker', () => {
    const first = commandScript({ nonce: base.nonce, seq: 1, command: 'echo $A', env: { A: "x'y" } });
    expect(first.script).toContain(`export A='x'\\''y'`);
    const second = commandScript({
      nonce: base.nonce,
      seq: 2,
      command: 'echo $A',
      pendingRestore: first.restore!,
    });
    expect(second.script.indexOf('unset A')).toBeLessThan(second.script.indexOf('6973;B;0123456789abcdef;2'));
    expect(second.restore).toBeUndefined();
  });

  it('refuses a nonce, key or env name it cannot write safely, with a stable code', () => {
    const attempts = [
      () => initScript({ kind: 'bash', ...base, key: 'y; touch x' }),
      () => initScript({ kind: 'zsh', ...base, nonce: 'ABC' }),
      () => commandScript({ nonce: base.nonce, seq: 1, command: 'true', env: { 'a[$(id)]': '1' } }),
    ];
    for (const attempt of attempts) {
      let error: unknown;
      try {
        attempt();
      } catch (e) {
        error = e;
      }
      expect(ConchError.isInstance(error)).toBe(true);
      expect((error as ConchError).code).toBe('INVALID_PROTOCOL_VALUE');
    }
    expect(attempts[0]).toThrow(/initScript key: expected lowercase hex .* given "y; touch x"/);
  });

  it('sources the rm function last, after the hook is read-only, with \\builtin', () => {
    for (const kind of ['bash', 'zsh'] as const) {
      const init = initScript({ kind, ...base, rmFile: "/tmp/it's/rm.sh" });
      const rm = init.indexOf(`\\builtin . '/tmp/it'\\''s/rm.sh'`);
      expect(rm).toBeGreaterThan(
        init.indexOf(kind === 'bash' ? 'readonly PROMPT_COMMAND' : 'typeset -r precmd_functions'),
      );
    }
  });

  it('re-sources rc files before the begin marker, then silences the prompts and pins the hook again', () => {
    const bash = rcReloadScript('bash', ['/h/.bashrc'], '/s/rc.log', '/s/rm.sh');
    expect(bash).toContain(`\\builtin . '/h/.bashrc' 2>>'/s/rc.log' || \\builtin printf`);
    expect(bash.indexOf("PS1='conch$ '")).toBeLessThan(bash.indexOf('.bashrc'));
    expect(bash.lastIndexOf("PS1=''")).toBeGreaterThan(bash.indexOf('.bashrc'));
    expect(bash.trimEnd().endsWith(`\\builtin . '/s/rm.sh'`)).toBe(true);
    const zsh = rcReloadScript('zsh', ['/z/.zshrc'], '/s/rc.log');
    expect(zsh.indexOf('typeset +r precmd_functions')).toBeLessThan(zsh.indexOf('.zshrc'));
    expect(zsh.indexOf('\\builtin typeset -r precmd_functions')).toBeGreaterThan(zsh.indexOf('.zshrc'));
    const script = commandScript({ nonce: base.nonce, seq: 3, command: 'true', preamble: bash }).script;
    expect(script.indexOf('.bashrc')).toBeLessThan(script.indexOf('6973;B;0123456789abcdef;3'));
  });
});
