/**
 * Which shell variable names a command may assign without the gate asking. An allow-list: a name
 * is inert only when nothing the shell or a later program does depends on it. Lowercase names are
 * inert by convention (programs read uppercase environment variables; bash's own lowercase
 * specials and zsh's special lowercase parameters are listed below and excluded); uppercase names
 * are inert only when listed. conch's own terminal protocol names (`__conch_*`) are never
 * assignable.
 */

/** The terminal's marker protocol lives in these names; assigning one could take over a session. */
export const PROTOCOL_PREFIX = '__conch_';

/** Lowercase names bash or zsh act on (prompts, hooks, command tables, history, globbing). */
const SPECIAL_LOWERCASE = new Set([
  // bash
  'histchars',
  'auto_resume',
  // zsh special parameters and hook arrays
  'path',
  'fpath',
  'cdpath',
  'manpath',
  'mailpath',
  'module_path',
  'psvar',
  'prompt',
  'watch',
  'argv',
  'options',
  'aliases',
  'galiases',
  'saliases',
  'dis_aliases',
  'functions',
  'dis_functions',
  'functions_source',
  'commands',
  'builtins',
  'dis_builtins',
  'parameters',
  'modules',
  'nameddirs',
  'userdirs',
  'reswords',
  'dis_reswords',
  'history',
  'historywords',
  'jobdirs',
  'jobstates',
  'jobtexts',
  'mapfile',
  'terminfo',
  'termcap',
  'widgets',
  'keymaps',
  'signals',
  'status',
  'pipestatus',
  'funcstack',
  'funcfiletrace',
  'funcsourcetrace',
  'functrace',
  'precmd_functions',
  'preexec_functions',
  'chpwd_functions',
  'periodic_functions',
  'zshaddhistory_functions',
  'zshexit_functions',
  'zsh_eval_context',
  'zle_highlight',
  'sysparams',
  'patchars',
  'registers',
  'killring',
]);

/** Uppercase names a program only reads as harmless presentation or locale settings. */
const INERT_UPPERCASE = new Set([
  'LANG',
  'LANGUAGE',
  'TZ',
  'COLUMNS',
  'LINES',
  'NO_COLOR',
  'FORCE_COLOR',
  'CLICOLOR',
  'CLICOLOR_FORCE',
  'CI',
  'NODE_ENV',
  'RUST_BACKTRACE',
  'RUST_LOG',
  'PYTHONUNBUFFERED',
  'PYTHONDONTWRITEBYTECODE',
  'PYTHONIOENCODING',
]);

export type NameVerdict =
  | { kind: 'inert' }
  | { kind: 'protocol' }
  | { kind: 'special'; reason: string }
  | { kind: 'invalid'; reason: string };

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** How assigning (or unsetting, exporting, reading into) `name` is judged. */
export function classifyName(name: string): NameVerdict {
  if (name.startsWith(PROTOCOL_PREFIX)) return { kind: 'protocol' };
  if (!NAME.test(name))
    return { kind: 'invalid', reason: `${JSON.stringify(name)} is not a plain variable name` };
  if (/^[a-z_][a-z0-9_]*$/.test(name)) {
    if (SPECIAL_LOWERCASE.has(name))
      return { kind: 'special', reason: `${name} is a special shell parameter (bash or zsh acts on it)` };
    return { kind: 'inert' };
  }
  if (INERT_UPPERCASE.has(name) || /^LC_[A-Z]+$/.test(name)) return { kind: 'inert' };
  return {
    kind: 'special',
    reason: `${name} is an environment or shell variable that the shell or later programs may act on (only lowercase names and locale/presentation variables are known to be inert)`,
  };
}
