// The README's Quick start type-checks as printed under `tsc --strict` (module nodenext), against
// the built packages' declarations: a host that pastes it into a strict project gets no error.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

const docsDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const readme = readFileSync(join(docsDir, '..', 'README.md'), 'utf8');

test('the Quick start type-checks under tsc --strict', () => {
  const section = readme.slice(readme.indexOf('## Quick start (host API)'));
  const block = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  expect(block).toContain('new PluginRegistry');
  // Under docs/ so that `@conch/*` resolve from docs/node_modules.
  const dir = mkdtempSync(join(docsDir, '.quick-start-'));
  try {
    writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
    writeFileSync(join(dir, 'quick-start.ts'), block!);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          noEmit: true,
          skipLibCheck: true,
          types: ['node'],
        },
        files: ['quick-start.ts'],
      }),
    );
    const tsc = createRequire(join(docsDir, 'package.json')).resolve('typescript/bin/tsc');
    const r = spawnSync(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { encoding: 'utf8' });
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
