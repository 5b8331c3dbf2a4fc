/**
 * The shell side of the marker protocol. Each session sources an init file once after the user's
 * rc files ran; every command is written to a file and sourced (so multi-line commands, heredocs
 * and `!` reach the shell verbatim, and `cd`/`export`/`declare` persist in the session).
 *
 * Markers are OSC sequences printed with printf, so neither the echo of the typed line nor a
 * command's own text contains them by accident:
 *   begin: ESC ] 6973 ; B ; <nonce> ; <seq> BEL                  (first line of the command file)
 *   end:   ESC ] 6973 ; E ; <nonce> ; <exit code> ; <cwd> BEL    (from the prompt hook)
 * After the end marker the shell waits in a gate (inside the hook) that discards every line but the
 * release line, `RS <key>`, which node writes right before the line that sources the next command
 * file. Input typed after its program finished is therefore never run as a command.
 *
 * Poisoning. A command the gate allowed (or a human approved) can assign any variable, so the
 * protocol reads none:
 * - the nonce and the key are baked into the hook's body at init, and the command file's path
 *   into the typed line (zsh) or a `readonly` variable (bash, whose readline pays per typed
 *   character: a long literal path cost 0.7 ms per command with a real rc); there is no other
 *   `__conch_*` variable to assign, unset, declare, export, `local`, `printf -v` or `read` into.
 *   bash's `readonly` (variables, and the hook with `readonly -f`) cannot be undone: not by
 *   assignment, `unset`, `declare +r`, `local` or `printf -v`.
 * - the release line must end in RS (U+001E) + key. node refuses model `input` that contains RS,
 *   so no input can release the gate, even from a model that read the key (`declare -f`).
 * - the gate is one function (FUNCNEST cannot stop a nested call), loops on read failures (a ^D,
 *   a TMOUT timeout or a disabled stdin never fall through to the prompt), and ignores SIGINT.
 * - the per-command state is only the seq of the begin marker, written by node into the command
 *   file; the per-call `env` restore is written by node at the top of the next command file. A
 *   command that changes either can at worst spoil its own result.
 * - the hook's place is fixed: bash `PROMPT_COMMAND` is `readonly` (it cannot be assigned, unset
 *   or declared, and stays so: bash has no way back from readonly); zsh `precmd_functions` is
 *   `typeset -r`.
 * - the prompt strings cannot run code: bash `promptvars` and zsh `PROMPT_SUBST` are off.
 * - every command word in the hook, the begin-marker line and the typed line is `builtin …` written
 *   `\builtin`, and the hook is parsed with alias expansion off: no alias (including one made by
 *   assigning BASH_ALIASES or zsh `aliases`) and no function named `.`, `source`, `printf`, `read`,
 *   `local`, `trap`, `exit` or `[` is reached.
 *
 * What only the permission gate covers (constructs it always asks for): a function definition
 * named `builtin` (both shells resolve functions before the `builtin` builtin, and nothing can call
 * a builtin past such a function); `enable`/`disable` of builtins; `trap` (a trap on a signal the
 * hook receives runs code while it waits); `bind`/`bindkey`/`zle` (a key binding that runs code
 * when the typed line is read); `set -o`/`shopt`/`setopt` (e.g. `promptvars`, `PROMPT_SUBST`).
 * zsh only: `readonly` can be undone there (`typeset +r precmd_functions`), and functions can be
 * redefined by assignment (`functions[__conch_prompt]=...`), unset (`unfunction`, `unset -f`) or
 * disabled; those are gate-only in zsh. Everywhere: rewriting the session directory's files from a
 * process the session runs (the files are the user's, like ~/.bashrc). A shell that stops following
 * the protocol anyway is detected by node (no begin marker after the release) and killed.
 */

import { TerminalProtocolError } from './errors/terminal-protocol-error.js';

/* The end marker comes from PROMPT_COMMAND (bash) or precmd_functions (zsh). */
export const MARKER_OSC = '\u001b]6973;';

/** The byte that must end the gate's release line; never accepted in model input. */
export const GATE_BYTE = '\u001e';

/** Single-quotes a value for POSIX shells. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export type ShellKind = 'bash' | 'zsh';

const HEX = /^[0-9a-f]+$/;

/** The hook: end marker with the command's status and cwd, then the gate. */
function hookBody(kind: ShellKind, nonce: string, key: string): string[] {
  // `builtin local` is a builtin in both shells. The locals come after the end marker, so a failure
  // there (a readonly REPLY) is not part of the command's output. zsh's IFS is
  // localised so read keeps the line whole (bash's read into REPLY keeps it unmodified anyway).
  const line = kind === 'zsh' ? "\\builtin local IFS=$'\\n' REPLY" : '\\builtin local REPLY';
  return [
    '__conch_prompt() {',
    // First: $? is still the command's status.
    `  \\builtin printf '\\033]6973;E;${nonce};%s;%s\\007' "$?" "$PWD"`,
    `  ${line} __conch_n=0`,
    "  \\builtin trap '' INT",
    '  while :; do',
    // -t: the wait is a select, not a read(2) on the terminal, so node (which asks the kernel
    // whether the foreground job reads the terminal) never mistakes the gate for a prompt.
    '    if \\builtin read -r -s -t 86400; then',
    `      case $REPLY in *$'\\036'${key}) break ;; esac`,
    '      __conch_n=0',
    '    else',
    // A read failure is a ^D, a timeout (> 128) or a stdin that is gone. Keep waiting; a stdin that
    // fails a thousand times in a row is gone for good, and the shell exits rather than spin.
    '      __conch_n=$((__conch_n + 1))',
    '      if [[ $__conch_n -ge 1000 ]]; then \\builtin exit 1; fi',
    '    fi',
    '  done',
    '  \\builtin trap - INT',
    '}',
  ];
}

