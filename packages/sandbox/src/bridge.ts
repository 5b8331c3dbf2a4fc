import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * The network bridge a sandboxed supervisor runs inside its network namespace: TCP on
 * `127.0.0.1:<port>` (where commands' HTTP(S)_PROXY points), each connection piped to the host's
 * proxy through a unix socket bind-mounted into the sandbox. The sandbox has no other way out.
 * At most `maxConnections` at once.
 */
export function startBridge(socketPath: string, port: number, maxConnections = 256): Promise<Server> {
  const server = createServer((client) => joinSockets(client, connect(socketPath)));
  // The supervisor's own descriptors: a flood of connections to the bridge is closed past the cap
  // (the host's proxy caps what reaches it the same way).
  server.maxConnections = maxConnections;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/** Pipes two sockets both ways: an error on either cuts both, a close of one ends the other. */
export function joinSockets(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  const cut = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', cut);
  b.on('error', cut);
  a.on('close', () => b.end());
  b.on('close', () => a.end());
}
