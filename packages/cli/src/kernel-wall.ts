import {
  PERMISSION_GATE,
  type KernelPolicy,
  type SandboxLevel,
  type ToolCallContext,
  safeLstatSync,
} from '@conch/core';
import { existsSync, realpathSync } from 'node:fs';
import { constants, homedir } from 'node:os';
import { resolve } from 'node:path';
import { isConfigEntryPath, profileFor, type ProcessResult, type SandboxProfile } from '@conch/process';

/**
 * The kernel wall behind the gate: the sandbox the gate's decision says the command runs in
 * (`decision.sandbox`), made from the gate's kernel policy (@conch/process `profileFor`). No gate,
 * or a gate that wants no wall: no profile. A template (`judgedElsewhere`: the gate judged its
 * steps, a plumbing script runs) never gets the read-only profile from a read-only verdict.
 */
export function sandboxFor(
  ctx: ToolCallContext<unknown>,
  judgedElsewhere = false,
): SandboxProfile | undefined {
  const gate = ctx.resolveOptional(PERMISSION_GATE);
  const policy = gate?.kernelPolicy?.();
  if (!policy) return undefined;
  const decision = ctx.decision;
  let level: SandboxLevel | undefined = decision?.sandbox;
  if (level === undefined) level = decision?.readOnly ? 'read-only' : 'outside';
  if (level === 'read-only' && judgedElsewhere)
    level =
      policy.mode === 'workspace-write' ? 'workspace-write' : policy.mode === 'off' ? 'outside' : 'read-only';
  return profileFor(policy, level);
}

/**
 * A line of a refused write in a command's error output: EROFS, or EBUSY — a protected path is a
 * mount point, so replacing or removing it (git writes `.git/config` by renaming a lock file over
 * it; `rm`, `mv`) fails with "Device or resource busy".
 */
const EROFS_LINE = /^(.*)(?:Read-only file system|EROFS|Device or resource busy|EBUSY)(.*)$/m;
/** The same on stdout, only in the shape tools print errors in (`prog: …: Read-only file system`). */
const STDOUT_EROFS =
  /^(?:[\w./-]+: .*(?:Read-only file system|Device or resource busy)|.*\[Errno (?:30|16)\] (?:Read-only file system|Device or resource busy): .*|.*E(?:ROFS|BUSY): .*)$/m;

/**
 * The path a refused write names, as tools print it: `bash: /p: Read-only file system`,
 * `touch: cannot touch '/p': Read-only file system`, `[Errno 30] Read-only file system: '/p'`,
 * `EROFS: read-only file system, open '/p'`, `could not write config file .git/config: Device or
 * resource busy`.
 */
function refusedPath(line: string): string | undefined {
  // ‘ and ’ (GNU coreutils' quotes in a UTF-8 locale) written as escapes: bundles stay ASCII.
  const quoted = /['\u2018"]([^'\u2019"]+)['\u2019"]/.exec(line);
  if (quoted) return quoted[1];
  const colon =
    /(?:^|\s)(\/[^\s:]+|\.{0,2}\/?[^\s:]+):\s*(?:Read-only file system|EROFS|Device or resource busy|EBUSY)/i.exec(
      line,
    );
  return colon?.[1];
}

/**
 * CMake's own wording of a refused write (no errno text): `file cannot create directory:
 * /usr/local/lib/cmake/x.  Maybe need administrative privileges.`, `file INSTALL cannot make
 * directory "/usr/local/include/x": …`.
 */
