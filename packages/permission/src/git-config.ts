import { readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { GIT_EXEC_KEYS } from './commands/git.js';

/**
 * Whether the repository a git read would run in has a config that makes git run programs. `git
 * status` runs `core.fsmonitor`, `git diff` and `git log -p` run textconv and external diff drivers,
 * filters run on status; a hostile `.git/config` turns an allowed read into code execution. The
 * user's own global and system configs are trusted; the repository's (`.git/config`,
 * `config.worktree`, the common dir's config of a worktree) are read. Includes are not followed:
 * an include is itself a reason to ask.
 */
export function gitConfigRisk(startDir: string): string | undefined {
  const gitDir = findGitDir(startDir);
  if (!gitDir) return undefined;
  const dirs = [gitDir];
  const commondir = join(gitDir, 'commondir');
  if (statSync(commondir, { throwIfNoEntry: false })?.isFile()) {
    const common = readFileSync(commondir, 'utf8').trim();
    if (common) dirs.push(resolve(gitDir, common));
  }
  for (const dir of dirs) {
    for (const name of ['config', 'config.worktree']) {
      const risk = fileRisk(join(dir, name));
      if (risk) return risk;
    }
    // git status may rewrite the index, which runs this hook.
    const hook = join(dir, 'hooks', 'post-index-change');
    const st = statSync(hook, { throwIfNoEntry: false });
    if (st && st.mode & 0o111) return `${hook} is a hook git runs when a read refreshes the index`;
  }
  return undefined;
}

function findGitDir(start: string): string | undefined {
  let dir = resolve(start);
  for (let i = 0; i < 256; i++) {
    const candidate = join(dir, '.git');
    // No exceptions on the common path: this runs for every git read.
    const st = statSync(candidate, { throwIfNoEntry: false });
    if (st?.isDirectory()) return candidate;
    if (st?.isFile()) {
      const m = /^gitdir:\s*(.+)$/m.exec(readFileSync(candidate, 'utf8'));
      if (m) return isAbsolute(m[1]!.trim()) ? m[1]!.trim() : resolve(dir, m[1]!.trim());
    }
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
  return undefined;
}

const cache = new Map<string, { mtimeMs: number; size: number; risk: string | undefined }>();

function fileRisk(path: string): string | undefined {
  const st = statSync(path, { throwIfNoEntry: false });
  if (!st) return undefined;
  const hit = cache.get(path);
  if (hit && hit.mtimeMs === st.mtimeMs && hit.size === st.size) return hit.risk;
  let risk: string | undefined;
  try {
    risk = configRisk(readFileSync(path, 'utf8'), path);
  } catch {
    risk = `the repository config ${path} cannot be read`;
  }
  if (cache.size > 512) cache.clear();
  cache.set(path, { mtimeMs: st.mtimeMs, size: st.size, risk });
  return risk;
}

/** The first key of a git config text that makes git run a program, as a reason; undefined if none. */
export function configRisk(text: string, path = 'the repository config'): string | undefined {
  let section = '';
  for (const rawLine of text.split(/\r?\n/)) {
    const line = rawLine.replace(/^\s+/, '');
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]\s*(.*)$/.exec(line);
    if (header) {
      section = header[2] !== undefined ? `${header[1]}.${header[2]}` : header[1]!;
      const rest = header[3]!.trim();
      if (rest && !rest.startsWith('#') && !rest.startsWith(';')) {
        const risk = keyRisk(section, rest, path);
        if (risk) return risk;
      }
      continue;
    }
    if (line.startsWith('['))
      return `${path} has a section header the gate cannot read (${line.slice(0, 60)})`;
    const risk = keyRisk(section, line, path);
    if (risk) return risk;
  }
  return undefined;
}

function keyRisk(section: string, line: string, path: string): string | undefined {
  const m = /^([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*))?$/.exec(line);
  if (!m) return undefined;
  // Section and key names are case-insensitive; subsections keep their case but match any.
  const key = `${section.replace(/^([^.]+)/, (s) => s.toLowerCase())}.${m[1]!.toLowerCase()}`;
  const value = (m[2] ?? 'true').trim().replace(/^"(.*)"$/, '$1');
  if (/^core\.fsmonitor$/i.test(key) && /^(false|no|off|0|)$/i.test(value)) return undefined;
  if (/^log\.showsignature$/i.test(key) && /^(false|no|off|0)$/i.test(value)) return undefined;
  // git never lets an alias shadow a built-in command, and only built-in reads are allowed.
  if (/^alias\./i.test(key)) return undefined;
  if (/^include(if\..+)?\.path$/i.test(key))
    return `${path} includes another config (${key}), which the gate does not read`;
  if (GIT_EXEC_KEYS.test(key)) return `${path} sets ${key}, which makes git run a program`;
  return undefined;
}
