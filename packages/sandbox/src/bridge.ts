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

/**
 * Host loopback services the sandbox may reach at their own address (`network.allow` naming
 * `127.0.0.1:5432` or `localhost:8080`): inside the sandbox's network namespace, a listener on
 * `127.0.0.1:<port>` (and `::1` where the namespace has it) for each, every connection sent to the
 * host's proxy as `CONNECT 127.0.0.1:<port>` — which the proxy decides like any destination — so
 * `curl localhost:8080` and `psql -h 127.0.0.1` work unchanged (NO_PROXY sends loopback direct).
 * A port not named has no listener: the connection is refused, as in an empty namespace.
 */
export async function startLoopbackForwards(
  socketPath: string,
  ports: readonly number[],
  maxConnections = 256,
): Promise<Server[]> {
  const servers: Server[] = [];
  for (const port of ports) {
    for (const address of ['127.0.0.1', '::1']) {
      const server = createServer((client) => connectThroughProxy(client, socketPath, port));
      server.maxConnections = maxConnections;
      const listening = await new Promise<boolean>((resolve, reject) => {
        server.once('error', (error: NodeJS.ErrnoException) =>
          // No IPv6 loopback in this namespace: the IPv4 listener is enough.
          address === '::1' && (error.code === 'EADDRNOTAVAIL' || error.code === 'EAFNOSUPPORT')
            ? resolve(false)
            : reject(error),
        );
        server.listen({ port, host: address, ipv6Only: address === '::1' }, () => resolve(true));
      });
      if (listening) servers.push(server);
    }
  }
  return servers;
}

/** One connection to a host loopback port: a CONNECT through the proxy socket, then both ways. */
function connectThroughProxy(client: Socket, socketPath: string, port: number): void {
  const upstream = connect(socketPath);
  client.pause();
  let answer = Buffer.alloc(0);
  const fail = () => {
    upstream.destroy();
    client.destroy();
  };
  client.on('error', fail);
  upstream.on('error', fail);
  upstream.on('connect', () => {
    upstream.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
  });
  const onData = (chunk: Buffer) => {
    answer = Buffer.concat([answer, chunk]);
    const end = answer.indexOf('\r\n\r\n');
    if (end < 0) {
      if (answer.length > 16_384) fail();
      return;
    }
    upstream.off('data', onData);
    // Refused (403, 502): the client sees the connection reset, as for a port nobody listens on.
    if (!/^HTTP\/1\.[01] 200/.test(answer.toString('latin1', 0, 16))) {
      fail();
      return;
    }
    const rest = answer.subarray(end + 4);
    if (rest.length > 0) client.write(rest);
    joinSockets(client, upstream);
    client.resume();
  };
  upstream.on('data', onData);
}
