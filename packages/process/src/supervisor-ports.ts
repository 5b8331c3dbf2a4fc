import { Socket } from 'node:net';
import type { PortConnectRequest, SupervisorMessage } from './supervisor-protocol.js';

type Send = (message: SupervisorMessage, handle?: Socket) => void;

/**
 * The supervisor's half of port forwarding (the host's half is port-forwarder.ts): connects to a
 * loopback port inside its network namespace and hands the connected socket to the host over the
 * IPC channel, the way it hands over a child's pipes — the supervisor never reads a byte of it.
 *
 * Only `127.0.0.1` and `::1`, only a valid port: whatever the host asks, nothing but the
 * namespace's own loopback is reached from here (and the namespace has nothing else).
 */
export function connectPort(request: PortConnectRequest, send: Send): void {
  const { id, host, port } = request;
  if ((host !== '127.0.0.1' && host !== '::1') || !Number.isInteger(port) || port < 1 || port > 65535) {
    send({ t: 'port-error', id, code: 'EINVAL', message: `not a loopback port: ${String(host)}:${port}` });
    return;
  }
  const socket = new Socket();
  // Node must never read from it here: bytes a server sends first (a banner) have to stay in the
  // kernel's buffer and travel with the socket to the host. It is sent from its 'connect' handler,
  // before node's first read, and paused, which keeps node from starting one at all.
  socket.pause();
  const failed = (error: NodeJS.ErrnoException) => {
    socket.destroy();
    send({ t: 'port-error', id, code: error.code ?? 'ECONNREFUSED', message: error.message });
  };
  socket.once('error', failed);
  socket.once('connect', () => {
    socket.off('error', failed);
    // Sent, node closes this process's copy once the host acknowledged it.
    socket.on('error', () => socket.destroy());
    send({ t: 'port-connected', id }, socket);
  });
  socket.connect({ host, port });
}
