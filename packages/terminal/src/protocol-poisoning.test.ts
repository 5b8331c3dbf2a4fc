// No command a session runs can make a later input run as a shell command: the marker protocol reads nothing a command can assign (bash and zsh, no permission gate).
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isAlive } from '@conch/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ToolResult } from '@conch/core';
import type { TerminalService } from './session-pool.js';
import { TERMINAL_SERVICE } from './tokens.js';
import { createHarness } from './test-support/harness.js';

const ZSH = '/usr/bin/zsh';
const HAS_ZSH = existsSync(ZSH) || Boolean(process.env.CI);

interface Ctx {
  /** A command that creates the marker file. */
  touch: string;
  /** A script that creates the marker file (for attacks that point a protocol path at a file). */
  evil: string;
}

interface Attack {
  name: string;
  shells: readonly ('bash' | 'zsh')[];
  /** The poisoning command, run first (the permission gate would ask or deny most; none is here). */
  poison: (c: Ctx) => string;
  /**
   * What the model then types into a program that prompts and exits without reading (the text
   * waits in the terminal and reaches whatever reads next): a takeover would run `touch`.
   */
  input?: (c: Ctx, key: string | undefined) => string;
}

const KEY_GUESSES = (c: Ctx) => `y\n\n${c.touch}\n`;

const ATTACKS: readonly Attack[] = [
  { name: 'assign the gate key', shells: ['bash', 'zsh'], poison: () => '__conch_key=y' },
  {
    name: 'assign the command file',
    shells: ['bash', 'zsh'],
    poison: (c) => `__conch_f=${c.evil}`,
  },
  {
    name: 'assign the post file',
    shells: ['bash', 'zsh'],
    poison: (c) => `__conch_post=${c.evil}`,
  },
  { name: 'assign the nonce', shells: ['bash', 'zsh'], poison: () => '__conch_nonce=0000' },
  { name: 'assign the seq', shells: ['bash', 'zsh'], poison: () => '__conch_seq=99' },
  {
    name: 'unset the protocol variables',
    shells: ['bash', 'zsh'],
    poison: () => 'unset __conch_key __conch_nonce __conch_f __conch_post __conch_seq',
  },
  { name: 'declare the key', shells: ['bash', 'zsh'], poison: () => 'declare -g __conch_key=y' },
  { name: 'typeset the key', shells: ['zsh'], poison: () => 'typeset __conch_key=y' },
  { name: 'export the key', shells: ['bash', 'zsh'], poison: () => 'export __conch_key=y' },
  { name: 'local (global at top level in zsh)', shells: ['zsh'], poison: () => 'local __conch_key=y' },
  { name: 'printf -v into the key', shells: ['bash', 'zsh'], poison: () => 'printf -v __conch_key y' },
  { name: 'read into the key', shells: ['bash', 'zsh'], poison: () => 'read -r __conch_key <<< y' },
  {
    name: 'a {name} redirection into the key',
    shells: ['bash'],
    poison: () => 'true {__conch_key}>/dev/null',
  },
  { name: 'empty PROMPT_COMMAND', shells: ['bash'], poison: () => 'PROMPT_COMMAND=' },
  { name: 'unset PROMPT_COMMAND', shells: ['bash'], poison: () => 'unset PROMPT_COMMAND' },
  { name: 'empty precmd_functions', shells: ['zsh'], poison: () => 'precmd_functions=()' },
  { name: 'unset precmd_functions', shells: ['zsh'], poison: () => 'unset precmd_functions' },
  { name: 'alias named .', shells: ['bash', 'zsh'], poison: (c) => `alias .='${c.touch};'` },
  {
    name: 'alias named . by assignment',
    shells: ['bash'],
    poison: (c) => `BASH_ALIASES[.]='${c.touch};'`,
  },
  {
    name: 'alias named . by assignment',
    shells: ['zsh'],
    poison: (c) => `aliases[.]='${c.touch};'`,
  },
  { name: 'function named .', shells: ['bash', 'zsh'], poison: (c) => `.() { ${c.touch}; }` },
  {
    name: 'functions named read and printf',
    shells: ['bash', 'zsh'],
    poison: (c) => `read() { ${c.touch}; return 1; }\nprintf() { :; }`,
  },
  { name: 'FUNCNEST=1', shells: ['bash', 'zsh'], poison: () => 'FUNCNEST=1' },
  {
    name: 'prompt strings that read and eval a line',
    shells: ['bash'],
    poison: () => `PS1='$(read -r l; eval "$l")'; PS0='$(read -r l; eval "$l")'`,
  },
  {
    name: 'redefine the hook functions',
    shells: ['bash'],
    poison: () => '__conch_prompt() { :; }\n__conch_gate() { :; }',
  },
  {
    name: 'unset the hook functions',
    shells: ['bash'],
    poison: () => 'unset -f __conch_prompt __conch_gate',
  },
  {
    name: 'Ctrl-D at the gate',
    shells: ['bash', 'zsh'],
    poison: () => 'true',
    input: (c) => `\u0004${c.touch}\n`,
  },
  {
    name: 'type the key read from the shell',
    shells: ['bash', 'zsh'],
    poison: () => 'typeset -f __conch_prompt __conch_gate; echo "key=$__conch_key"',
    input: (c, key) => `${key ?? 'no-key-found'}\n${c.touch}\n`,
  },
];

