// Owns what counts as listing the environment, outside `env` and `printenv` (which the wrappers
// and the read-only grammars judge themselves): reading a process's `/proc/<pid>/environ` however
// the path is spelled, and words that may expand to nothing (so `printenv $x` may be `printenv`).
// The sandbox hides credentials from the environment; the parser treats every listing alike all
// the same: it asks, like `env`.
import { posix } from 'node:path';
import { resolveLikeKernel, shellGlob } from '../paths.js';
import { RUNTIME_ARGUMENTS, type Arg } from '../words.js';

const ENVIRON = /^\/proc\/[^/]+\/(?:task\/[^/]+\/)?environ$/;
/** Paths a pattern is tested against: would `cat /proc/*\/environ` or `/proc/$$/environ` reach one? */
const SAMPLES = [
  '/proc/self/environ',
  '/proc/thread-self/environ',
  '/proc/1/environ',
  '/proc/1/task/1/environ',
  '/proc/self/task/1/environ',
].map((p) => p.split('/').slice(1));

/** Whether a word read as a path names a process's environment (`/proc/<pid>/environ`). */
export function namesEnviron(arg: Arg, cwds: readonly string[] | undefined): boolean {
  const bases = cwds && cwds.length > 0 ? cwds : ['/'];
  const candidates: string[] = [];
  for (const field of arg.fields ?? []) {
    candidates.push(field);
    // An option's value written in the same word: `--file=/proc/self/environ`, `-f/proc/1/environ`.
    if (field.startsWith('-')) {
      const eq = field.indexOf('=');
      if (eq > 0) candidates.push(field.slice(eq + 1));
      const slash = field.indexOf('/');
      if (slash > 0) candidates.push(field.slice(slash));
    }
  }
  for (const field of candidates) {
    if (!field.includes('environ') && !/(^|\/)\.\.?(\/|$)|\/dev\/fd|^\/proc\//.test(field)) continue;
    for (const base of bases) {
      const lexical = stripRoots(posix.resolve(base, field));
      if (ENVIRON.test(lexical)) return true;
      let kernel: string;
      try {
        kernel = stripRoots(resolveLikeKernel(field, base, true));
      } catch {
        continue;
      }
      if (ENVIRON.test(kernel)) return true;
    }
  }
  if (arg.fields === undefined) {
    if (!/environ|\*|\?|\[/.test(arg.pattern.slice(arg.pattern.lastIndexOf('/') + 1))) return false;
    for (const base of bases) {
      const abs = arg.pattern.startsWith('/') ? arg.pattern : `${base.replace(/\/$/, '')}/${arg.pattern}`;
      const parts = stripRoots(posix.normalize(abs)).split('/').slice(1);
      if (SAMPLES.some((sample) => matches(parts, sample))) return true;
    }
  }
  return false;
}

/** A directory holding processes' environments: `/`, `/proc`, `/proc/<pid>`, `/proc/<pid>/task[/<tid>]`. */
const ENVIRON_TREE = /^\/(?:proc(?:\/[^/]+(?:\/task(?:\/[^/]+)?)?)?)?$/;

/**
 * Whether a directory a command reads recursively (`grep -r x DIR`, `rg x DIR`, `find DIR -exec
 * cat {} +`, `diff -r`) holds a process's environment: `/proc/self/`, `/proc/1`, `/proc`, `/`
 * (however spelled: `..`, symlinks, `/proc/self/root`). Reading every file under it lists the
 * environment like `cat /proc/self/environ`. A word only known at run time counts when its pattern
 * can be such a directory, each unknown part within one path component (as for `namesEnviron`); a
 * relative path from a working directory only known at run time does not.
 */
export function namesEnvironTree(arg: Arg, cwds: readonly string[] | undefined): boolean {
  const bases = cwds && cwds.length > 0 ? cwds : undefined;
  if (arg.fields === undefined) {
    if (!arg.pattern.startsWith('/') && !bases) return false;
    const abs = arg.pattern.startsWith('/') ? arg.pattern : `${bases![0]!.replace(/\/$/, '')}/${arg.pattern}`;
    const parts = stripRoots(posix.normalize(abs)).replace(/\/$/, '').split('/').slice(1);
    return ['/', '/proc', '/proc/1', '/proc/1/task', '/proc/1/task/1'].some((sample) =>
      matches(parts.filter(Boolean), sample.split('/').filter(Boolean)),
    );
  }
  for (const field of arg.fields) {
    if (!field.startsWith('/') && !bases) continue;
    for (const base of bases ?? ['/']) {
      if (ENVIRON_TREE.test(stripRoots(posix.resolve(base, field)))) return true;
      try {
        if (ENVIRON_TREE.test(stripRoots(resolveLikeKernel(field, base, true)))) return true;
      } catch {
        continue;
      }
    }
  }
  return false;
}

/** `/proc/<pid>/root/...` is the process's `/` (in one mount namespace, the same `/`). */
function stripRoots(path: string): string {
  let p = path;
  for (let i = 0; i < 16; i++) {
    const m = /^\/proc\/[^/]+\/root(\/.*)?$/.exec(p);
    if (!m) return p;
    p = m[1] || '/';
  }
  return p;
}

function matches(pattern: readonly string[], path: readonly string[]): boolean {
  if (pattern.length !== path.length) return false;
  return pattern.every((component, i) => {
    if (!/[*?[]/.test(component)) return component.replace(/\\(.)/g, '$1') === path[i];
    try {
      return shellGlob(component, true).test(path[i]!);
    } catch {
      return true;
    }
  });
}

/**
 * Whether a word may expand to no argument at all: an unquoted expansion that can be empty
 * (`printenv $x` is `printenv` when x is empty), or the arguments xargs appends (there may be
 * none: GNU xargs runs the command once on empty input).
 */
export function mayVanish(arg: Arg): boolean {
  if (arg.fields !== undefined) return arg.fields.length === 0;
  if (arg.raw === RUNTIME_ARGUMENTS) return true;
  let unquotedExpansion = false;
  for (const p of arg.word.parts) {
    if (p.kind === 'text' && (p.value !== '' || p.quoting !== 'none')) return false;
    if ((p.kind === 'param' || p.kind === 'command-sub') && !p.quoted) unquotedExpansion = true;
    else if (p.kind !== 'text') return false;
  }
  return unquotedExpansion;
}
