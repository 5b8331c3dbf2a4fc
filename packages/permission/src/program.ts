/** The last path component of a program name (`/usr/bin/git` -> `git`). */
export function baseName(name: string): string {
  const i = name.lastIndexOf('/');
  return i >= 0 ? name.slice(i + 1) : name;
}

/** Directories where a program named by path is the system's own binary. */
export const SYSTEM_DIRS = new Set(['/bin', '/usr/bin', '/usr/local/bin', '/sbin', '/usr/sbin']);

/** Shells whose `-c` strings the gate reads as commands. */
export const SHELLS = new Set([
  'sh',
  'bash',
  'zsh',
  'dash',
  'ksh',
  'ash',
  'mksh',
  'fish',
  'yash',
  'posh',
  'rbash',
]);

/** Programs that fetch from the network. */
export const DOWNLOADERS = new Set([
  'curl',
  'wget',
  'fetch',
  'aria2c',
  'http',
  'https',
  'xh',
  'lwp-request',
  'GET',
  'nc',
  'ncat',
  'netcat',
  'socat',
  'wget2',
  'curlie',
  'httpie',
  'ftp',
  'tftp',
  'scp',
  'sftp',
  'rsync',
]);

const INTERPRETER_RE =
  /^(python[\d.]*|pypy[\d.]*|node|nodejs|perl[\d.]*|ruby[\d.]*|php[\d.]*|deno|bun|lua[\d.]*|luajit|tclsh[\d.]*|wish|pwsh|powershell|osascript|Rscript|R|awk|gawk|mawk|nawk|busybox|irb|jshell|groovy|scala|elixir|erl|ghci|julia|guile|racket|sbcl|clisp|ts-node|tsx|expect)$/;

export function isInterpreter(base: string): boolean {
  return SHELLS.has(base) || INTERPRETER_RE.test(base);
}
