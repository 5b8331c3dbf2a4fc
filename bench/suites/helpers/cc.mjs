// Builds a bench C helper (bench/suites/helpers/<name>.c) with the system compiler (`cc`, else
// `gcc`), once: the binary is cached under os.tmpdir()/conch-bench-cc/, keyed by the source and
// the compiler's version, so a changed source or compiler rebuilds it. Returns { path } or, when
// there is no compiler or the build fails, { reason } for the suite's skip row.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

function compilerVersion(cc) {
  try {
    return execFileSync(cc, ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
  } catch {
    return undefined;
  }
}

export function buildCHelper(name) {
  const source = join(here, `${name}.c`);
  const cc = ['cc', 'gcc'].find((c) => compilerVersion(c) !== undefined);
  if (!cc) return { reason: 'no C compiler (cc or gcc) on PATH' };
  const key = createHash('sha256')
    .update(readFileSync(source))
    .update(compilerVersion(cc))
    .update(process.arch)
    .digest('hex')
    .slice(0, 16);
  const dir = join(tmpdir(), 'conch-bench-cc', key);
  const path = join(dir, name);
  if (existsSync(path)) return { path, cc };
  mkdirSync(dir, { recursive: true });
  // Built under a unique name and renamed into place, so concurrent runs never see half a binary.
  const partial = `${path}.${process.pid}.tmp`;
  try {
    execFileSync(cc, ['-O2', '-o', partial, source], { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const detail = (error.stderr?.toString() || error.message).trim().split('\n')[0];
    return { reason: `${cc} could not build ${name}.c: ${detail}` };
  }
  renameSync(partial, path);
  return { path, cc };
}
