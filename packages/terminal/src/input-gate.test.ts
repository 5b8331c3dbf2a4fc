// Input typed into a shell the session runs (bash, sh, zsh, an exec'd shell) is judged like a command; input to any other program is not.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { PermissionGate, PermissionRequest } from '@conch/core';
import { readsCommands, shellFamily } from './foreground.js';
import { createHarness, type Harness } from './test-support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

/** A gate that records every request and denies commands containing "forbidden". */
function recordingGate(): { gate: PermissionGate; requests: PermissionRequest[] } {
  const requests: PermissionRequest[] = [];
  const gate: PermissionGate = {
    check: async (request) => {
      requests.push(request);
      return request.kind === 'command' && request.command.includes('forbidden')
        ? { outcome: 'deny', reason: 'not allowed in this test' }
        : { outcome: 'allow', reason: 'test' };
    },
  };
  return { gate, requests };
}

/** The `command` requests after the first `skip`. */
const commandsOf = (requests: PermissionRequest[], skip = 0) =>
  requests.slice(skip).map((r) => (r.kind === 'command' ? r.command : `(${r.kind})`));

describe('input to a shell is checked like a command', () => {
  let dir: string;
  const savedZdotdir = process.env.ZDOTDIR;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'conch-input-gate-'));
    writeFileSync(join(dir, '.zshrc'), '');
    process.env.ZDOTDIR = dir;
  });
  afterAll(() => {
    if (savedZdotdir === undefined) delete process.env.ZDOTDIR;
    else process.env.ZDOTDIR = savedZdotdir;
    rmSync(dir, { recursive: true, force: true });
  });

  it('judges each line typed into a nested bash, denies a forbidden one and runs an allowed one', async () => {
    const { gate, requests } = recordingGate();
    h = createHarness({}, { gate });
    const marker = join(dir, 'forbidden-bash');
    const nested = await h.call({ command: `cd ${dir} && PS1='nested$ ' bash --norc --noprofile` });
    expect(nested).toMatchObject({ state: 'waiting', output: 'nested$ ' });
    const before = requests.length;

    const denied = await h.call({ session_id: nested.session_id, input: `touch ${marker}\n` });
    expect(denied).toMatchObject({ permission_denied: true });
    expect(requests.slice(before)).toEqual([
      { kind: 'command', tool: 'terminal', command: `touch ${marker}`, cwd: dir, dialect: 'bash' },
    ]);

    const allowed = await h.call({ session_id: nested.session_id, input: 'echo hello-from-nested\n' });
    expect(allowed).toMatchObject({ state: 'waiting' });
    expect(allowed.output).toContain('hello-from-nested');
    expect(commandsOf(requests, before)).toEqual([`touch ${marker}`, 'echo hello-from-nested']);

    // A line typed in parts is judged whole when it ends.
    const part = await h.call({
      session_id: nested.session_id,
      input: `touch ${join(dir, 'forbid')}`,
      idle_ms: 500,
    });
    expect(part).toMatchObject({ state: 'waiting' });
    expect(requests).toHaveLength(before + 2);
    const rest = await h.call({ session_id: nested.session_id, input: 'den-split\n' });
    expect(rest).toMatchObject({ permission_denied: true });
    expect(commandsOf(requests, before + 2)).toEqual([`touch ${join(dir, 'forbidden-split')}`]);
    // Ctrl-C empties the line; it is not judged.
    await h.call({ session_id: nested.session_id, input: '\u0003' });
    expect(requests).toHaveLength(before + 3);

    const exited = await h.call({ session_id: nested.session_id, input: 'exit 3\n' });
    expect(exited).toMatchObject({ exit_code: 3 });
    expect(commandsOf(requests, before + 3)).toEqual(['exit 3']);
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(join(dir, 'forbidden-split'))).toBe(false);
  });

  it('judges input to sh (dash), to a shell the session exec-ed into, and to a nested zsh', async () => {
    const { gate, requests } = recordingGate();
    h = createHarness({ idleSessionTtlMs: 600_000 }, { gate });
    const cases: { command: string; prompt: string }[] = [
      { command: `PS1='sh$ ' sh`, prompt: 'sh$ ' },
      // The tool refuses a literal `exec bash`; an exec it cannot see (through a variable) still
      // leaves a shell reading the terminal, and its input is judged.
      { command: `x=exec; PS1='exec$ ' $x bash --norc --noprofile`, prompt: 'exec$ ' },
    ];
    if (existsSync('/usr/bin/zsh')) cases.push({ command: `PS1='zsh%% ' zsh -f`, prompt: 'zsh% ' });
    for (const { command, prompt } of cases) {
      const marker = join(dir, `forbidden-${prompt.replace(/\W/g, '')}`);
      const started = await h.call({ command });
      expect(started, command).toMatchObject({ state: 'waiting' });
      expect(started.output).toContain(prompt);
      const before = requests.length;
      expect(await h.call({ session_id: started.session_id, input: `touch ${marker}\n` })).toMatchObject({
        permission_denied: true,
      });
      expect(commandsOf(requests, before), command).toEqual([`touch ${marker}`]);
      await h.call({ session_id: started.session_id, kill: true });
      expect(existsSync(marker)).toBe(false);
    }
  });

  it('does not judge input to programs: a prompt in a script, read -p, a subshell, a Python prompt', async () => {
    const { gate, requests } = recordingGate();
    h = createHarness({}, { gate });
    const script = join(dir, 'ask.sh');
    writeFileSync(script, 'read -r -p "Continue? [y/N] " a\necho "got=$a"\n');
    const programs = [
      `bash ${script}`,
      `sh -c 'printf "name? "; read a; echo "got=$a"'`,
      `read -r -p 'Continue? [y/N] ' a; echo "got=$a"`,
      // A subshell: a fork of the session's shell, running code that was already judged.
      `(read -r -p 'Continue? [y/N] ' a; echo "got=$a")`,
      `python3 -c "print('got=' + input('name? '))"`,
    ];
    for (const command of programs) {
      const waiting = await h.call({ command });
      expect(waiting, command).toMatchObject({ state: 'waiting' });
      const before = requests.length;
      const done = await h.call({ session_id: waiting.session_id, input: 'forbidden answer\n' });
      expect(done, command).toMatchObject({ exit_code: 0 });
      expect(done.output, command).toContain('got=forbidden answer');
      expect(requests.length, command).toBe(before);
    }
  });
});

