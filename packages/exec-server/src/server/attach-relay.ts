/**
 * The attach relay: what a re-attaching client runs in the target through its transport (`node -e
 * <boot script> <hash> [cacheRoot] --attach <socket>`, or `conch-exec-server --attach <socket>`).
 * It connects to a detached server's unix socket and copies bytes both ways between its
 * stdin/stdout and that socket, nothing more: the server speaks first (its hello), the client proves
 * the session's key with `session.attach` through it, so the key never appears in an argv or here.
 *
 * When the socket cannot be reached (the server's grace period ended: it removed the socket and
 * exited) it says so on stdout as a boot line, `{ "conchBoot": "error", "code": "SESSION_GONE" }`,
 * and exits 3. Either side closing ends the relay, so a dropped transport detaches the server again.
 *
 * A separate bundle entry with no dependencies: a re-attach does not pay for loading the server.
 */
import { connect } from 'node:net';

export function attach(options: { socket: string }): void {
  const say = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const sock = connect(options.socket);
  let connected = false;
  sock.once('connect', () => {
    connected = true;
    process.stdin.pipe(sock);
    sock.pipe(process.stdout);
  });
  sock.on('error', (error: NodeJS.ErrnoException) => {
    if (connected) return; // 'close' follows
    say({
      conchBoot: 'error',
      code: 'SESSION_GONE',
      message: `no exec server listens on ${options.socket} (${error.code ?? error.message}): its session ended`,
    });
    process.exitCode = 3;
    process.stdin.destroy();
  });
  // The server closed the stream (replaced, refused, shut down): the transport ends with it.
  sock.once('close', () => {
    if (!connected) return;
    process.stdout.write('', () => process.exit(0));
  });
  // The client's side closed: half-close toward the server, which detaches and closes the socket.
  process.stdin.once('end', () => sock.end());
  process.stdin.on('error', () => sock.destroy());
  process.stdout.on('error', () => sock.destroy());
}
