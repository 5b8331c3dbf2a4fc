// How often the permission gate would prompt a human on real agent commands.
//
//   node bench/agent-commands/measure.mjs                 table per `needs` class + top prompt rules
//   node bench/agent-commands/measure.mjs --json          the same numbers as JSON
//   node bench/agent-commands/measure.mjs --list network  each command of a class: outcome and rule
//                                         (--list all for every class; add --full for whole commands)
//
// Runs after `pnpm build` (it imports the built packages through bench/node_modules). It creates a
// throwaway HOME and a fixture workspace (fixture.mjs), builds a registry the way a host does,
// exposes the permission plugin with NO approver, and sends every corpus command through
// `registry.resolve(PERMISSION_GATE).check(...)` in-process (nothing is spawned per command).
//
// Outcomes: `allow`; `prompt` = a deny whose reason says the command needs approval (with an
// approver configured, a human would have been asked); `denied` = any other deny (a safety rule).
import 'reflect-metadata';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeFixtureWorkspace } from './fixture.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const CLASSES = ['read', 'workspace', 'network', 'outside'];

function usage(message) {
  if (message) console.error(message);
  console.error(
    'usage: node bench/agent-commands/measure.mjs [--json] [--list <read|workspace|network|outside|all>] [--full] [--corpus <file>]',
  );
  process.exit(2);
}

function parseArgs(argv) {
  const opts = {
    json: false,
    list: undefined,
    full: false,
    registries: false,
    corpus: join(here, 'commands.jsonl'),
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') opts.json = true;
    else if (a === '--full') opts.full = true;
    else if (a === '--registries') opts.registries = true;
    else if (a === '--list') {
      opts.list = argv[++i];
      if (!opts.list || (opts.list !== 'all' && !CLASSES.includes(opts.list)))
        usage(`--list takes one of ${CLASSES.join(', ')}, all`);
    } else if (a === '--corpus') {
      opts.corpus = argv[++i];
      if (!opts.corpus) usage('--corpus takes a file');
    } else if (a === '-h' || a === '--help') usage();
    else usage(`unknown argument ${a}`);
  }
  return opts;
}

function loadCorpus(file) {
  const entries = [];
  const lines = readFileSync(file, 'utf8').split('\n');
  lines.forEach((line, n) => {
    if (!line.trim()) return;
    let e;
    try {
      e = JSON.parse(line);
    } catch (error) {
      throw new Error(`${file}:${n + 1}: not JSON (${error.message})`);
    }
    if (typeof e.command !== 'string' || !CLASSES.includes(e.needs) || typeof e.source !== 'string')
      throw new Error(`${file}:${n + 1}: needs { command, needs: ${CLASSES.join('|')}, source }`);
    entries.push(e);
  });
  return entries;
}

function outcomeOf(decision) {
  if (decision.outcome === 'allow') return 'allow';
  if (decision.outcome === 'deny' && String(decision.reason).includes('needs approval')) return 'prompt';
  return 'denied';
}

/** One line per command for listings: newlines shown as ⏎, long commands cut unless --full. */
function oneLine(command, full) {
  if (full) return command;
  const flat = command.replace(/\n/g, '⏎');
  return flat.length > 160 ? `${flat.slice(0, 157)}…` : flat;
}

/**
 * Where a command connects, as far as its text says: URL hosts, `git@host:`, and the registries
 * package managers use (pip -> PyPI, npm/yarn/pnpm/npx -> npmjs, apt -> Debian). A python or node
 * script that downloads is `?` (unknown). localhost is the sandbox's own loopback: not a destination.
 */
