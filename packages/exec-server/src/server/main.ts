/**
 * The server's entry: `main()` serves one connection on this process's stdin/stdout. The bundle
 * (dist/server-bundle/exec-server.js) exports it for the boot script; the `conch-exec-server` bin
 * calls it for a server installed by hand.
 */
import { destination, pino } from 'pino';
import { ExecServer } from './exec-server.js';

export interface MainOptions {
  /** The content hash of the bundle being run (null: not a deployed bundle). */
  bundle?: string | null;
  /** The node-pty entry terminal sessions load (default: the bundled one). */
  ptyModule?: string;
}

export function main(options: MainOptions = {}): ExecServer {
  // stdout carries the protocol. Anything a dependency prints with console.log would corrupt it,
  // so console output goes to stderr with the log.
  const toStderr = (...args: unknown[]) => void process.stderr.write(`${args.map(String).join(' ')}\n`);
  // eslint-disable-next-line no-console
  console.log = console.info = console.debug = toStderr;
  // bash sources ~/.bashrc for a non-interactive `bash -c` when SSH_CLIENT (or SSH2_CLIENT) is set
  // and it looks like sshd's child (Debian builds): every command would then run the user's
  // interactive start-up (slow, noisy, and failing in a read-only sandbox). The server started by
  // ssh is not that child: its commands get what a local run gets. SSH_CONNECTION stays, for
  // programs that want to know the session is remote.
  delete process.env.SSH_CLIENT;
  delete process.env.SSH2_CLIENT;
  const stderr = destination({ fd: 2, sync: true });
  // A detached server outlives the transport that gave it its stderr: a write to that closed pipe
  // (EPIPE) loses the log line, never the server and the work it keeps.
  stderr.on('error', () => {});
  const logger = pino({ name: 'conch-exec-server', level: process.env.CONCH_LOG_LEVEL ?? 'warn' }, stderr);
  let exiting = false;
  const server = new ExecServer({
    input: process.stdin,
    output: process.stdout,
    logger,
    bundle: options.bundle ?? null,
    ...(options.ptyModule === undefined ? {} : { ptyModule: options.ptyModule }),
    onShutdown: () => {
      exiting = true;
      process.exit(0);
    },
  });
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => void server.shutdown(`signal ${signal}`));
  }
  // A hangup is the transport going away: like its stream closing, it detaches a server with a
  // session (or ends one without), and means nothing once a client re-attached elsewhere.
  process.on('SIGHUP', () => server.stdioHangup('signal SIGHUP'));
  // A broken pipe on stdout means the client is gone: the stream's peer sees the error and closes.
  process.stdout.on('error', () => {});
  // The work belongs to the target: an exception nothing caught (a bug in one request's code, a
  // dependency's timer) is logged and the server keeps serving, rather than killing every process
  // and background task it runs. A server that cannot go on ends through its stream instead.
  process.on('uncaughtException', (error) => {
    if (exiting) return;
    logger.error({ err: error }, 'exec server: uncaught exception; logged, the server keeps serving');
  });
  server.start();
  return server;
}
