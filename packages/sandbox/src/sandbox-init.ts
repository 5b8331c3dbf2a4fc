/**
 * The first program under the guard in a sandbox that runs one command (Sandbox.run, conch-sandbox)
 * and has the network: it opens the bridge to the host's proxy on 127.0.0.1 (as a supervisor
 * does), then runs the command with this process's stdio, passes on the signals it gets, and ends
 * as the command ended (its code, or its signal).
 *
 * `node sandbox-init.js --bridge <socket> <port> [--forward <port,port...>] -- <file> [args...]`
 *
 * `--forward`: the host's loopback services the allow-list names (`localhost:5432`), each reached
 * at its own 127.0.0.1 / ::1 port inside (bridge.ts `startLoopbackForwards`).
 */
import { spawn } from 'node:child_process';
import { startBridge, startLoopbackForwards } from './bridge.js';

const argv = process.argv.slice(2);
const split = argv.indexOf('--');
const options = split < 0 ? argv : argv.slice(0, split);
const [file, ...args] = split < 0 ? [] : argv.slice(split + 1);
if (!file) {
  process.stderr.write(
    'usage: sandbox-init.js [--bridge <socket> <port> [--forward <port,port...>]] -- <file> [args...]\n',
  );
  process.exit(2);
}
const bridge = options[0] === '--bridge' ? { socket: options[1]!, port: Number(options[2]) } : undefined;
const forwarded = options[3] === '--forward' ? (options[4] ?? '').split(',').filter(Boolean).map(Number) : [];
if (bridge) {
  try {
    (await startBridge(bridge.socket, bridge.port)).unref();
  } catch (error) {
    process.stderr.write(`conch-sandbox: the network bridge could not start: ${(error as Error).message}\n`);
  }
  try {
    for (const server of await startLoopbackForwards(bridge.socket, forwarded)) server.unref();
  } catch (error) {
    process.stderr.write(
      `conch-sandbox: the host's loopback ports (${forwarded.join(', ')}) could not be forwarded: ${(error as Error).message}\n`,
    );
  }
}
const child = spawn(file, args, { stdio: 'inherit' });
const forward = (signal: NodeJS.Signals) => () => child.kill(signal);
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, forward(signal));
child.on('error', (error) => {
  process.stderr.write(`conch-sandbox: ${file}: ${error.message}\n`);
  process.exit((error as NodeJS.ErrnoException).code === 'ENOENT' ? 127 : 126);
});
child.on('exit', (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
