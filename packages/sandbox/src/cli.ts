#!/usr/bin/env node
/**
 * conch-sandbox: runs one command in conch's sandbox, the way conch-mcp runs a model's command by
 * default (workspace-write, the package registries reachable through the proxy, credentials
 * hidden, the path guard where it works), and says afterwards what the sandbox refused and what
 * the command left that the user's own tools would run later. Its exit status is the command's.
 */
import { constants } from 'node:os';
import { PACKAGE_REGISTRIES } from './host-patterns.js';
import { Sandbox, SandboxUnavailableError, type SandboxOptions } from './sandbox.js';

const USAGE = `usage: conch-sandbox [options] -- <command> [args...]
       conch-sandbox [options] -c '<shell script>'
       conch-sandbox --status

Runs one command in conch's sandbox, as conch-mcp runs a model's commands by default.

options:
  -w, --workspace <dir>   the writable workspace (default: the current directory)
  --writable <dir>        another writable directory (repeatable)
  --allow <host>          a destination reachable through the proxy (repeatable; default: the
                          package registries conch-mcp allows)
  --no-network            no destination at all
  --read-only             nothing writable
  --expose-dotenv         let the workspace's .env files be read
  --no-guard              bubblewrap's mounts alone (no path guard)
  -c <script>             run the script with bash -c
  --status                say whether bubblewrap and the guard work here, and exit
  -h, --help              this text
`;

function fail(message: string): never {
  process.stderr.write(`conch-sandbox: ${message}\n${USAGE}`);
  process.exit(2);
}

const argv = process.argv.slice(2);
const options: SandboxOptions = {};
const writable: string[] = [];
const allow: string[] = [];
let network = true;
let script: string | undefined;
let status = false;
let command: string[] = [];
for (let i = 0; i < argv.length; i++) {
  const arg = argv[i]!;
  const value = () => {
    const next = argv[++i];
    if (next === undefined) fail(`${arg} needs a value`);
    return next;
  };
  if (arg === '--') {
    command = argv.slice(i + 1);
    break;
  }
  if (arg === '-w' || arg === '--workspace') options.workspace = value();
  else if (arg === '--writable') writable.push(value());
  else if (arg === '--allow') allow.push(value());
  else if (arg === '--no-network') network = false;
  else if (arg === '--read-only') options.mode = 'read-only';
  else if (arg === '--expose-dotenv') options.secrets = { exposeDotEnv: true };
  else if (arg === '--no-guard') options.guard = false;
  else if (arg === '-c') script = value();
  else if (arg === '--status') status = true;
  else if (arg === '-h' || arg === '--help') {
    process.stdout.write(USAGE);
    process.exit(0);
  } else fail(`unknown option ${arg}`);
}
if (writable.length) options.writableRoots = writable;
if (network) options.network = { allow: allow.length ? allow : PACKAGE_REGISTRIES };

const sandbox = new Sandbox(options);
if (status) {
  const s = await sandbox.status();
  process.stdout.write(
    `${JSON.stringify({ workspace: sandbox.workspace, bubblewrap: s.bubblewrap, guard: s.guard }, null, 2)}\n`,
  );
  sandbox.dispose();
  process.exit(s.bubblewrap.available ? 0 : 1);
}
if (script !== undefined) command = ['bash', '-c', script];
if (command.length === 0) fail('no command given');

let exit = 1;
try {
  const result = await sandbox.run(command[0]!, command.slice(1), { stdio: 'inherit' });
  for (const r of result.refusals)
    process.stderr.write(`conch-sandbox: refused ${r.op} of ${r.path} (errno ${r.errno})\n`);
  for (const b of result.blocked)
    process.stderr.write(`conch-sandbox: blocked ${b.host}:${b.port} (${b.reason})\n`);
  for (const p of result.plants)
    process.stderr.write(`conch-sandbox: left ${p.kind} at ${p.path}: ${p.detail}\n`);
  exit = result.exitCode ?? (result.signal ? 128 + (signalNumber(result.signal) ?? 0) : 1);
} catch (error) {
  process.stderr.write(
    `conch-sandbox: ${error instanceof SandboxUnavailableError ? error.message : (error as Error).stack}\n`,
  );
  exit = error instanceof SandboxUnavailableError ? 125 : 1;
} finally {
  sandbox.dispose();
}
process.exit(exit);

function signalNumber(name: string): number | undefined {
  return (constants.signals as Record<string, number>)[name];
}