export function initScript(options: {
  kind: ShellKind;
  nonce: string;
  key: string;
  /** The file each command is written to. */
  commandFile: string;
  sessionEnv: Readonly<Record<string, string>>;
  /** A file defining the safe `rm` function (sourced last; see @conch/trash). */
  rmFile?: string;
  /** The session's own history file (exported as HISTFILE; never the user's history). */
  historyFile?: string;
}): string {
  const { kind, nonce, key } = options;
  // Baked into the hook's body unquoted: only hex can be.
  for (const [field, value] of [
    ['nonce', nonce],
    ['key', key],
  ] as const) {
    if (!HEX.test(value)) {
      throw new TerminalProtocolError(
        'INVALID_PROTOCOL_VALUE',
        `initScript ${field}: expected lowercase hex (it is written into the hook unquoted); given ${JSON.stringify(value)}`,
      );
    }
  }
  const exports = Object.entries(options.sessionEnv)
    .filter(([name]) => ENV_NAME.test(name))
    .map(([name, value]) => `export ${name}=${shellQuote(value)}`);
  if (kind === 'zsh') {
    return [
      // The hook is parsed with alias expansion off; the user's setting comes back at the end.
      "if [[ -o aliases ]]; then __conch_ea=1; else __conch_ea=''; fi",
      '\\builtin unsetopt aliases',
      ...exports,
      ...hookBody(kind, nonce, key),
      ...promptReset(kind, options.historyFile),
      // Ours runs first (it needs the command's $?); the user's own hooks still run.
      'precmd_functions=(__conch_prompt ${precmd_functions:#__conch_prompt})',
      '\\builtin typeset -r precmd_functions',
      ...sourceRm(options.rmFile),
      'if [[ -n $__conch_ea ]]; then \\builtin setopt aliases; fi',
      'unset __conch_ea',
      '',
    ].join('\n');
  }
  return [
    "if \\builtin shopt -q expand_aliases; then __conch_ea=1; else __conch_ea=''; fi",
    '\\builtin shopt -u expand_aliases',
    ...exports,
    ...hookBody(kind, nonce, key),
    '\\builtin readonly -f __conch_prompt',
    `__conch_f=${shellQuote(options.commandFile)}`,
    '\\builtin readonly __conch_f',
    ...promptReset(kind, options.historyFile),
    // Ours runs first (it needs the command's $?); the user's own hooks (direnv, ...) still run.
    // `\` keeps an alias named like the hook from replacing it when PROMPT_COMMAND is parsed.
    'if (( BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1) )); then',
    '  __conch_pc=()',
    '  for __conch_x in "${PROMPT_COMMAND[@]}"; do [ -n "$__conch_x" ] && __conch_pc+=("$__conch_x"); done',
    '  PROMPT_COMMAND=(\'\\__conch_prompt\' "${__conch_pc[@]}")',
    '  unset __conch_pc __conch_x',
    'else',
    '  PROMPT_COMMAND="\\__conch_prompt${PROMPT_COMMAND:+; $PROMPT_COMMAND}"',
    'fi',
    '\\builtin readonly PROMPT_COMMAND',
    ...sourceRm(options.rmFile),
    'if [ -n "$__conch_ea" ]; then \\builtin shopt -s expand_aliases; fi',
    'unset __conch_ea',
    '',
  ].join('\n');
}

/**
 * What keeps the session's prompts silent and inert (run at init, and again after the user's rc
 * files were re-sourced, since they set prompts): no prompt text, no code in prompts, no bracketed
 * paste, nothing typed (lines start with a space) added to history, and the history (rc files set
 * HISTFILE, and `history -a` hooks write it) in the session's own file, not the user's.
 */
function promptReset(kind: ShellKind, historyFile?: string): string[] {
  const history = historyFile === undefined ? [] : [`\\builtin export HISTFILE=${shellQuote(historyFile)}`];
  if (kind === 'zsh') {
    return [
      "PROMPT=''; PS1=''; PS2=''; PROMPT2=''; RPROMPT=''; RPS1=''; RPS2=''",
      'unset zle_bracketed_paste',
      '\\builtin setopt HIST_IGNORE_SPACE NO_PROMPT_SP NO_PROMPT_CR NO_PROMPT_SUBST',
      ...history,
    ];
  }
  return [
    "PS1=''; PS2=''; PS0=''; PS4='+ '",
    '\\builtin shopt -u promptvars',
    "\\builtin bind 'set enable-bracketed-paste off' 2>/dev/null",
    'case :$HISTCONTROL: in *:ignorespace:*|*:ignoreboth:*) ;; *) HISTCONTROL="ignorespace${HISTCONTROL:+:$HISTCONTROL}" ;; esac',
    ...history,
  ];
}

