/**
 * The supervisor: a small node process a ProcessManager starts on its first spawn (one per sandbox
 * profile, the sandboxed ones inside bwrap) and talks to over node's IPC channel. It spawns every
 * child for the host — so the host, however large, never forks per command — and hands each
 * child's pipes straight to the host, never reading a byte itself. When the host goes away by any
 * means (SIGKILL included, the IPC channel then closes) it kills every process group and PTY tree
 * it started, sweeps every process carrying its manager's cookie prefix, and exits.
 *
 * Run as `node supervisor-main.js <cookie-prefix> <sandbox-kind> <sync-fd> [<proxy-socket> <port>]`
 * with an 'ipc' stdio slot; with a proxy socket it bridges 127.0.0.1:<port> to it (the sandbox's
 * only way out, see supervisor-bridge.ts). On the host's request it connects to a loopback port of its
 * network namespace and passes the socket to the host (port forwarding, see supervisor-ports.ts).
 * It imports only node built-ins and a few small modules of this package, so it starts fast.
 */
import { closeSync, writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { sweepCookie } from './kill-tree.js';
import { canDetachPipes, SupervisorChildren } from './supervisor-children.js';
import { FD_CHANNEL_VAR, loadSpawner } from './native-spawn.js';
import { startBridge, startLoopbackForwards } from './supervisor-bridge.js';
import { fsRequest } from './supervisor-fs.js';
import { ownPidsEvents, ProcessLimitWatch } from './supervisor-limits.js';
import { connectPort } from './supervisor-ports.js';
import type { HostMessage, PtySpawnRequest, SupervisorMessage } from './supervisor-protocol.js';
import { OOM_SCORE_ADJ_VAR, PIDS_EVENTS_VAR, PROCESS_LIMIT_VAR } from './supervisor-limit-vars.js';
import { SupervisorPtys } from './supervisor-ptys.js';

const [prefix = '', sandbox = 'none', syncFd, proxySocket, proxyPort, hostPortList = ''] =
  process.argv.slice(2);
/** Host loopback ports reached at their own address inside (network.allow names them). */
const hostPorts = hostPortList
  .split(',')
  .filter(Boolean)
  .map(Number)
  .filter((p) => Number.isInteger(p) && p > 0 && p < 65536);
if (typeof process.send !== 'function' || !/^[0-9a-f]+-$/.test(prefix)) {
  process.stderr.write(
    'conch supervisor: start it through @conch/process (needs an IPC channel and a cookie prefix)\n',
  );
  process.exit(2);
}

function send(message: SupervisorMessage, handle?: Socket, onSent?: () => void): void {
  if (!process.connected) return;
  // The callback also swallows the error of a send racing the host's death (shutdown follows).
  process.send!(message, handle, {}, () => onSent?.());
}

// posix_spawn when the addon loads (native-spawn.ts), else node's spawn: told to the host in `ready`.
const spawner = loadSpawner();
const fdChannel = process.env[FD_CHANNEL_VAR] ? Number(process.env[FD_CHANNEL_VAR]) : undefined;
const children = new SupervisorChildren(
  (message, handle) => send(message, handle),
  sandbox !== 'none',
  spawner,
  fdChannel,
  // In its own pid namespace (read-only, workspace-write): each child's pidfd goes to the host.
  sandbox === 'read-only' || sandbox === 'workspace-write',
);
const ptys = new SupervisorPtys((message, onSent) => send(message, undefined, onSent));

// The sandbox's limits (set by the host, see the process manager's sandbox-limits.ts): what it
// runs is the kernel OOM killer's first choice over the host's processes (raising one's own
// oom_score_adj needs no privilege; children inherit it), and a fork loop that holds every task
// the sandbox may have is stopped.
const oomScoreAdj = process.env[OOM_SCORE_ADJ_VAR];
if (oomScoreAdj) {
  try {
    writeFileSync('/proc/self/oom_score_adj', oomScoreAdj);
  } catch {
    // a /proc that refuses it: the limits still hold
  }
}
const processLimit = Number(process.env[PROCESS_LIMIT_VAR] ?? 0);
if (processLimit > 0) {
  const watch = new ProcessLimitWatch({
    limit: processLimit,
    pidsEvents: process.env[PIDS_EVENTS_VAR] === '1' ? ownPidsEvents() : undefined,
    cookieVar: 'CONCH_PROC_COOKIE',
    busy: () => children.busy,
    onHit: (hit) => {
      const id = children.idOf(hit.pgid, hit.cookie);
      send({
        t: 'limit',
        ...(id !== undefined ? { id } : {}),
        kind: 'processes',
        tasks: hit.tasks,
        groupTasks: hit.groupTasks,
        limit: processLimit,
      });
    },
  });
  children.onStart = () => watch.wake();
  // A leader that exited while its group holds the sandbox at its limit: the group is the command's.
  children.onGroupLeft = (id, pgid) => {
    const hit = watch.leaderExited(pgid);
    if (hit)
      send({
        t: 'limit',
        id,
        kind: 'processes',
        tasks: hit.tasks,
        groupTasks: hit.groupTasks,
        limit: processLimit,
      });
  };
  ptys.onStart = () => watch.wake();
}

let closing = false;
function killEverything(): void {
  children.killAll();
  ptys.killAll();
  sweepCookie({ prefix });
}
function shutdown(code: number): void {
  if (closing) return;
  closing = true;
  try {
    killEverything();
  } finally {
    process.exit(code);
  }
}

// The host is gone (exit, crash, SIGKILL: the kernel closes its end of the channel) or disposed.
process.on('disconnect', () => shutdown(0));
// Node emits no 'disconnect' when the channel ends while a handle this process sent (a child's
// pipe, a forwarded socket) still waits for the host's acknowledgement: it marks the channel
// disconnected and drops it, nothing more (lib/internal/child_process.js, Node 20-24). Every
// default spawn opens that window: pipes held here (HOLD_MS) go over this channel when their send
// on the fd channel fails, as it does to a dead host. A host SIGKILLed then left what this
// process started running, in its own session, for good.
// So the channel's state is also looked at every CHANNEL_CHECK_MS (a timer that keeps nothing
// alive), and an exit without shutdown — the event loop empties once the channel is gone — kills
// the same way: with the channel gone the host is gone, whatever node said.
const CHANNEL_CHECK_MS = 1_000;
setInterval(() => {
  if (!process.connected) shutdown(0);
}, CHANNEL_CHECK_MS).unref();
process.on('exit', () => {
  if (closing) return;
  closing = true;
  killEverything();
});
// A host that disposed while this process was still starting closed the channel before node set
// it up here: `connected` is false from the start and 'disconnect' never fires.
if (!process.connected) shutdown(0);
// The supervisor leads its own session, so terminal signals never reach it. Outside a pid
// namespace a deliberate signal ends it the way the host's death does (nothing it started outlives
// it). Inside one (an isolated sandbox) only the commands it runs can signal it, and they must not
// end it: it ignores every signal it can (SIGKILL and SIGSTOP cannot be ignored; the host notices
// those and reports the commands it ran as lost). SIGUSR1 never opens node's inspector.
const isolated = sandbox === 'read-only' || sandbox === 'workspace-write';
process.on('SIGUSR1', () => {});
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR2', 'SIGPIPE'] as const) {
  process.on(signal, () => {
    if (!isolated && signal !== 'SIGPIPE' && signal !== 'SIGUSR2') shutdown(0);
  });
}
process.on('uncaughtException', (error) => {
  process.stderr.write(`conch supervisor: ${error.stack ?? String(error)}\n`);
  shutdown(70);
});