/** The gate key a poisoning command's output shows (the old variable, or the hook's body). */
function keyIn(output: unknown): string | undefined {
  const text = String(output ?? '');
  const variable = /key=([0-9a-f]{16})/.exec(text)?.[1];
  if (variable) return variable;
  const nonces = new Set([...text.matchAll(/6973;[BE];([0-9a-f]{16})/g)].map((m) => m[1]));
  return [...text.matchAll(/[0-9a-f]{16}/g)].map((m) => m[0]).find((t) => !nonces.has(t));
}

async function attempt(shell: 'bash' | 'zsh', attack: Attack): Promise<void> {
  const h = createHarness({
    shell: shell === 'zsh' ? ZSH : '/bin/bash',
    commandStartTimeoutMs: 3000,
    defaultTimeout: 8,
  });
  try {
    const marker = join(h.root, 'pwned');
    const c: Ctx = { touch: `touch '${marker}'`, evil: join(h.root, 'evil.sh') };
    writeFileSync(c.evil, `${c.touch}\n`);
    const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    const steps: unknown[] = [];
    const call = async (args: Record<string, unknown>) => {
      const result = await h.call({ timeout: 8, ...args });
      steps.push({ args, result, at: Date.now() });
      return result;
    };

    const first = await call({ command: attack.poison(c), idle_ms: 1000 });
    const poisoned = service.list()[0];
    expect(poisoned).toBeDefined();
    const input = (attack.input ?? KEY_GUESSES)(c, keyIn(first.output));
    let target: ToolResult = first;
    if (first.session_id === undefined) {
      // A program that prompts and exits without reading, in the poisoned shell (the most
      // recently used idle one): the input waits in the terminal for whatever reads next.
      target = await call({ command: `printf 'name? '; sleep 1`, idle_ms: 100_000 });
    }
    if (target.session_id !== undefined) {
      await call({ session_id: target.session_id, input });
    }
    await new Promise((r) => setTimeout(r, 1500));
    // The next command works: in the poisoned shell, or in a new one after it was killed.
    const next = await call({ command: 'echo alive' });
    expect(next).toMatchObject({ exit_code: 0, output: 'alive\n' });
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(marker), `${attack.name}: the input ran as a command`).toBe(false);
    const after = service.list().find((s) => s.id === poisoned!.id);
    if (after) {
      // Still in use: it keeps following the protocol.
      expect(after.pid).toBe(poisoned!.pid);
      const again = await call({ command: 'echo again', session_id: poisoned!.id });
      expect(again, JSON.stringify(steps)).toMatchObject({ exit_code: 0, output: 'again\n' });
    } else {
      // Reported broken and killed: nothing of it is left.
      expect(isAlive(poisoned!.pid)).toBe(false);
    }
    expect(existsSync(marker), `${attack.name}: the input ran as a command`).toBe(false);
  } finally {
    await h.dispose();
  }
}

describe('marker protocol poisoning', () => {
  let zdotdir: string;
  const saved = process.env.ZDOTDIR;
  beforeAll(() => {
    zdotdir = mkdtempSync(join(tmpdir(), 'conch-poison-zdotdir-'));
    writeFileSync(join(zdotdir, '.zshrc'), 'export FROM_ZSHRC=loaded\n');
    process.env.ZDOTDIR = zdotdir;
  });
  afterAll(() => {
    if (saved === undefined) delete process.env.ZDOTDIR;
    else process.env.ZDOTDIR = saved;
    rmSync(zdotdir, { recursive: true, force: true });
  });

  for (const attack of ATTACKS) {
    for (const shell of attack.shells) {
      (shell === 'zsh' && !HAS_ZSH ? it.skip : it.concurrent)(
        `${shell}: ${attack.name}`,
        async () => {
          await attempt(shell, attack);
        },
        60_000,
      );
    }
  }

  it('reports a shell whose gate can no longer read as broken, and kills it', async () => {
    const h = createHarness({ commandStartTimeoutMs: 1500 });
    try {
      const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
      // bash: a readonly REPLY cannot be made local, so the gate's read fails for good.
      expect(await h.call({ command: 'readonly REPLY; echo set' })).toMatchObject({ output: 'set\n' });
      const shell = service.list()[0]!.pid;
      const next = await h.call({ command: 'echo next' });
      expect(next.error).toMatch(
        /session_id 1: its shell stopped following the terminal protocol \(the command did not start: the shell made no progress for 1500 ms/,
      );
      expect(isAlive(shell)).toBe(false);
      expect(service.list()).toEqual([]);
      expect(await h.call({ command: 'echo fresh' })).toMatchObject({ exit_code: 0, output: 'fresh\n' });
    } finally {
      await h.dispose();
    }
  });

  it('refuses input that contains the gate byte U+001E', async () => {
    const h = createHarness();
    try {
      const waiting = await h.call({ command: `printf 'name? '; sleep 1`, idle_ms: 100_000 });
      expect(waiting).toMatchObject({ state: 'waiting' });
      const refused = await h.call({ session_id: waiting.session_id, input: 'abc\u001e0123\n' });
      expect(refused.error).toMatch(/U\+001E .* reserved .* given at index 3/);
    } finally {
      await h.dispose();
    }
  });
});
