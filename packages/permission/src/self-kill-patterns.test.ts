// Invariant: a kill is judged by what it can select — a pattern that can match conch's command lines (the workspace, the supervisor script, node, conch), an inverse or user-wide selection, $PPID/$$/0/-1, pids listed by pgrep/pidof/ps and fed to kill — whether or not such a process runs now, in every signal spelling; a kill that cannot reach conch is judged like any command.
import 'reflect-metadata';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry, TOKENS, type ToolResult } from '@conch/core';
import { findCookiePids, pidAlive, type ProcessManager } from '@conch/process';
import { loadShellParser, type ShellParser } from '@conch/shell-syntax';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { permissionConfigSchema } from './config.js';
import { PermissionEngine } from './gate.js';
import { permissionPlugin } from './plugin.js';

let parser: ShellParser;
let ws: string;
beforeAll(async () => {
  parser = await loadShellParser();
  ws = realpathSync(mkdtempSync(join(tmpdir(), 'conch-selfkill-ws-')));
});
afterAll(() => rmSync(ws, { recursive: true, force: true }));

/** A gate with no supervisor running: the rule must reason about what could match. */
const evaluate = (command: string) =>
  new PermissionEngine({
    parser,
    config: permissionConfigSchema.parse({ sandbox: 'off' }),
    cwd: ws,
    supervisorPids: () => [],
  }).evaluate(command);

const me = userInfo();
const other = me.username === 'nobody' ? 'root' : 'nobody';

describe('safety:selfKill by what a kill can select', () => {
  it.each([
    // patterns that can match conch's command lines, whether or not such a process runs now
    () => `pkill -f ${ws}`,
    () => `pkill -f '${ws.slice(0, -3)}'`,
    () => 'pkill -f supervisor-main',
    () => 'pkill -f supervisor',
    () => 'pkill -f conch',
    () => 'pkill -f CONCH -i',
    () => "pkill -f 'c.nch'",
    () => "pkill -f 'c[o]nch-mcp --stdio'",
    () => 'pkill conch',
    () => 'pkill bwrap',
    () => 'pkill -f .',
    () => "pkill -f '^.*$'",
    () => 'pkill -f "$PATTERN"',
    () => 'killall node',
    () => "killall -r 'no.e'",
    () => 'killall -I NODE',
    () => '/bin/kill node',
    // signal spellings
    () => 'pkill -STOP node',
    () => 'pkill -stop -f supervisor-main',
    () => 'pkill -SIGKILL -f conch',
    () => 'pkill -9 -f conch',
    () => 'pkill --signal=KILL node',
    () => 'pkill --signal HUP -f conch',
    () => 'killall -s KILL node',
    () => 'killall -KILL node',
    () => 'killall -SIGSTOP node',
    () => 'timeout 5 pkill -CONT -f conch',
    // selections that include conch
    () => 'pkill -v some-other-program',
    () => 'pkill --inverse some-other-program',
    () => `pkill -u ${me.username}`,
    () => `pkill -U ${me.uid}`,
    () => 'pkill -u "$USER"',
    () => `killall -u ${me.username}`,
    () => 'pkill -P $PPID',
    () => `pkill -P ${process.pid}`,
    () => 'pkill -g 0',
    () => 'pkill -s 0',
    () => 'pkill --some-unknown-option x',
    // pids conch owns
    () => 'kill $PPID',
    () => 'kill -STOP "$PPID"',
    () => 'kill -9 ${PPID}',
    () => 'kill $$',
    () => 'kill -s KILL $BASHPID',
    () => 'kill 0',
    () => 'kill -9 0',
    () => 'kill -KILL -- -1',
    () => `kill -sSTOP ${process.pid}`,
    () => `kill -n 9 ${process.pid}`,
    // pids listed, then killed
    () => 'pgrep node | xargs kill',
    () => 'pgrep -f conch | xargs -r kill -9',
    () => `pgrep -f ${ws} | xargs -I{} kill {}`,
    () => 'kill $(pgrep -f supervisor-main)',
    () => 'kill -9 `pidof node`',
    () => 'pidof node | xargs kill',
    () => "ps aux | grep node | awk '{print $2}' | xargs kill",
    () => "ps -eo pid,args | grep -v grep | grep supervisor | awk '{print $1}' | xargs kill -9",
    () => 'for p in $(pgrep node); do kill $p; done',
    () => 'pgrep node | while read p; do kill -9 "$p"; done',
    () => "pgrep node | sed 's/^/kill /' | sh",
    () => 'kill $(ps -o ppid= -p $$)',
    () => 'p=$PPID; kill $p',
    () => 'echo $PPID > p; pkill -F p',
    () => "bash -c 'pgrep -f conch | xargs kill'",
  ])('denies %s', (make) => {
    const command = make();
    const a = evaluate(command);
    expect({ verdict: a.verdict, rule: a.decisive.rule }, `${command}: ${a.decisive.reason}`).toEqual({
      verdict: 'deny',
      rule: 'safety:selfKill',
    });
    expect(a.decisive.reason).toMatch(/conch itself/);
  });

  it.each([
    'pkill -f my-dev-server-xyz',
    "pkill -f 'python manage.py runserver'",
    `pkill -u ${other} postgres`,
    `pkill -u ${other}`,
    'pkill -x nodex',
    'killall some-other-program',
    'kill 4194301',
    'kill %1',
    'kill -0 $PPID',
    'pkill -0 -f conch',
    'kill -l',
    'sleep 5 & kill $!',
    "ps aux | grep python-decoy | awk '{print $2}' | xargs kill",
    'lsof -ti:3000 | xargs kill',
    'kill $(cat server.pid)',
  ])('judges %s like any command', (command) => {
    const a = evaluate(command);
    expect(a.verdict, `${command}: ${a.decisive.rule} ${a.decisive.reason}`).not.toBe('deny');
  });

  it.each(['pgrep -f conch', 'pgrep node', 'pidof node', 'ps aux | grep conch'])(
    'lets %s list',
    (command) => {
      expect(evaluate(command).verdict).not.toBe('deny');
    },
  );
});

