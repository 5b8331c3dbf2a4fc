// pnpm bench: runs every suite in bench/suites (or those named on the command line), prints one
// table with ratios against raw node primitives measured in the same run, and writes
// bench/results/latest.json as [{ name, conch, baseline, unit, ratio, goal, pass }].
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { clearStaleStat } from '@conch/core';
import { median, percentile, time } from './lib.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const only = process.argv.slice(2);
const suites = readdirSync(join(here, 'suites'))
  .filter((f) => f.endsWith('.mjs'))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort();

const rows = [];
for (const file of suites) {
  // A suite that stat'ed a socket last (a raw Chromium's tree removed) must not make node 20/22
  // resolve the next suite's pnpm-linked packages from the wrong path (nodejs/node#51142).
  clearStaleStat();
  const mod = await import(pathToFileURL(join(here, 'suites', file)).href);
  process.stderr.write(`bench: ${file} ...\n`);
  try {
    const produced = await mod.default({ median, percentile, time });
    for (const row of produced) rows.push({ suite: file.replace(/\.mjs$/, ''), ...row });
  } catch (error) {
    rows.push({
      suite: file,
      name: `${file} FAILED: ${error?.message ?? error}`,
      conch: NaN,
      baseline: NaN,
      unit: '',
      ratio: NaN,
    });
  }
}

const fmt = (n) =>
  typeof n !== 'number' || Number.isNaN(n)
    ? '-'
    : Math.abs(n) >= 100
      ? n.toFixed(0)
      : Math.abs(n) >= 1
        ? n.toFixed(2)
        : n.toFixed(4);
const table = [['benchmark', 'conch', 'baseline', 'unit', 'ratio', 'goal', 'ok']];
for (const r of rows)
  table.push([
    r.name,
    fmt(r.conch),
    fmt(r.baseline),
    r.unit,
    fmt(r.ratio),
    r.goal ?? '',
    r.pass === undefined ? '' : r.pass ? 'yes' : 'NO',
  ]);
const widths = table[0].map((_, i) => Math.max(...table.map((row) => String(row[i]).length)));
for (const [i, row] of table.entries()) {
  console.log(row.map((cell, j) => String(cell).padEnd(widths[j])).join('  '));
  if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('  '));
}
mkdirSync(join(here, 'results'), { recursive: true });
writeFileSync(
  join(here, 'results', 'latest.json'),
  JSON.stringify(
    rows.map(({ name, conch, baseline, unit, ratio, goal, pass }) => ({
      name,
      conch,
      baseline,
      unit,
      ratio,
      goal,
      pass,
    })),
    null,
    2,
  ) + '\n',
);
console.log(
  `\nwrote bench/results/latest.json (${rows.length} rows, node ${process.version}, ${new Date().toISOString()})`,
);