/** Sources the safe-rm function file (parsed by the shell, never typed into its line editor). */
function sourceRm(rmFile: string | undefined): string[] {
  return rmFile === undefined ? [] : [`\\builtin . ${shellQuote(rmFile)}`];
}

/**
 * Re-sources the user's rc files that changed, in start-up order, before a command's begin marker
 * (so nothing they print is part of the command's output). A placeholder prompt is set while they
 * run, so interactive-only setup gated on `$PS1` (nvm, mise, direnv, pyenv, oh-my-zsh) runs; their
 * errors, and the status of each file that failed, go to `logFile` (node logs them); whatever they
 * do, the prompts are reset and the rm function is defined again afterwards. The command's exit
 * code is its own: the re-source runs before it.
 */
export function rcReloadScript(
  kind: ShellKind,
  files: readonly string[],
  logFile: string,
  rmFile?: string,
  historyFile?: string,
): string {
  const log = shellQuote(logFile);
  return [
    // zsh: the hook array is opened for the rc files (oh-my-zsh and add-zsh-hook register hooks
    // there) and pinned again after them, ours first. bash's PROMPT_COMMAND stays readonly (bash
    // cannot undo it): an rc line assigning it fails and the file carries on.
    ...(kind === 'zsh'
      ? ['\\builtin typeset +r precmd_functions', "PROMPT='conch%# '; PS1=$PROMPT"]
      : ["PS1='conch$ '"]),
    ...files.map(
      (f) =>
        `\\builtin . ${shellQuote(f)} 2>>${log} || \\builtin printf '%s: exit status %s\\n' ${shellQuote(f)} "$?" >>${log} 2>/dev/null`,
    ),
    ...(kind === 'zsh'
      ? [
          'precmd_functions=(__conch_prompt ${precmd_functions:#__conch_prompt})',
          '\\builtin typeset -r precmd_functions',
        ]
      : []),
    ...promptReset(kind, historyFile),
    ...sourceRm(rmFile),
  ].join('\n');
}

/** The line typed (after the release line) that sources the command file. */
export function sourceLine(kind: ShellKind, commandFile: string): string {
  // Leading space: kept out of history. `\builtin .`: no alias, no function named `.`.
  return kind === 'zsh' ? ` \\builtin . ${shellQuote(commandFile)}\n` : ' \\builtin . "$__conch_f"\n';
}

/** The line that releases the gate. */
export function releaseLine(key: string): string {
  return `${GATE_BYTE}${key}\n`;
}

/**
 * The file a command runs from: the restore of the previous command's per-call env, the begin
 * marker, this call's env (saved, then exported), an optional `cd`, then the command verbatim.
 * `restore` is what the next command file must start with (undefined when there is nothing to do).
 */
export function commandScript(options: {
  nonce: string;
  seq: number;
  command: string;
  cwd?: string;
  env?: Readonly<Record<string, string>>;
  /** What the previous command left to restore (its `restore`). */
  pendingRestore?: string;
  /** Shell code run before the begin marker (the rc re-source); its output is not the command's. */
  preamble?: string;
}): { script: string; restore: string | undefined } {
  const lines: string[] = [];
  // Errors of the restore come before the begin marker, so no command's output shows them.
  if (options.pendingRestore) lines.push(options.pendingRestore);
  if (options.preamble) lines.push(options.preamble);
  lines.push(`\\builtin printf '\\033]6973;B;${options.nonce};${options.seq}\\007'`);
  const restore: string[] = [];
  const entries = Object.entries(options.env ?? {});
  entries.forEach(([name, value], i) => {
    if (!ENV_NAME.test(name)) {
      throw new TerminalProtocolError(
        'INVALID_PROTOCOL_VALUE',
        `env: expected variable names matching [A-Za-z_][A-Za-z0-9_]*; given ${JSON.stringify(name)}`,
      );
    }
    lines.push(
      `if [ -n "\${${name}+x}" ]; then __conch_o${i}=$${name}; __conch_s${i}=1; else __conch_s${i}=; fi`,
      `export ${name}=${shellQuote(value)}`,
    );
    restore.push(
      `{ if [ -n "$__conch_s${i}" ]; then export ${name}="$__conch_o${i}"; else unset ${name}; fi; unset __conch_o${i} __conch_s${i}; } 2>/dev/null`,
    );
  });
  if (options.cwd !== undefined) lines.push(`cd -- ${shellQuote(options.cwd)} || \\builtin return 1`);
  lines.push(options.command, '');
  return { script: lines.join('\n'), restore: restore.length > 0 ? restore.join('\n') : undefined };
}
