/**
 * The shell side of the marker protocol. Each session sources an init file once after the user's
 * rc files ran; every command is written to a file and sourced (so multi-line commands, heredocs
 * and `!` reach the shell verbatim, and `cd`/`export`/`declare` persist in the session).
 *
 * Markers are OSC sequences printed with printf from shell variables, so neither the echo of the
 * typed line nor a command's own text can contain them:
 *   begin: ESC ] 6973 ; B ; <nonce> ; <seq> BEL
 *   end:   ESC ] 6973 ; E ; <nonce> ; <seq> ; <exit code> ; <cwd> BEL   (from PROMPT_COMMAND)
 * After the end marker the shell waits in a gate that discards every line but the session key, so a
 * late `input` (one that arrives after its program finished) can never run as a command. The line
 * readline then reads is only ` . "$__conch_f"` (readline reads byte by byte: short lines are
 * measurably faster).
 */

/* The end marker comes from PROMPT_COMMAND (bash) or precmd_functions (zsh). */
export const MARKER_OSC = '\u001b]6973;';

/** Single-quotes a value for POSIX shells. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export type ShellKind = 'bash' | 'zsh';

export function initScript(options: {
  kind: ShellKind;
  nonce: string;
  key: string;
  /** The file each command is written to. */
  commandFile: string;
  sessionEnv: Readonly<Record<string, string>>;
}): string {
  const exports = Object.entries(options.sessionEnv)
    .filter(([name]) => ENV_NAME.test(name))
    .map(([name, value]) => `export ${name}=${shellQuote(value)}`);
  const common = [
    `__conch_nonce=${shellQuote(options.nonce)}`,
    `__conch_key=${shellQuote(options.key)}`,
    '__conch_seq=0',
    '__conch_post=',
    `__conch_f=${shellQuote(options.commandFile)}`,
    ...exports,
    '__conch_begin() { __conch_seq=$1; printf \'\\033]6973;B;%s;%s\\007\' "$__conch_nonce" "$1"; }',
    '__conch_gate() {',
    '  local __conch_line',
    "  trap '' INT",
    '  while IFS= read -r -s __conch_line; do',
    '    [ "$__conch_line" = "$__conch_key" ] && break',
    '  done',
    '  trap - INT',
    '}',
    '__conch_prompt() {',
    '  local __conch_ec=$?',
    '  if [ -n "$__conch_post" ]; then . "$__conch_post"; __conch_post=; fi',
    '  printf \'\\033]6973;E;%s;%s;%s;%s\\007\' "$__conch_nonce" "$__conch_seq" "$__conch_ec" "$PWD"',
    '  __conch_gate',
    '}',
  ];
  if (options.kind === 'zsh') {
    return [
      ...common,
      // No prompt text, no bracketed-paste toggles, nothing the typed lines would add to history.
      "PROMPT=''; PS1=''; PS2=''; PROMPT2=''; RPROMPT=''; RPS1=''; RPS2=''",
      'unset zle_bracketed_paste',
      'setopt HIST_IGNORE_SPACE NO_PROMPT_SP NO_PROMPT_CR',
      // Ours runs first (it needs the command's $?); the user's own hooks still run.
      'precmd_functions=(__conch_prompt ${precmd_functions:#__conch_prompt})',
      '',
    ].join('\n');
  }
  return [
    ...common,
    "PS1=''; PS2=''; PS0=''; PS4='+ '",
    "bind 'set enable-bracketed-paste off' 2>/dev/null",
    'HISTCONTROL="ignorespace${HISTCONTROL:+:$HISTCONTROL}"',
    // Ours runs first (it needs the command's $?); the user's own hooks (direnv, ...) still run.
    'if (( BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1) )); then',
    '  __conch_pc=()',
    '  for __conch_x in "${PROMPT_COMMAND[@]}"; do [ -n "$__conch_x" ] && __conch_pc+=("$__conch_x"); done',
    '  PROMPT_COMMAND=(__conch_prompt "${__conch_pc[@]}")',
    '  unset __conch_pc __conch_x',
    'else',
    '  PROMPT_COMMAND="__conch_prompt${PROMPT_COMMAND:+; $PROMPT_COMMAND}"',
    'fi',
    '',
  ].join('\n');
}

/**
 * The file a command runs from: the begin marker, per-call env (restored by the prompt hook after
 * the command, whatever it did), an optional `cd`, then the command verbatim.
 */
export function commandScript(options: {
  seq: number;
  command: string;
  cwd?: string;
  env?: Readonly<Record<string, string>>;
  postFile?: string;
}): { script: string; post: string | undefined } {
  const lines = [`__conch_begin ${options.seq}`];
  const restore: string[] = [];
  const entries = Object.entries(options.env ?? {});
  entries.forEach(([name, value], i) => {
    lines.push(
      `if [ -n "\${${name}+x}" ]; then __conch_o${i}=$${name}; __conch_s${i}=1; else __conch_s${i}=; fi`,
      `export ${name}=${shellQuote(value)}`,
    );
    restore.push(
      `if [ -n "$__conch_s${i}" ]; then export ${name}="$__conch_o${i}"; else unset ${name}; fi; unset __conch_o${i} __conch_s${i}`,
    );
  });
  if (restore.length > 0 && options.postFile) lines.push(`__conch_post=${shellQuote(options.postFile)}`);
  if (options.cwd !== undefined) lines.push(`cd -- ${shellQuote(options.cwd)} || return 1`);
  lines.push(options.command, '');
  return { script: lines.join('\n'), post: restore.length > 0 ? `${restore.join('\n')}\n` : undefined };
}