function destinations(command) {
  const hosts = new Set();
  // Only commands that connect: a client, or code run at once. A heredoc written to a file, a sed
  // script or an echo that merely contain a URL connect to nothing.
  const connects =
    /^\s*(?:(?:timeout|env)\s+(?:-\S+\s+)*\S+\s+)?(?:curl|wget|git|python3?|node|pip3?|npm|npx|yarn|pnpm|apt(?:-get)?)\b/.test(
      command,
    ) && !/^\s*(?:cat|tee|echo|printf|sed)\b/.test(command);
  if (!connects) return [];
  for (const m of command.matchAll(/\b(?:https?|ftp):\/\/(?:[^@/\s'"]*@)?([^/\s:'"?#]+)/g))
    hosts.add(m[1].toLowerCase());
  for (const m of command.matchAll(/\bgit@([^:\s]+):/g)) hosts.add(m[1].toLowerCase());
  if (/\bpip3?\s+install\b|\bpython3?\s+-m\s+pip\s+install\b/.test(command) && !/--no-index/.test(command)) {
    hosts.add('pypi.org');
    hosts.add('files.pythonhosted.org');
  }
  if (/\b(?:npm\s+(?:install|i|ci|add)|yarn\s+add|pnpm\s+(?:add|install)|npx)\b/.test(command))
    hosts.add('registry.npmjs.org');
  if (/\bapt(?:-get)?\s+(?:update|install)\b/.test(command)) hosts.add('deb.debian.org');
  if (/\b(?:urllib\.request|requests\.get|whisper|nwis|fetch\()/.test(command) && hosts.size === 0)
    hosts.add('?');
  for (const local of ['localhost', '127.0.0.1', '0.0.0.0']) hosts.delete(local);
  return [...hosts];
}

const pct = (n, d) => (d ? (100 * n) / d : 0);
const fmt = (x) => x.toFixed(1);

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const corpus = loadCorpus(opts.corpus);

  // A throwaway HOME and workspace: `~` and the workspace root the gate reasons about are these.
  const base = mkdtempSync(join(tmpdir(), 'conch-agent-commands-'));
  const home = join(base, 'home');
  const workspace = join(base, 'workspace');
  mkdirSync(home, { recursive: true });
  makeFixtureWorkspace(workspace, { home });
  const previousHome = process.env.HOME;
  process.env.HOME = home;
  // Every deny is logged as a warning; keep the output to the numbers unless asked otherwise.
  process.env.CONCH_LOG_LEVEL ??= 'error';

  // Imported after HOME is set: the engine reads the home directory when it is created.
  const { PluginRegistry, PERMISSION_GATE } = await import('@conch/core');
  const { permissionPlugin } = await import('@conch/permission');

  const registry = new PluginRegistry({ cwd: workspace, plugins: [permissionPlugin] });
  const results = [];
  let elapsed = 0;
  try {
    // No approver: "ask" comes back as a deny saying so. --registries: conch-mcp's default
    // network allow-list (the package registries and code hosts).
    const { PACKAGE_REGISTRIES } = await import('@conch/permission');
    await registry.expose(
      'permission',
      opts.registries ? { network: { allow: [...PACKAGE_REGISTRIES] } } : {},
    );
    const gate = registry.resolve(PERMISSION_GATE);
    const started = performance.now();
    for (let i = 0; i < corpus.length; i++) {
      const e = corpus[i];
      const decision = await gate.check(
        { kind: 'command', tool: 'cli_based_tool', command: e.command, cwd: workspace },
        { callId: `agent-commands-${i}` },
      );
      // Destinations the sandbox's proxy would refuse (each a question for a human with an approver).
      const blockedHosts = [];
      for (const host of destinations(e.command)) {
        const net = host === '?' ? { outcome: 'deny' } : await gate.checkNetwork({ host, port: 443 });
        if (net.outcome !== 'allow') blockedHosts.push(host);
      }
      results.push({
        ...e,
        outcome: outcomeOf(decision),
        rule: decision.rule ?? '(none)',
        reason: decision.reason,
        blockedHosts,
      });
    }
    elapsed = performance.now() - started;
  } finally {
    await registry.dispose();
    if (previousHome === undefined) delete process.env.HOME;
    else process.env.HOME = previousHome;
    rmSync(base, { recursive: true, force: true });
  }

  const byClass = {};
  for (const c of [...CLASSES, 'total']) byClass[c] = { total: 0, allowed: 0, prompts: 0, denied: 0 };
  for (const r of results) {
    for (const c of [r.needs, 'total']) {
      const row = byClass[c];
      row.total++;
      if (r.outcome === 'allow') row.allowed++;
      else if (r.outcome === 'prompt') row.prompts++;
      else row.denied++;
    }
  }
  const promptRules = new Map();
  for (const r of results)
    if (r.outcome === 'prompt') promptRules.set(r.rule, (promptRules.get(r.rule) ?? 0) + 1);
  const topPromptRules = [...promptRules.entries()]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .slice(0, 15)
    .map(([rule, count]) => ({ rule, count }));
  const total = byClass.total;
  const summary = {
    corpus: relative(process.cwd(), opts.corpus) || opts.corpus,
    commands: total.total,
    promptsPer100: Number(fmt(pct(total.prompts, total.total))),
    allowedPer100: Number(fmt(pct(total.allowed, total.total))),
    deniedPer100: Number(fmt(pct(total.denied, total.total))),
    byClass: Object.fromEntries(
      Object.entries(byClass).map(([c, row]) => [
        c,
        { ...row, promptsPer100: Number(fmt(pct(row.prompts, row.total))) },
      ]),
    ),
    topPromptRules,
    // What a session meets beyond the gate: one escalation per command that writes outside the
    // workspace, and one network question per blocked destination per trajectory (a human
    // answering 'always' is not asked again for that host).
    outsideEscalations: byClass.outside.total,
    networkQuestions: new Set(results.flatMap((r) => r.blockedHosts.map((h) => `${r.source}\0${h}`))).size,
    effectivePromptsPer100: Number(
      fmt(
        pct(
          total.prompts +
            byClass.outside.total +
            new Set(results.flatMap((r) => r.blockedHosts.map((h) => `${r.source}\0${h}`))).size,
          total.total,
        ),
      ),
    ),
    networkAllowList: opts.registries ? 'package registries (conch-mcp default)' : 'none (library default)',
    msPerCommand: Number((elapsed / Math.max(1, corpus.length)).toFixed(3)),
  };

  if (opts.list) {
    const wanted = opts.list === 'all' ? CLASSES : [opts.list];
    const rows = results.filter((r) => wanted.includes(r.needs));
    if (opts.json) {
      console.log(
        JSON.stringify(
          rows.map(({ command, needs, source, outcome, rule, reason, blockedHosts }) => ({
            blockedHosts,
            command,
            needs,
            source,
            outcome,
            rule,
            reason,
          })),
          null,
          2,
        ),
      );
      return;
    }
    for (const r of rows)
      console.log(
        `${r.outcome.padEnd(6)}  ${r.needs.padEnd(9)}  ${r.rule.padEnd(28)}  ${oneLine(r.command, opts.full)}`,
      );
    console.log(`\n${rows.length} commands`);
    return;
  }

  if (opts.json) {
    console.log(JSON.stringify(summary, null, 2));
    return;
  }

  const header = ['needs', 'total', 'allowed', 'prompts', 'denied', 'prompts/100'];
  const table = [...CLASSES, 'total'].map((c) => {
    const row = byClass[c];
    return [c, row.total, row.allowed, row.prompts, row.denied, fmt(pct(row.prompts, row.total))];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => String(row[i]).length)));
  const line = (cells) =>
    cells
      .map((cell, i) => (i === 0 ? String(cell).padEnd(widths[i]) : String(cell).padStart(widths[i])))
      .join('  ');
  console.log(
    `Permission gate on ${total.total} real agent commands (no approver; fixture workspace, throwaway HOME)\n`,
  );
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of table) console.log(line(row));
  console.log(`\nprompts per 100 commands: ${fmt(pct(total.prompts, total.total))}`);
  console.log(
    `(allowed ${fmt(pct(total.allowed, total.total))}, denied by a safety rule ${fmt(pct(total.denied, total.total))}; ${summary.msPerCommand} ms per decision)`,
  );
  console.log('\nmost common rules among prompts:');
  for (const { rule, count } of topPromptRules) console.log(`  ${String(count).padStart(4)}  ${rule}`);
}

await main();
