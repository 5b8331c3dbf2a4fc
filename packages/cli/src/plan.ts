import { accessSync, constants } from 'node:fs';
import { basename, delimiter, join } from 'node:path';
import type { CommandPlan } from '@conch/core';
import type { ParsedCommand, ShellParser } from '@conch/shell-syntax';
import { quoteWord } from './quote.js';

/** The one plan of a cli call: what the permission gate judges and what the process layer runs. */
export interface CliPlan extends CommandPlan {
  readonly parsed: ParsedCommand;
  /** What error messages name: argv[0] or the first command's name. */
  readonly name: string;
  /**
   * cli config `safeRm` and the line runs `rm`: it runs in shell mode with the trash's `rm`
   * function defined first (the gate judges `line` as written).
   */
  readonly safeRm?: boolean;
}

export interface PlanInput {
  /** A command line. One simple literal command runs directly (argv), anything else in the shell. */
  command: string;
  /** Arguments passed to the executable named by `command` without shell interpretation. */
  args?: readonly string[];
  /** Absolute working directory. */
  cwd: string;
  /** The shell of shell mode (absolute path). */
  shell: string;
  /** 'shell' runs `command` as a script even when it is one simple command. */
  mode?: 'auto' | 'shell';
  /** Safe rm is on: a line that runs `rm` (anywhere in it) runs in shell mode, with the rm function. */
  safeRm?: boolean;
}

/**
 * zsh's builtins that bash lacks and no package installs as a program (zsh 5.9's `$builtins`; the
 * bash ones are the parser's shellBuiltin flag): with zsh as the shell, `print -l a b` or
 * `whence -p git` run in it instead of failing as a program that is not there.
 */
const ZSH_ONLY_BUILTINS: ReadonlySet<string> = new Set([
  '-',
  'autoload',
  'bindkey',
  'bye',
  'chdir',
  'compadd',
  'comparguments',
  'compcall',
  'compctl',
  'compdescribe',
  'compfiles',
  'compgroups',
  'compquote',
  'comptags',
  'comptry',
  'compvalues',
  'disable',
  'echotc',
  'echoti',
  'emulate',
  'float',
  'functions',
  'getln',
  'integer',
  'limit',
  'log',
  'noglob',
  'print',
  'private',
  'pushln',
  'r',
  'rehash',
  'sched',
  'setopt',
  'ttyctl',
  'unfunction',
  'unhash',
  'unlimit',
  'unsetopt',
  'vared',
  'whence',
  'where',
  'zcompile',
  'zformat',
  'zle',
  'zmodload',
  'zparseopts',
  'zregexparse',
  'zstyle',
]);

/** The dialect a shell path reads command lines in. */
export function dialectOf(shell: string): CommandPlan['dialect'] {
  const name = basename(shell);
  if (name === 'bash') return 'bash';
  if (name === 'zsh') return 'zsh';
  return 'sh';
}

/**
 * Plans one call: the line (with `args` shell-quoted onto it, so the gate and the runner see one
 * text), its parse, direct or shell mode, the shell and its dialect, the cwd. Built once per call
 * and handed to both the gate and the runner, so what is judged is exactly what runs.
 */
export function planCommand(parser: ShellParser, input: PlanInput): CliPlan {
  const extra = input.args ?? [];
  const line = extra.length > 0 ? `${input.command} ${extra.map(quoteWord).join(' ')}` : input.command;
  const parsed = parser.parse(line);
  const dialect = dialectOf(input.shell);
  const safeRm = input.safeRm === true && parsed.commands.some((c) => c.name === 'rm');
  const shellOnly =
    parsed.flags.shellBuiltin || (dialect === 'zsh' && ZSH_ONLY_BUILTINS.has(parsed.direct?.argv[0] ?? ''));
  const direct = input.mode !== 'shell' && !safeRm && !shellOnly ? parsed.direct : undefined;
  if (direct && direct.argv.length > 0) {
    return {
      line,
      mode: 'direct',
      argv: [...direct.argv],
      shell: input.shell,
      dialect,
      cwd: input.cwd,
      parsed,
      name: direct.argv[0]!,
    };
  }
  const name = parsed.commands[0]?.name ?? line.split(/\s+/)[0] ?? line;
  return {
    line,
    mode: 'shell',
    shell: input.shell,
    dialect,
    cwd: input.cwd,
    parsed,
    name,
    ...(safeRm ? { safeRm } : {}),
  };
}

let detectedShell: string | undefined;

/**
 * The shell of shell mode: `auto` is bash (what models write and what the gate parses) when it is
 * installed, else `/bin/sh` — a fallback the gate knows about: it reads the command as sh and asks
 * for constructs sh reads differently.
 */
export function resolveShell(configured: string): { shell: string; fallback: boolean } {
  if (configured !== 'auto') return { shell: configured, fallback: false };
  detectedShell ??=
    findExecutable(['/bin/bash', '/usr/bin/bash', '/usr/local/bin/bash']) ?? findOnPath('bash') ?? '/bin/sh';
  return { shell: detectedShell, fallback: basename(detectedShell) !== 'bash' };
}

function findExecutable(paths: readonly string[]): string | undefined {
  for (const p of paths) {
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

function findOnPath(name: string): string | undefined {
  const dirs = (process.env.PATH ?? '').split(delimiter).filter((d) => d.startsWith('/'));
  return findExecutable(dirs.map((d) => join(d, name)));
}
