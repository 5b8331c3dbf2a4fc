import { execFileSync } from 'node:child_process';

export type ShellName = 'bash' | 'sh' | 'zsh';

/** Each shell without its start-up files; `sh` is /bin/sh (dash on Debian and Ubuntu). */
const COMMANDS: Record<ShellName, { file: string; args: string[]; interactive: string[] }> = {
  bash: {
    file: '/bin/bash',
    args: ['--norc', '--noprofile', '-c'],
    interactive: ['--norc', '--noprofile', '-i'],
  },
  sh: { file: '/bin/sh', args: ['-c'], interactive: ['-i'] },
  zsh: { file: 'zsh', args: ['-f', '-c'], interactive: ['-f', '-i'] },
};

const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', HOME: process.env.HOME ?? '/' };

/**
 * Runs `script` with `<shell> -c` and returns its standard output. The output of
 * `printf '%s\0' …` splits back into words with `splitNul`.
 */
export function runShell(shell: ShellName, script: string, options: { cwd?: string } = {}): string {
  const { file, args } = COMMANDS[shell];
  return execFileSync(file, [...args, script], {
    encoding: 'utf8',
    env: ENV,
    timeout: 20_000,
    maxBuffer: 64 * 1024 * 1024,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(options.cwd ? { cwd: options.cwd } : {}),
  });
}

/**
 * Feeds `lines` to an interactive shell on standard input (prompts go to standard error), so
 * interactive-only expansions such as history (`!!`) apply, as in a terminal session.
 */
export function runInteractive(shell: ShellName, lines: string): string {
  const { file, interactive } = COMMANDS[shell];
  return execFileSync(file, interactive, {
    input: lines,
    encoding: 'utf8',
    env: ENV,
    timeout: 20_000,
    maxBuffer: 64 * 1024 * 1024,
    stdio: ['pipe', 'pipe', 'ignore'],
  });
}

/** The NUL-terminated words `printf '%s\0' …` printed. */
export function splitNul(output: string): string[] {
  const words = output.split('\0');
  if (words.pop() !== '') throw new Error(`output does not end in NUL: ${JSON.stringify(output.slice(-40))}`);
  return words;
}