process.on('message', (message: HostMessage) => {
  switch (message.t) {
    case 'spawn':
      children.spawn(message);
      break;
    case 'pty-write':
      ptys.write(message.id, message.data);
      break;
    case 'pty-resize':
      ptys.resize(message.id, message.cols, message.rows);
      break;
    case 'fs':
      void fsRequest(message, (reply) => send(reply));
      break;
    case 'ping':
      send({ t: 'pong', id: message.id });
      break;
    case 'port-connect':
      connectPort(message, (reply, handle) => send(reply, handle));
      break;
  }
});

// Node's child pipes are only detached when node spawns: the native spawner makes its own.
const { usable, gone: probeGone } =
  spawner.kind === 'posix_spawn' ? { usable: true, gone: Promise.resolve() } : canDetachPipes();
if (syncFd !== undefined && !usable) {
  // Close the PTY channel too, so a host blocked on it sees the end at once.
  closeSync(Number(syncFd));
} else if (syncFd !== undefined) {
  // PTY spawns arrive here, one JSON line each, and are answered on the same socket while the
  // host blocks reading it (so spawnPty() can return a pid synchronously).
  const sync = new Socket({ fd: Number(syncFd), readable: true, writable: true });
  let buffered = '';
  sync.setEncoding('utf8');
  sync.on('data', (text: string) => {
    buffered += text;
    for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
      const request = JSON.parse(buffered.slice(0, nl)) as PtySpawnRequest;
      buffered = buffered.slice(nl + 1);
      sync.write(`${JSON.stringify(ptys.spawn(request))}\n`);
    }
  });
  sync.on('error', () => {
    // the host closed it: the IPC disconnect ends this process
  });
}

const ready = () =>
  probeGone.then(() =>
    send({
      t: 'ready',
      pid: process.pid,
      node: process.version,
      spawner:
        spawner.kind === 'posix_spawn' ? { kind: 'posix_spawn' } : { kind: 'node', reason: spawner.reason },
    }),
  );
if (!usable) {
  send({ t: 'fatal', message: `node ${process.version}: child pipes cannot be detached for handle passing` });
} else if (proxySocket && proxyPort) {
  // Ready once commands can reach the proxy.
  Promise.all([
    startBridge(proxySocket, Number(proxyPort)),
    startLoopbackForwards(proxySocket, hostPorts),
  ]).then(
    ([server, forwards]) => {
      server.unref();
      for (const s of forwards) s.unref();
      void ready();
    },
    (error: Error) => send({ t: 'fatal', message: `the network bridge could not start: ${error.message}` }),
  );
} else {
  void ready();
}
