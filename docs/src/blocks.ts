// Finds every fenced code block of the repository's documentation, with the directive that tells
// the test how to run it. Hand-written rather than a markdown library: the only syntax that matters
// is a fence line (``` + language) and the HTML comment just above it.
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * How a block is checked, from `<!-- docs-check: … -->` on the line above its fence:
 * - `run` (the default for ts/js): run as a module against the built packages; `with a, b` names
 *   the preludes a fragment relies on (a registry it continues, the host's `approve` …);
 * - `static: <why>`: transpiled and its imports resolved, not run (it needs a machine the test does
 *   not have, e.g. a container named `dev`); the reason is required;
 * - `reference`: a signature listing, not a program: the names it imports must exist.
 */
export interface Directive {
  mode: 'run' | 'static' | 'reference';
  with: string[];
  reason?: string;
}

export interface Block {
  /** Repository-relative path of the markdown file. */
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  code: string;
  directive: Directive;
}

const DIRECTIVE = /<!--\s*docs-check:\s*(.*?)\s*-->/;

export function parseDirective(text: string | undefined, where: string): Directive {
  if (text === undefined) return { mode: 'run', with: [] };
  const staticMatch = /^static:\s*(.+)$/.exec(text);
  if (staticMatch) return { mode: 'static', with: [], reason: staticMatch[1] };
  if (text === 'reference') return { mode: 'reference', with: [] };
  const runMatch = /^(?:run\s*)?(?:with\s+(.+))?$/.exec(text);
  if (runMatch) {
    const names = (runMatch[1] ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    return { mode: 'run', with: names };
  }
  throw new Error(
    `${where}: docs-check directive ${JSON.stringify(text)}: expected 'run', 'with a, b', 'static: <reason>' or 'reference'`,
  );
}

export function blocksOf(file: string, text: string): Block[] {
  const lines = text.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^\s*```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]!); i++) body.push(lines[i]!);
    let above: string | undefined;
    for (let j = start - 1; j >= 0; j--) {
      if (lines[j]!.trim() === '') continue;
      above = DIRECTIVE.exec(lines[j]!)?.[1];
      break;
    }
    blocks.push({
      file,
      line: start + 1,
      lang: open[1]!,
      code: body.join('\n'),
      directive: parseDirective(above, `${file}:${start + 1}`),
    });
  }
  return blocks;
}

/** The documentation a user reads: the root README, each package's, the apps', the guides, the examples'. */
export function documentationFiles(root: string): string[] {
  const files = ['README.md'];
  for (const dir of ['packages', 'apps', 'examples']) {
    for (const name of readdirSync(join(root, dir)).sort()) {
      const readme = join(root, dir, name, 'README.md');
      if (existsSync(readme)) files.push(relative(root, readme));
    }
  }
  for (const name of readdirSync(join(root, 'docs')).sort())
    if (name.endsWith('.md') && name !== 'README.md') files.push(join('docs', name));
  return files;
}

export function allBlocks(root: string): Block[] {
  return documentationFiles(root).flatMap((file) => blocksOf(file, readFileSync(join(root, file), 'utf8')));
}
