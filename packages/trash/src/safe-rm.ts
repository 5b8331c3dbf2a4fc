import type { TrashDialect } from '@conch/core';

/** Single-quotes a value for POSIX shells. */
function q(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/** The long options GNU rm knows (abbreviations are matched against these, as getopt does). */
const LONG_OPTIONS = [
  'force',
  'interactive',
  'one-file-system',
  'no-preserve-root',
  'preserve-root',
  'recursive',
  'dir',
  'verbose',
  'help',
  'version',
];

/**
 * Shell code that defines `rm` as a function moving its operands into the trash at `trashDir`
 * instead of deleting them. Written to a file and sourced (a multi-line definition typed into
 * zsh's line editor is garbled). Behaves as GNU rm does for the user-visible parts: options
 * anywhere before `--` (bundled, long, unambiguous abbreviations), `-f` (no error for missing
 * operands, no operand is fine), `-i` / `-I` / `--interactive[=WHEN]` prompts, the write-protected
 * prompt on a terminal, `-r`/`-R`, `-d`, `-v`, "Is a directory", "Directory not empty", `.`/`..`
 * and `/` refused, the same messages and exit status (1 when any operand failed). Globs, quoting
 * and variables are the shell's: the function sees the words rm would.
 *
 * An entry is two names in the trash directory: `<id>.path` (the absolute path it had, raw bytes,
 * written first with noclobber so concurrent shells never share an id) and `<id>` (the file,
 * directory or symlink itself, moved there with `mv`). Ids are `<epoch seconds>-<shell pid>-<n>`.
 *
 * Parsing: bash and zsh get `function rm {`, defined with alias expansion off (an alias named `rm`
 * or `mv` cannot rewrite the definition) and every builtin called as `\builtin` (a function named
 * `printf`, `read` or `local` is never reached); zsh runs the body under `emulate -L sh`, so the
 * user's options (KSH_ARRAYS, NO_UNSET, GLOB_SUBST ...) do not change it. `sh` (dash, the cli's
 * fallback shell) gets a POSIX `rm()`. External programs (`mv`, `mkdir`, the real `rm` on error
 * cleanup) run through `\command`, which skips functions and aliases.
 */
export function safeRmFunction(dialect: TrashDialect, trashDir: string): string {
  const B = dialect === 'sh' ? '' : '\\builtin ';
  const C = '\\command ';
  const now =
    dialect === 'bash'
      ? `${B}printf -v _rm_t '%(%s)T' -1 2>/dev/null || _rm_t=$(${C}date +%s)`
      : dialect === 'zsh'
        ? `_rm_t=$EPOCHSECONDS; [ -n "$_rm_t" ] || _rm_t=$(${C}date +%s)`
        : `_rm_t=$(${C}date +%s)`;
  const body = [
    ...(dialect === 'zsh' ? [`  ${B}emulate -L sh`] : []),
    `  ${B}local _rm_root=${q(trashDir)}`,
    `  ${B}local _rm_f=0 _rm_i=0 _rm_I=0 _rm_r=0 _rm_d=0 _rm_v=0 _rm_n=0 _rm_dd=0 _rm_help= _rm_st=0`,
    `  ${B}local _rm_a= _rm_o= _rm_c= _rm_l= _rm_m= _rm_k= _rm_w= _rm_b= _rm_p= _rm_qn= _rm_e= _rm_t= _rm_id= _rm_j=0 _rm_ans= _rm_cwd= _rm_C= _rm_wp=`,
    // Pass 1: options (anywhere before `--`, as GNU getopt permutes) and the operand count.
    '  for _rm_a in "$@"; do',
    '    if [ "$_rm_dd" = 1 ]; then _rm_n=$((_rm_n + 1)); continue; fi',
    '    case $_rm_a in',
    '      --) _rm_dd=1 ;;',
    '      --*)',
    '        _rm_o=${_rm_a#--}; _rm_o=${_rm_o%%=*}; _rm_m=; _rm_k=0; _rm_w=',
    `        for _rm_l in ${LONG_OPTIONS.join(' ')}; do`,
    '          case $_rm_l in',
    '            "$_rm_o") _rm_m=$_rm_l; _rm_k=1; _rm_w=; break ;;',
    `            "$_rm_o"*) _rm_m=$_rm_l; _rm_k=$((_rm_k + 1)); _rm_w="$_rm_w '--$_rm_l'" ;;`,
    '          esac',
    '        done',
    '        if [ "$_rm_k" = 0 ]; then',
    `          ${B}printf "rm: unrecognized option '%s'\\nTry 'rm --help' for more information.\\n" "$_rm_a" >&2; return 1`,
    '        fi',
    '        if [ "$_rm_k" -gt 1 ]; then',
    `          ${B}printf "rm: option '%s' is ambiguous; possibilities:%s\\nTry 'rm --help' for more information.\\n" "\${_rm_a%%=*}" "$_rm_w" >&2; return 1`,
    '        fi',
    '        case $_rm_a in',
    '          *=*)',
    '            _rm_w=${_rm_a#*=}',
    '            if [ "$_rm_m" != interactive ]; then',
    `              ${B}printf "rm: option '--%s' doesn't allow an argument\\nTry 'rm --help' for more information.\\n" "$_rm_m" >&2; return 1`,
    '            fi',
    '            case $_rm_w in',
    '              never|no|none) _rm_i=0; _rm_I=0 ;;',
    '              once) _rm_I=1; _rm_i=0; _rm_f=0 ;;',
    '              always|yes) _rm_i=1; _rm_I=0; _rm_f=0 ;;',
    '              *)',
    `                ${B}printf "rm: invalid argument '%s' for '--interactive'\\nValid arguments are:\\n  - 'never', 'no', 'none'\\n  - 'once'\\n  - 'always', 'yes'\\nTry 'rm --help' for more information.\\n" "$_rm_w" >&2`,
    '                return 1 ;;',
    '            esac ;;',
    '          *)',
    '            case $_rm_m in',
    '              force) _rm_f=1; _rm_i=0; _rm_I=0 ;;',
    '              interactive) _rm_i=1; _rm_I=0; _rm_f=0 ;;',
    '              recursive) _rm_r=1 ;;',
    '              dir) _rm_d=1 ;;',
    '              verbose) _rm_v=1 ;;',
    '              help|version) [ -n "$_rm_help" ] || _rm_help=$_rm_m ;;',
    '            esac ;;',
    '        esac ;;',
    '      -?*)',
    '        _rm_o=${_rm_a#-}',
    '        while [ -n "$_rm_o" ]; do',
    '          _rm_c=${_rm_o%"${_rm_o#?}"}; _rm_o=${_rm_o#?}',
    '          case $_rm_c in',
    '            f) _rm_f=1; _rm_i=0; _rm_I=0 ;;',
    '            i) _rm_i=1; _rm_I=0; _rm_f=0 ;;',
    '            I) _rm_I=1; _rm_i=0; _rm_f=0 ;;',
    '            r|R) _rm_r=1 ;;',
    '            d) _rm_d=1 ;;',
    '            v) _rm_v=1 ;;',
    '            *)',
    `              ${B}printf "rm: invalid option -- '%s'\\nTry 'rm --help' for more information.\\n" "$_rm_c" >&2; return 1 ;;`,
    '          esac',
    '        done ;;',
    '      *) _rm_n=$((_rm_n + 1)) ;;',
    '    esac',
    '  done',
    // --help / --version print what the real rm prints (and remove nothing, as rm does).
    `  if [ -n "$_rm_help" ]; then ${C}rm "--$_rm_help"; return; fi`,
    '  if [ "$_rm_n" = 0 ]; then',
    '    [ "$_rm_f" = 1 ] && return 0',
    `    ${B}printf "rm: missing operand\\nTry 'rm --help' for more information.\\n" >&2; return 1`,
    '  fi',
    '  if [ "$_rm_I" = 1 ] && { [ "$_rm_n" -gt 3 ] || [ "$_rm_r" = 1 ]; }; then',
    '    _rm_w=s; [ "$_rm_n" = 1 ] && _rm_w=',
    '    _rm_k=; [ "$_rm_r" = 1 ] && _rm_k=" recursively"',
    `    ${B}printf 'rm: remove %s argument%s%s? ' "$_rm_n" "$_rm_w" "$_rm_k" >&2`,
    `    ${B}read -r _rm_ans || _rm_ans=`,
    '    case $_rm_ans in [yY]*) ;; *) return 0 ;; esac',
    '  fi',
    // Where relative operands are: $PWD when it is really here (a command can assign PWD).
    '  _rm_cwd=$PWD',
    `  if [ -z "$_rm_cwd" ] || ! [ "$_rm_cwd" -ef . ]; then _rm_cwd=$(${B}pwd -P); fi`,
    `  if [ ! -d "$_rm_root" ] && ! ${C}mkdir -p -m 700 -- "$_rm_root"; then`,
    `    ${B}printf 'rm: cannot create the trash directory %s; nothing was removed\\n' "$_rm_root" >&2; return 1`,
    '  fi',
    // Pass 2: each operand.
    '  _rm_dd=0',
    '  for _rm_a in "$@"; do',
    '    if [ "$_rm_dd" = 0 ]; then',
    '      case $_rm_a in --) _rm_dd=1; continue ;; -?*) continue ;; esac',
    '    fi',
    `    case $_rm_a in *\\'*) _rm_qn="\\"$_rm_a\\"" ;; *) _rm_qn="'$_rm_a'" ;; esac`,
    '    if [ ! -e "$_rm_a" ] && [ ! -L "$_rm_a" ]; then',
    '      if [ "$_rm_f" != 1 ]; then',
    `        ${B}printf 'rm: cannot remove %s: No such file or directory\\n' "$_rm_qn" >&2; _rm_st=1`,
    '      fi',
    '      continue',
    '    fi',
    // The operand without trailing slashes ('/' stays '/').
    '    _rm_b=$_rm_a',
    '    while :; do case $_rm_b in */) _rm_b=${_rm_b%/} ;; *) break ;; esac; done',
    '    [ -n "$_rm_b" ] || _rm_b=/',
    '    if [ -d "$_rm_a" ] && [ ! -L "$_rm_b" ]; then',
    '      if [ "$_rm_r" != 1 ] && [ "$_rm_d" != 1 ]; then',
    `        ${B}printf 'rm: cannot remove %s: Is a directory\\n' "$_rm_qn" >&2; _rm_st=1; continue`,
    '      fi',
    '      case /$_rm_b in',
    '        */.|*/..)',
    `          ${B}printf "rm: refusing to remove '.' or '..' directory: skipping %s\\n" "$_rm_qn" >&2; _rm_st=1; continue ;;`,
    '      esac',
    '      if [ "$_rm_b" = / ]; then',
    '        if [ "$_rm_r" = 1 ]; then',
    `          ${B}printf "rm: it is dangerous to operate recursively on %s\\nrm: use --no-preserve-root to override this failsafe\\n" "$_rm_qn" >&2`,
    '        else',
    `          ${B}printf 'rm: cannot remove %s: Directory not empty\\n' "$_rm_qn" >&2`,
    '        fi',
    '        _rm_st=1; continue',
    '      fi',
    `      if [ "$_rm_r" != 1 ] && [ -n "$(${C}ls -A -- "$_rm_b" 2>/dev/null)" ]; then`,
    `        ${B}printf 'rm: cannot remove %s: Directory not empty\\n' "$_rm_qn" >&2; _rm_st=1; continue`,
    '      fi',
    '    fi',
    '    case $_rm_b in /*) _rm_p=$_rm_b ;; *) _rm_p=${_rm_cwd%/}/$_rm_b ;; esac',
    // Never move the trash into itself.
    '    case $_rm_root/ in',
    '      "$_rm_p"/*)',
    `        ${B}printf 'rm: cannot remove %s: it contains the trash (%s); nothing was moved\\n' "$_rm_qn" "$_rm_root" >&2; _rm_st=1; continue ;;`,
    '    esac',
    '    if [ -L "$_rm_b" ]; then _rm_k="symbolic link"',
    '    elif [ -d "$_rm_b" ]; then _rm_k=directory',
    '    elif [ -f "$_rm_b" ]; then',
    '      if [ -s "$_rm_b" ]; then _rm_k="regular file"; else _rm_k="regular empty file"; fi',
    '    elif [ -p "$_rm_b" ]; then _rm_k=fifo',
    '    elif [ -S "$_rm_b" ]; then _rm_k=socket',
    '    elif [ -c "$_rm_b" ]; then _rm_k="character special file"',
    '    elif [ -b "$_rm_b" ]; then _rm_k="block special file"',
    '    else _rm_k=file; fi',
    '    _rm_wp=',
    '    if [ ! -L "$_rm_b" ] && [ ! -w "$_rm_b" ]; then _rm_wp="write-protected "; fi',
    '    if [ "$_rm_i" = 1 ] || { [ "$_rm_f" != 1 ] && [ -n "$_rm_wp" ] && [ -t 0 ]; }; then',
    `      ${B}printf 'rm: remove %s%s %s? ' "$_rm_wp" "$_rm_k" "$_rm_qn" >&2`,
    `      ${B}read -r _rm_ans || _rm_ans=`,
    '      case $_rm_ans in [yY]*) ;; *) continue ;; esac',
    '    fi',
    // Claim an id: the .path file is created with noclobber, so two shells never share one.
    `    ${now}`,
    '    case $- in *C*) _rm_C=1 ;; *) _rm_C=0 ;; esac',
    '    set -C',
    '    _rm_j=0; _rm_id=',
    '    while [ "$_rm_j" -lt 1000 ]; do',
    '      _rm_j=$((_rm_j + 1))',
    '      _rm_e=$_rm_t-$$-$_rm_j',
    '      [ -e "$_rm_root/$_rm_e" ] || [ -L "$_rm_root/$_rm_e" ] && continue',
    `      if { ${B}printf '%s' "$_rm_p" > "$_rm_root/$_rm_e.path"; } 2>/dev/null; then _rm_id=$_rm_e; break; fi`,
    '      [ -e "$_rm_root/$_rm_e.path" ] || break',
    '    done',
    '    [ "$_rm_C" = 1 ] || set +C',
    '    if [ -z "$_rm_id" ]; then',
    `      ${B}printf 'rm: cannot remove %s: the trash (%s) is not writable\\n' "$_rm_qn" "$_rm_root" >&2; _rm_st=1; continue`,
    '    fi',
    `    if _rm_e=$(${C}mv -- "$_rm_b" "$_rm_root/$_rm_id" 2>&1); then`,
    '      if [ "$_rm_v" = 1 ]; then',
    '        if [ "$_rm_k" = directory ]; then _rm_k="removed directory"; else _rm_k=removed; fi',
    `        ${B}printf '%s %s\\n' "$_rm_k" "$_rm_qn"`,
    '      fi',
    '    else',
    `      ${C}rm -f -- "$_rm_root/$_rm_id.path" 2>/dev/null || :`,
    // mv's reason (`mv: cannot move 'a' to 'b': Permission denied`) as rm states it.
    `      ${B}printf 'rm: cannot remove %s: %s\\n' "$_rm_qn" "\${_rm_e##*: }" >&2; _rm_st=1`,
    '    fi',
    '  done',
    // The shell's own directory went to the trash with an operand: step out to what is left.
    '  if [ ! -d "$_rm_cwd" ]; then',
    '    _rm_p=$_rm_cwd',
    '    while [ -n "$_rm_p" ] && [ ! -d "$_rm_p" ]; do _rm_p=${_rm_p%/*}; done',
    `    ${B}cd -- "\${_rm_p:-/}" && ${B}printf 'rm: the current directory was moved to the trash; now in %s\\n' "\${_rm_p:-/}" >&2`,
    '  fi',
    '  return "$_rm_st"',
  ];
  const header = `# conch safe rm: \`rm\` moves its operands into the trash at ${trashDir.replace(/\n/g, ' ')} instead of deleting them.`;
  if (dialect === 'sh') return [header, 'rm() {', ...body, '}', ''].join('\n');
  const [aliasesOff, aliasesBack] =
    dialect === 'zsh'
      ? [
          [
            "if [[ -o aliases ]]; then __conch_rm_ea=1; else __conch_rm_ea=''; fi",
            '\\builtin unsetopt aliases',
            '\\builtin zmodload -F zsh/datetime p:EPOCHSECONDS 2>/dev/null',
          ],
          ['if [[ -n $__conch_rm_ea ]]; then \\builtin setopt aliases; fi'],
        ]
      : [
          [
            "if \\builtin shopt -q expand_aliases; then __conch_rm_ea=1; else __conch_rm_ea=''; fi",
            '\\builtin shopt -u expand_aliases',
          ],
          ['if [ -n "$__conch_rm_ea" ]; then \\builtin shopt -s expand_aliases; fi'],
        ];
  return [
    header,
    ...aliasesOff,
    // An alias named rm would still win over the function at the prompt: the user's own choice
    // (their rc file); a function named rm from the rc file is replaced.
    'function rm {',
    ...body,
    '}',
    ...aliasesBack,
    '\\builtin unset __conch_rm_ea',
    '',
  ].join('\n');
}