describe('shell command-line grammar', () => {
  it.each([
    ['bash', [], true],
    ['bash', ['--norc', '-i'], true],
    ['bash', ['-l'], true],
    ['bash', ['-s', 'arg'], true],
    ['bash', ['-c', 'echo hi'], false],
    ['bash', ['-lc', 'echo hi'], false],
    ['bash', ['script.sh'], false],
    ['bash', ['-i', 'script.sh'], false],
    ['bash', ['--rcfile', 'x', '-i'], true],
    ['bash', ['-o', 'posix'], true],
    ['bash', ['-O', 'extglob', 'script.sh'], false],
    ['sh', ['-e', '--', 'script.sh'], false],
    ['sh', ['-'], true],
    ['zsh', ['-f'], true],
    ['zsh', ['--emulate', 'sh', 'x.sh'], false],
    ['mksh', ['-T', '/dev/tty1'], true],
    ['fish', [], true],
    ['fish', ['-c', 'echo'], false],
    ['fish', ['--command=echo'], false],
    ['fish', ['-C', 'set x 1'], true],
    ['fish', ['script.fish'], false],
  ] as const)('%s %j reads commands from its input: %s', (family, args, expected) => {
    expect(readsCommands(family, args)).toBe(expected);
  });

  it('knows shell program names, versioned or not', () => {
    expect(['bash', 'bash5.2', '-bash', 'zsh-5.9', 'ksh93', 'dash', 'busybox'].map(shellFamily)).toEqual([
      'bash',
      'bash',
      'bash',
      'zsh',
      'ksh',
      'dash',
      undefined,
    ]);
    expect(['python3', 'node', 'sudo', 'ssh'].map(shellFamily)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });
});
