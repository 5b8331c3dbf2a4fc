// Invariant: no command may kill conch itself — the host or its supervisors — by pid, process group, every-process, name or full-command-line pattern; killing anything else is judged like any command.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadShellParser } from '@conch/shell-syntax';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { permissionConfigSchema } from './config.js';
import { PermissionEngine } from './gate.js';

let supervisor: ChildProcess;
let engine: PermissionEngine;
const hostName = readFileSync('/proc/self/comm', 'utf8').trim();

beforeAll(async () => {
  // A process standing in for a supervisor: its pid and command line are what the rule protects.
  supervisor = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)', 'conch-supervisor-standin'], {
    detached: true,
    stdio: 'ignore',
  });
  const parser = await loadShellParser();
  engine = new PermissionEngine({
    parser,
    config: permissionConfigSchema.parse({}),
    cwd: process.cwd(),
    supervisorPids: () => [supervisor.pid!],
  });
});
afterAll(() => {
  supervisor.kill('SIGKILL');
});

const verdict = (command: string) => engine.evaluate(command);

describe('safety:selfKill', () => {
  it.each([
    () => `kill ${process.pid}`,
    () => `kill -9 ${process.pid}`,
    () => `kill -s KILL ${supervisor.pid}`,
    () => `kill -TERM -- ${supervisor.pid}`,
    () => `kill -9 -${readFileSync('/proc/self/stat', 'latin1').split(') ')[1]!.split(' ')[2]}`,
    () => 'kill -9 -1',
    () => 'kill -- -1',
    () => `timeout 5 kill ${supervisor.pid}`,
    () => `echo x && kill -HUP ${process.pid}`,
    () => `pkill ${hostName}`,
    () => `killall ${hostName}`,
    () => 'pkill -f conch-supervisor-standin',
    () => 'pkill -9 -f "supervisor-stand"',
    () => `bash -c 'kill ${process.pid}'`,
  ])('denies %s', (make) => {
    const command = make();
    const a = verdict(command);
    expect({ verdict: a.verdict, rule: a.decisive.rule }, `${command}: ${a.decisive.reason}`).toEqual({
      verdict: 'deny',
      rule: 'safety:selfKill',
    });
    expect(a.decisive.reason).toMatch(/conch itself/);
  });

  it.each([
    'kill 4194301',
    'kill -9 %1',
    'pkill -f some-other-program',
    'killall some-other-program',
    `pkill -x ${hostName}x`,
    'kill -l',
  ])('judges %s like any command (asks)', (command) => {
    const a = verdict(command);
    expect(a.verdict, `${command}: ${a.decisive.rule} ${a.decisive.reason}`).toBe('ask');
  });

  it('can be turned off', async () => {
    const parser = await loadShellParser();
    const off = new PermissionEngine({
      parser,
      config: permissionConfigSchema.parse({
        safety: {
          privilegeEscalation: true,
          downloadToInterpreter: true,
          protectedPaths: true,
          recursiveDeleteRoot: true,
          sourceDownloaded: true,
          forkBomb: true,
          selfKill: false,
        },
      }),
      cwd: process.cwd(),
    });
    expect(off.evaluate(`kill ${process.pid}`).verdict).toBe('ask');
  });
});
