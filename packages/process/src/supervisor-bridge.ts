import { connect, createServer, type Server } from 'node:net';

/**
 * The network bridge a sandboxed supervisor runs inside its network namespace: TCP on
 * `127.0.0.1:<port>` (where commands' HTTP(S)_PROXY points), each connection piped to the host's
 * proxy through a unix socket bind-mounted into the sandbox. The sandbox has no other way out.
 */
export function startBridge(socketPath: string, port: number): Promise<Server> {
  const server = createServer((client) => {
    const upstream = connect(socketPath);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', () => upstream.end());
    upstream.on('close', () => client.end());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}