const CMAKE_REFUSAL =
  /file (?:cannot create directory:\s*(\/\S+?)\.?\s+Maybe\s+need\s+administrative\s+privileges|INSTALL cannot (?:make directory|copy file)[^"\n]*"(\/[^"]+)")/;

/**
 * A signal the sandbox kept from a process outside it: the command's pid namespace shows only
 * what it started, so `kill <pid>` of a host process fails with "No such process" (ESRCH). Said so
 * only when that pid is alive on the host (a pid that exists nowhere is a plain mistake).
 */
export function outsideSignal(result: ProcessResult, command = ''): SandboxRefusal | undefined {
  if (result.sandbox !== 'workspace-write' && result.sandbox !== 'read-only') return undefined;
  const text = `${result.stderr.head}\n${result.stderr.tail}`;
  const m =
    /kill: (?:\((\d+)\)(?: -|:) |(\d+): )No such process/.exec(text) ??
    /ProcessLookupError: \[Errno 3\] No such process[^\n]*?(\d+)?/.exec(text) ??
    /kill (?:ESRCH|EPERM)[^\n]*?(\d+)?/.exec(text);
  if (!m) return undefined;
  // A message without the pid (python's ProcessLookupError): the command's own numbers.
  const pid = Number(
    m[1] ??
      m[2] ??
      (command.match(/\b\d{2,7}\b/g) ?? []).find((n) => Number(n) > 1 && existsSync(`/proc/${n}`)),
  );
  if (!Number.isInteger(pid) || pid <= 1 || !existsSync(`/proc/${pid}`)) return undefined;
  return {
    path: String(pid),
    message: `Process ${pid} is outside the sandbox: a command in it sees and signals only the processes it started (its own pid namespace), so the signal never reached it. If the task really needs it, call again with sandbox: false and a justification; a human decides.`,
  };
}

/** A refused write of a git config: how to do what the command wanted without writing it. */
function gitConfigHint(path: string | undefined): string {
  if (!path || !/(^|\/)(config|config\.worktree|config\.lock)$/.test(path) || !path.includes('.git'))
    return '';
  return " A repository's git config is protected (it can make git run programs outside the sandbox): pass settings per command instead, e.g. git -c user.name=NAME -c user.email=EMAIL commit …, or GIT_AUTHOR_NAME / GIT_AUTHOR_EMAIL / GIT_COMMITTER_NAME / GIT_COMMITTER_EMAIL in env.";
}

/**
 * When the write the guard refused is the home's configuration (a workspace that is the home keeps
 * every top-level `.*` entry and `~/bin` read-only: @conch/sandbox's config homes), say so: the
 * generic "only the workspace is writable" reads as a contradiction there.
 */
function homeConfigHint(refused: string | undefined): string {
  if (!refused || !isConfigEntryPath(refused, realOr(homedir()))) return '';
  return ` The workspace holds the home directory, whose configuration (every ~/.* entry and ~/bin) stays read-only: the user's shells, editors, services and PATH run what is there later, outside the sandbox. Work in a project directory (mkdir -p ~/NAME), or, if the task really is the home's configuration, tell the user.`;
}

/**
 * A line of a command's error output that may be about a hidden secret: `Permission denied` (a
 * masked file), or `No such file or directory` (inside a masked directory, which is empty).
 */
const EACCES_LINE =
  /^.*(?:Permission denied|\[Errno 13\]|EACCES|No such file or directory|\[Errno 2\]|ENOENT).*$/gm;
const EACCES_WORDS = /Permission denied|\[Errno 13\]|EACCES|No such file or directory|\[Errno 2\]|ENOENT/;

/**
 * What to tell the model when a command met a secret the sandbox hides (`maskedPaths`: the
 * workspace's .env files, ~/.ssh, ~/.aws, …: unreadable and unwritable inside), or undefined.
 */
export function hiddenSecret(
  result: ProcessResult,
  masked: readonly string[] | undefined,
  cwd: string,
  view?: Pick<KernelPolicy, 'closedPaths' | 'readablePaths' | 'writableRoots' | 'substitutes'>,
): SandboxRefusal | undefined {
  if (result.sandbox !== 'workspace-write') return undefined;
  const closed = view?.closedPaths ?? [];
  if (!masked?.length && closed.length === 0) return undefined;
  const within = (p: string, dir: string) => p === dir || p.startsWith(`${dir}/`);
  const opened = [
    ...(view?.readablePaths ?? []),
    ...(view?.writableRoots ?? []),
    ...(view?.substitutes ?? []).map((s) => s.path),
  ];
  const text = `${result.stderr.head}\n${result.stderr.tail}\n${result.stdout.head}\n${result.stdout.tail}`;
  for (const line of text.match(EACCES_LINE) ?? []) {
    const named = refusedPath(line.replace(EACCES_WORDS, 'Read-only file system'));
    if (!named) continue;
    const abs = resolve(cwd, named);
    // A symlink to a hidden file is the hidden file, and a masked path is hidden under its real
    // name too (`.env -> config/prod.secret`).
    const names = new Set([abs, realOr(abs)]);
    const shut = closed.find(
      (c) =>
        within(abs, c) &&
        abs !== c &&
        !opened.some((o) => within(abs, o) || within(o, abs)) &&
        // Only what exists outside is hidden; a path missing everywhere is a plain mistake.
        safeLstatSync(abs, { throwIfNoEntry: false }) !== undefined,
    );
    if (shut)
      return {
        path: named,
        message: `${named} is outside what the sandbox shows: the home directory (and other homes) read as empty inside it but for what toolchains need, so other projects and credentials stay out of reach. Work inside the workspace; if the task really needs this path, tell the user: the host can add it to the permission config's readableRoots.`,
      };
    const hit = (masked ?? []).find((m) => {
      const hidden = [m, realOr(m)];
      return [...names].some((p) => hidden.some((h) => p === h || p.startsWith(`${h}/`)));
    });
    if (!hit) continue;
    return {
      path: named,
      message: `${named} is a secret the sandbox hides (.env files, ~/.ssh, cloud and registry credentials are neither readable nor writable inside it). Work without it; if the task really needs it, tell the user: the host can expose .env files (permission config secrets.exposeDotEnv) or run the command outside the sandbox.`,
    };
  }
  return undefined;
}

export interface SandboxRefusal {
  message: string;
  /** The path the output names, when it names one. */
  path?: string;
}

/**
 * What to tell the model when the sandbox refused a write (EROFS), whatever the exit status (a
 * write inside a substitution or a pipeline fails while the command exits 0), or undefined. Read
 * from the output: a command that silences its errors (`2>/dev/null`) is not seen.
 */
export function sandboxRefusal(result: ProcessResult): SandboxRefusal | undefined {
  if (result.sandbox === 'none') return undefined;
  // Error messages go to stderr; on stdout (`2>&1`) only a line shaped like one counts, so a
  // command that prints the words (`grep -r 'Read-only file system'`) is not taken for a refusal.
  const match =
    EROFS_LINE.exec(`${result.stderr.head}\n${result.stderr.tail}`) ??
    STDOUT_EROFS.exec(`${result.stdout.head}\n${result.stdout.tail}`);
  // The guard's own record of a refused write (exact, even when the command hid its error).
  const guarded = result.sandboxRefusals?.find((r) => r.errno === constants.errno.EROFS && r.op !== 'read');
  const cmake = CMAKE_REFUSAL.exec(`${result.stderr.head}\n${result.stderr.tail}\n${result.stdout.tail}`);
  if (!match && !guarded && !cmake) return undefined;
  // The path as the command's own output spells it (what the model wrote), else the guard's.
  const path =
    (match ? refusedPath(match[0]) : undefined) ??
    (cmake ? (cmake[1] ?? cmake[2]) : undefined) ??
    guarded?.path;
  const where = path ? ` (${path})` : '';
  if (result.sandbox === 'read-only')
    return {
      message: `The sandbox refused a write${where}: this command ran in a read-only sandbox (no writes, no network). If it must write, call again with sandbox: false and a justification; a human decides.`,
      ...(path ? { path } : {}),
    };
  if (result.sandbox === 'workspace-write')
    return {
      message: `The sandbox refused a write${where}: only the workspace is writable, and protected files in it (.git/hooks, .git/config, .env*, editor settings) are read-only.${gitConfigHint(path)}${homeConfigHint(guarded?.path)} Write inside the workspace, or, if the task really needs this path, call again with sandbox: false and a justification; a human decides.`,
      ...(path ? { path } : {}),
    };
  return {
    message: `The sandbox refused a write${where}: the path is protected (shell start-up files, .ssh, .git/hooks, .git/config, .env files and the host's protected paths are read-only for every command). Write somewhere else.`,
    ...(path ? { path } : {}),
  };
}

function realOr(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