describe('through cli_based_tool: a decoy whose command line names the workspace survives', () => {
  const registries: PluginRegistry[] = [];
  const decoys: ChildProcess[] = [];
  let dir: string;
  afterEach(async () => {
    for (const registry of registries.splice(0)) {
      const prefix = registry.resolveOptional<ProcessManager>(TOKENS.ProcessManager)?.cookiePrefix;
      await registry.dispose();
      if (prefix) expect(findCookiePids({ prefix }).filter((pid) => pidAlive(pid))).toEqual([]);
    }
    for (const d of decoys.splice(0)) if (d.exitCode === null && d.signalCode === null) d.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  /** A process standing in for a conch supervisor of this workspace (its command line names it). */
  const decoy = (marker: string) => {
    const child = spawn(
      process.execPath,
      ['-e', 'setInterval(() => {}, 1000)', `${marker}/supervisor-main.js`],
      {
        detached: true,
        stdio: 'ignore',
      },
    );
    decoys.push(child);
    return child;
  };
  const state = (pid: number) => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  };

  it.each([
    (d: string) => `pkill -f ${d}`,
    (d: string) => `pkill -STOP -f ${d}`,
    (d: string) => `pkill -f '${d}/supervisor'`,
    (d: string) => `pgrep -f ${d} | xargs kill`,
    (d: string) => `kill -9 $(pgrep -f ${d})`,
    (d: string) => `pgrep -f ${d} | while read p; do kill -STOP $p; done`,
  ])('%s is refused as the registry’s first command; pkill itself would have killed it', async (make) => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'conch-selfkill-e2e-')));
    const child = decoy(dir);
    await new Promise((r) => setTimeout(r, 200));
    const registry = new PluginRegistry({
      cwd: dir,
      plugins: [permissionPlugin, cliPlugin, backgroundPlugin],
    });
    registries.push(registry);
    // acceptAll: without the rule these would run.
    registry.exposeSync('permission', { sandbox: 'off', mode: 'acceptAll' });
    registry.exposeSync('cli', {});
    const command = make(dir);
    const result = (await registry.execute('cli_based_tool', { command })) as ToolResult &
      Record<string, any>;
    expect(result).toMatchObject({ permission_denied: true, rule: 'safety:selfKill' });
    await new Promise((r) => setTimeout(r, 100));
    expect(pidAlive(child.pid!)).toBe(true);
    expect(state(child.pid!)).not.toBe('T');
    // The real pkill selects it (run without a shell, so nothing else names the marker).
    execFileSync('pkill', ['-KILL', '-f', `${dir}/supervisor-main`]);
    await new Promise<void>((r) =>
      child.exitCode !== null || child.signalCode ? r() : child.once('exit', () => r()),
    );
    expect(child.signalCode).toBe('SIGKILL');
  });
});
