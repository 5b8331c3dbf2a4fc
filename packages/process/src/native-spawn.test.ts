// Invariant: the supervisor's posix_spawn addon starts a child exactly as node's `spawn(file, args, { cwd, env, detached: true, stdio })` does (own session, default signals, the env's own PATH, only fds 0-2, exit and signal reported once), and a supervisor running it gives the host the same results as one running node's spawn.
import { execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  copyFileSync,
  fstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { connect, createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@conch/test-support';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadSpawner, type NativeSpawnModule } from './native-spawn.js';
import { ProcessManager } from './process-manager.js';
import { SupervisorChildren } from './supervisor-children.js';
import type { SupervisorMessage } from './supervisor-protocol.js';

let native: NativeSpawnModule;
type Exit = { code: number | null; signal: number | null };
/** Children not reaped yet, each with its waiter: asked on every SIGCHLD, as the supervisor does. */
const waiting = new Map<number, (exit: Exit) => void>();
const reap = () => {
  for (const [pid, resolve] of waiting) {
    const status = native.tryWait(pid);
    if (status) {
      waiting.delete(pid);
      resolve({ code: status[0], signal: status[1] });
    }
  }
};

/** This process's descriptors open on /dev/null. */
const devNullFds = () =>
  readdirSync('/proc/self/fd')
    .map(Number)
    .filter((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`) === '/dev/null';
      } catch {
        return false; // the directory's own descriptor, closed by now
      }
    });
let nullFdsBefore: number[];

beforeAll(() => {
  nullFdsBefore = devNullFds();
  const spawner = loadSpawner({});
  if (spawner.kind !== 'posix_spawn') throw new Error(`the addon did not load: ${spawner.reason}`);
  native = spawner.module;
  process.on('SIGCHLD', reap);
});
afterAll(() => {
  process.off('SIGCHLD', reap);
});

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'conch-native-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** The child's exit, once SIGCHLD says so (a SIGCHLD that came first is caught by the first ask). */
function exitOf(pid: number): Promise<Exit> {
  return new Promise((resolve) => {
    waiting.set(pid, resolve);
    reap();
  });
}

function readAll(fd: number): Promise<string> {
  if (fd < 0) return Promise.resolve('');
  const socket = new Socket({ fd, readable: true, writable: false });
  let text = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (text += chunk));
  return new Promise((resolve, reject) => {
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });
}

interface Run {
  code: number | null;
  signal: number | null;
  stdout: string;
  stderr: string;
  pid: number;
}

const BASE_ENV = ['PATH=/usr/bin:/bin'];

async function run(
  file: string,
  args: string[],
  options: { cwd?: string; env?: string[]; stdin?: string; capture?: boolean } = {},
): Promise<Run> {
  const [pid, stdinFd, stdoutFd, stderrFd] = native.spawn(
    file,
    [file, ...args],
    options.cwd ?? dir,
    options.env ?? BASE_ENV,
    options.stdin !== undefined,
    options.capture ?? true,
  );
  if (options.stdin !== undefined) {
    const stdin = new Socket({ fd: stdinFd, readable: false, writable: true });
    stdin.end(options.stdin);
  }
  const [stdout, stderr, exit] = await Promise.all([readAll(stdoutFd), readAll(stderrFd), exitOf(pid)]);
  return { ...exit, stdout, stderr, pid };
}

function spawnError(file: string, options: { cwd?: string; env?: string[] } = {}): NodeJS.ErrnoException {
  try {
    native.spawn(file, [file], options.cwd ?? dir, options.env ?? BASE_ENV, false, true);
  } catch (error) {
    return error as NodeJS.ErrnoException;
  }
  throw new Error(`${file} started`);
}

describe('the posix_spawn addon', () => {
  it('passes argv exactly and reports exit codes and signals', async () => {
    const args = ['a b', '', 'ünï ✓', '--flag=$HOME', '"quoted"', '*'];
    const printed = await run('/bin/sh', [
      '-c',
      'for a in "$0" "$@"; do printf "[%s]" "$a"; done',
      'zero',
      ...args,
    ]);
    expect(printed.stdout).toBe(`[zero]${args.map((a) => `[${a}]`).join('')}`);
    expect(await run('/bin/sh', ['-c', 'exit 7'])).toMatchObject({ code: 7, signal: null });
    expect(await run('/bin/sh', ['-c', 'kill -TERM $$'])).toMatchObject({ code: null, signal: 15 });
    expect(await run('/bin/sh', ['-c', 'kill -KILL $$'])).toMatchObject({ code: null, signal: 9 });
    const split = await run('/bin/sh', ['-c', 'echo out; echo err >&2; exit 0']);
    expect([split.stdout, split.stderr]).toEqual(['out\n', 'err\n']);
  });

  it("looks a bare name up on the child's PATH (not the parent's), skipping what it may not run", async () => {
    const first = join(dir, 'first');
    const second = join(dir, 'second');
    for (const d of [first, second]) execFileSync('mkdir', ['-p', d]);
    writeFileSync(join(first, 'conch-tool'), '#!/bin/sh\necho first\n');
    chmodSync(join(first, 'conch-tool'), 0o644); // not executable: skipped
    writeFileSync(join(second, 'conch-tool'), '#!/bin/sh\necho second "$0"\n');
    chmodSync(join(second, 'conch-tool'), 0o755);
    const found = await run('conch-tool', [], { env: [`PATH=${first}:${second}:/usr/bin:/bin`] });
    expect(found.stdout).toBe(`second ${join(second, 'conch-tool')}\n`);
    // only the one it may not run: EACCES, as execvp
    expect(spawnError('conch-tool', { env: [`PATH=${first}`] }).code).toBe('EACCES');
    // the parent's PATH does not count
    expect(spawnError('sh', { env: [`PATH=${first}`] }).code).toBe('ENOENT');
    // an empty entry is the working directory
    const local = await run('conch-tool', [], { cwd: second, env: ['PATH=:/nowhere'] });
    expect(local.stdout).toBe('second conch-tool\n');
    // no PATH at all: /usr/bin:/bin, libuv's default
    expect((await run('sh', ['-c', 'echo $0'], { env: [] })).stdout).toBe('sh\n');
  });

  it('runs a file without a #! line with /bin/sh, as execvp does', async () => {
    const script = join(dir, 'plain');
    writeFileSync(script, 'echo "plain ran with $# args: $1"\n');
    chmodSync(script, 0o755);
    expect((await run(script, ['x'])).stdout).toBe('plain ran with 1 args: x\n');
  });

  it('names what failed the way node does: code, errno, `spawn <file> <CODE>`', () => {
    const missing = spawnError('/nonexistent/conch-xyz');
    expect(missing).toMatchObject({
      code: 'ENOENT',
      errno: -2,
      syscall: 'spawn',
      message: 'spawn /nonexistent/conch-xyz ENOENT',
    });
    expect(spawnError('/bin/true', { cwd: join(dir, 'gone') }).code).toBe('ENOENT');
    expect(spawnError(dir).code).toBe('EACCES'); // a directory
    // Failures the child meets at exec (the file looked runnable from here): the kernel's errno,
    // and the child that never ran is reaped, not left a zombie.
    const noInterpreter = join(dir, 'no-interpreter');
    writeFileSync(noInterpreter, '#!/nonexistent/interpreter\n');
    chmodSync(noInterpreter, 0o755);
    expect(spawnError(noInterpreter).code).toBe('ENOENT');
    const busy = join(dir, 'busy');
    copyFileSync('/bin/true', busy);
    chmodSync(busy, 0o755);
    const writer = openSync(busy, 'r+'); // open for writing: exec refuses it (ETXTBSY)
    try {
      expect(spawnError(busy).code).toBe('ETXTBSY');
    } finally {
      closeSync(writer);
    }
    const zombies = readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .map((p) => {
        try {
          return readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1]!.split(' ');
        } catch {
          return [];
        }
      })
      .filter(([state, ppid]) => state === 'Z' && Number(ppid) === process.pid);
    expect(zombies).toEqual([]);
    expect(() => native.spawn('/bin/true', [], dir, [], false, true)).toThrow(/argv/);
    expect(() => native.spawn('/bin/true', ['true', 3 as unknown as string], dir, [], false, true)).toThrow(
      /expected spawn\(file: string/,
    );
  });

  it('starts the child in its own session and process group, in the cwd and env given', async () => {
    const sub = join(dir, 'sub dir');
    execFileSync('mkdir', ['-p', sub]);
    const env = ['PATH=/usr/bin:/bin', 'ONLY_THIS=1', 'WITH_EQUALS=a=b', 'EMPTY='];
    const { stdout, pid } = await run(
      '/bin/sh',
      ['-c', 'echo "$(ps -o sid=,pgid= -p $$ | tr -s " ")"; pwd; env | sort'],
      { cwd: sub, env },
    );
    const [ids, cwd, ...vars] = stdout.trim().split('\n');
    expect(ids!.trim()).toBe(`${pid} ${pid}`);
    expect(cwd).toBe(sub);
    // sh adds PWD (and may add OLDPWD/SHLVL/_ ); nothing of this process's env arrives
    expect(vars.filter((v) => !/^(PWD|OLDPWD|SHLVL|_)=/.test(v))).toEqual([...env].sort());
  });

  it('gives the child every signal at its default and none blocked, and no fd beyond 0-2', async () => {
    // This process handles SIGINT and ignores SIGPIPE (node does): neither reaches the child.
    const onInt = () => {};
    process.on('SIGINT', onInt);
    try {
      // grep reads its own status (a shell's may show the mask it sets around its own forks).
      const masks = await run('/bin/grep', ['-E', '^Sig(Blk|Ign)', '/proc/self/status']);
      const [blocked, ignored] = masks.stdout.trim().split('\n');
      expect(BigInt(`0x${blocked!.split('\t')[1]}`)).toBe(0n);
      // glibc leaves its two internal signals (32, 33) ignored; 1..31 are all at their default
      expect(BigInt(`0x${ignored!.split('\t')[1]}`) & 0x7fffffffn).toBe(0n); // bit n-1 is signal n
      const { stdout } = await run('/bin/sh', ['-c', 'ls /proc/$$/fd']);
      expect(stdout.trim().split('\n').sort()).toEqual(['0', '1', '2']);
    } finally {
      process.off('SIGINT', onInt);
    }
  });

  it('stdin as a pipe, and /dev/null for what is not captured', async () => {
    expect((await run('/bin/cat', [], { stdin: 'through stdin ✓' })).stdout).toBe('through stdin ✓');
    expect((await run('/bin/cat', [])).stdout).toBe(''); // stdin /dev/null: EOF at once
    const [pid, stdinFd, stdoutFd, stderrFd] = native.spawn(
      '/bin/sleep',
      ['sleep', '30'],
      dir,
      BASE_ENV,
      false,
      false,
    );
    expect([stdinFd, stdoutFd, stderrFd]).toEqual([-1, -1, -1]);
    const exited = exitOf(pid);
    await waitFor(() => readlinkSync(`/proc/${pid}/exe`).endsWith('/sleep'), {
      what: 'sleep exec',
      timeoutMs: 10_000,
    });
    expect([0, 1, 2].map((fd) => readlinkSync(`/proc/${pid}/fd/${fd}`))).toEqual([
      '/dev/null',
      '/dev/null',
      '/dev/null',
    ]);
    process.kill(pid, 'SIGKILL');
    expect(await exited).toEqual({ code: null, signal: 9 });
  });

  it('keeps one /dev/null for all its spawns, and opens another when that descriptor was closed behind its back', async () => {
    await run('/bin/true', [], { capture: false });
    const kept = devNullFds().filter((fd) => !nullFdsBefore.includes(fd));
    expect(kept).toHaveLength(1); // one, kept across spawns (an open per spawn was a guard round trip)
    for (let i = 0; i < 20; i++) expect((await run('/bin/cat', [])).stdout).toBe('');
    expect(devNullFds().filter((fd) => !nullFdsBefore.includes(fd))).toEqual(kept);
    // Other code closes that number and reuses it for a file of its own (the lowest free number):
    // the addon neither gives that file to a child nor closes it.
    for (const reuse of ['file', 'socket'] as const) {
      const server =
        reuse === 'socket'
          ? createServer((socket) => socket.end('NOT-FOR-THE-CHILD')).listen(0, '127.0.0.1')
          : undefined;
      if (server) await new Promise((resolve) => server.once('listening', resolve));
      writeFileSync(join(dir, 'theirs'), 'NOT-FOR-THE-CHILD');
      closeSync(kept[0]!);
      // Every free number below it taken, so theirs is the one the kernel gives next.
      const fillers: number[] = [];
      for (;;) {
        const filler = openSync(join(dir, 'theirs'), 'r');
        if (filler >= kept[0]!) {
          closeSync(filler);
          break;
        }
        fillers.push(filler);
      }
      let fd: number;
      let other: Socket | undefined;
      if (!server) {
        fd = openSync(join(dir, 'theirs'), 'r');
      } else {
        other = connect((server.address() as { port: number }).port, '127.0.0.1');
        await new Promise((resolve) => other!.once('connect', resolve));
        server.close();
        fd = (other as unknown as { _handle: { fd: number } })._handle.fd;
      }
      expect(fd).toBe(kept[0]);
      const child = await run('/bin/sh', ['-c', 'cat; readlink /proc/$$/fd/0']);
      expect(child.stdout).toBe('/dev/null\n');
      expect(reuse === 'file' ? fstatSync(fd).isFile() : fstatSync(fd).isSocket()).toBe(true); // theirs, open
      if (other) {
        let got = '';
        other.on('data', (d: Buffer) => (got += d.toString()));
        await new Promise((resolve) => other!.once('end', resolve));
        expect(got).toBe('NOT-FOR-THE-CHILD'); // nothing read it away
        other.destroy();
      } else {
        expect(readFileSync(fd, 'utf8')).toBe('NOT-FOR-THE-CHILD');
        closeSync(fd);
      }
      for (const filler of fillers) closeSync(filler);
      const now = devNullFds().filter((n) => !nullFdsBefore.includes(n));
      expect(now).toHaveLength(1);
      kept[0] = now[0]!;
    }
  });

  it('reports every exit once under many concurrent spawns', async () => {
    const runs = await Promise.all(
      Array.from({ length: 120 }, (_, i) => run('/bin/sh', ['-c', `echo ${i}; exit ${i % 5}`])),
    );
    runs.forEach((r, i) => expect(r).toMatchObject({ code: i % 5, signal: null, stdout: `${i}\n` }));
    expect(waiting.size).toBe(0);
  });

  it('tryWait: null while the child runs, its status once, then [null, null] (not a child any more)', async () => {
    const [pid, stdinFd] = native.spawn(
      '/bin/sh',
      ['sh', '-c', 'read line; exit 6'],
      dir,
      BASE_ENV,
      true,
      false,
    );
    expect(native.tryWait(pid)).toBeNull();
    expect(native.tryWait(pid)).toBeNull();
    process.kill(pid, 'SIGTERM');
    await waitFor(() => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z'), {
      what: 'the child a zombie',
      timeoutMs: 10_000,
    });
    expect(native.tryWait(pid)).toEqual([null, 15]);
    expect(native.tryWait(pid)).toEqual([null, null]);
    closeSync(stdinFd);
    expect(native.tryWait(process.pid)).toEqual([null, null]);
    expect(() => native.tryWait(0)).toThrow(/tryWait\(pid: number\)/);
  });
});

describe('loadSpawner', () => {
  it("says why node's spawn is used: switched off, not built, not loadable", () => {
    expect(loadSpawner({ CONCH_NATIVE_SPAWN: '0' })).toEqual({
      kind: 'node',
      reason: 'CONCH_NATIVE_SPAWN=0',
    });
    const missing = loadSpawner({}, join(dir, 'conch_spawn.node'));
    expect(missing).toMatchObject({ kind: 'node' });
    expect((missing as { reason: string }).reason).toMatch(
      /conch_spawn\.node is missing \(.*build-native\.mjs/,
    );
    const garbage = join(dir, 'garbage.node');
    writeFileSync(garbage, 'not an ELF file');
    expect((loadSpawner({}, garbage) as { reason: string }).reason).toMatch(/garbage\.node did not load: /);
    expect(loadSpawner({}).kind).toBe('posix_spawn');
  });
});

describe('the fd channel (sendFds / recvFds)', () => {
  /** Two connected unix sockets of this process, node never reading them (the addon does). */
  async function socketPair(): Promise<{ a: number; b: number; close(): void }> {
    const path = join(dir, 'pair.sock');
    const server = createServer();
    const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
    await new Promise<void>((resolve) => server.listen(path, resolve));
    const client = connect(path);
    await new Promise<void>((resolve) => client.once('connect', () => resolve()));
    const peer = await accepted;
    const fdOf = (socket: Socket) => {
      const handle = (socket as unknown as { _handle: { fd: number; readStop(): number } })._handle;
      handle.readStop();
      return handle.fd;
    };
    return {
      a: fdOf(client),
      b: fdOf(peer),
      close: () => {
        client.destroy();
        peer.destroy();
        server.close();
      },
    };
  }

  it("carries a child's pipes to the other end, in order, and closes the sender's copies", async () => {
    const pair = await socketPair();
    try {
      expect(native.recvFds(pair.b)).toBeNull(); // nothing queued: null at once, never a wait
      const children = ['one', 'two'].map((word) => {
        const [pid, , out, err] = native.spawn(
          '/bin/sh',
          ['sh', '-c', `echo ${word}; echo ${word}-err >&2`],
          dir,
          BASE_ENV,
          false,
          true,
        );
        expect(native.sendFds(pair.a, pid, [out, err])).toBe(true);
        // sent: this end's copies are closed
        expect(() => fstatSync(out)).toThrow(/EBADF/);
        return { pid, exited: exitOf(pid) };
      });
      for (const { pid, exited } of children) {
        const got = native.recvFds(pair.b)!;
        expect(got).toHaveLength(3);
        expect(got[0]).toBe(pid);
        const [stdout, stderr] = await Promise.all([readAll(got[1]!), readAll(got[2]!)]);
        const word = pid === children[0]!.pid ? 'one' : 'two';
        expect([stdout, stderr]).toEqual([`${word}\n`, `${word}-err\n`]);
        expect(await exited).toEqual({ code: 0, signal: null });
      }
      expect(native.recvFds(pair.b)).toBeNull();
    } finally {
      pair.close();
    }
  });

  it('a full channel says so at once and leaves the fds with the sender', async () => {
    const pair = await socketPair();
    const file = join(dir, 'kept');
    writeFileSync(file, 'still mine');
    try {
      let sent = 0;
      // Nobody reads: the socket's buffer fills and sendFds returns false instead of blocking.
      for (;;) {
        const next = openSync(file, 'r');
        if (!native.sendFds(pair.a, sent, [next])) {
          closeSync(next);
          break;
        }
        sent++;
      }
      expect(sent).toBeGreaterThan(0);
      const last = openSync(file, 'r');
      expect(native.sendFds(pair.a, sent, [last])).toBe(false);
      expect(readFileSync(`/proc/self/fd/${last}`, 'utf8')).toBe('still mine');
      closeSync(last);
      // Everything sent arrives, in order.
      for (let i = 0; i < sent; i++) {
        const got = native.recvFds(pair.b)!;
        expect(got[0]).toBe(i);
        closeSync(got[1]!);
      }
      expect(native.recvFds(pair.b)).toBeNull();
    } finally {
      pair.close();
    }
  });
});

describe('pidfdPid and fileId (the addon)', () => {
  it("pidfdPid: a pidfd's pid in this namespace, -1 once reaped, and the pidfd closed", async () => {
    // A pidfd comes from another process (node opens none): python opens one of a running child
    // and one of a child it reaped, and sends both over a unix socket this test reads with recvFds.
    const path = join(dir, 'pidfd.sock');
    const server = createServer();
    const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
    await new Promise<void>((resolve) => server.listen(path, resolve));
    const python = spawn(
      'python3',
      [
        '-c',
        `import os, socket, struct, subprocess, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
def send(i, fd): socket.send_fds(s, [struct.pack('I', i)], [fd]); os.close(fd)
running = subprocess.Popen(['sleep', '60'])
send(1, os.pidfd_open(running.pid))
done = subprocess.Popen(['true']); fd = os.pidfd_open(done.pid); done.wait()
send(2, fd)
print(running.pid, flush=True)
sys.stdin.read()
running.kill(); running.wait()`,
        path,
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    try {
      const peer = await accepted;
      const handle = (peer as unknown as { _handle: { fd: number; readStop(): number } })._handle;
      handle.readStop();
      const line = await new Promise<string>((resolve) =>
        python.stdout.once('data', (b: Buffer) => resolve(String(b))),
      );
      const sleepPid = Number(line.trim());
      const first = native.recvFds(handle.fd)!;
      const second = native.recvFds(handle.fd)!;
      expect([first[0], second[0]]).toEqual([1, 2]);
      for (const fd of [first[1]!, second[1]!]) expect(readlinkSync(`/proc/self/fd/${fd}`)).toMatch(/pidfd/);
      expect(native.pidfdPid!(first[1]!)).toBe(sleepPid);
      expect(native.pidfdPid!(second[1]!)).toBe(-1);
      for (const fd of [first[1]!, second[1]!]) expect(() => fstatSync(fd)).toThrow(/EBADF/);
      expect(() => native.pidfdPid!(-1)).toThrow(/pidfdPid\(pidfd: number\)/);
      peer.destroy();
    } finally {
      python.stdin.end();
      await new Promise((resolve) => python.once('exit', resolve));
      server.close();
    }
  });

  it('fileId: device and inode of what a path names, a new one for a directory made again, empty when gone', () => {
    const fileId = native.fileId!;
    const sub = join(dir, 'footing');
    mkdirSync(sub);
    const st = statSync(sub, { bigint: true });
    expect(fileId(sub)).toBe(`${st.dev}:${st.ino}`);
    symlinkSync(sub, join(dir, 'footing-link'));
    expect(fileId(join(dir, 'footing-link'))).toBe(fileId(sub)); // followed, as a mount's source is
    const before = fileId(sub);
    // Renamed away and made again (the old one lives on, so its inode cannot be handed out again).
    renameSync(sub, `${sub}.old`);
    mkdirSync(sub);
    expect(fileId(sub)).not.toBe(before);
    expect(fileId(sub)).not.toBe('');
    expect(fileId(`${sub}.old`)).toBe(before);
    rmSync(`${sub}.old`, { recursive: true });
    expect(fileId(`${sub}.old`)).toBe('');
    expect(fileId(`${sub}\0/etc`)).toBe(''); // never a prefix of the path asked
    expect(fileId(join(dir, 'x'.repeat(5000)))).toBe('');
    expect(() => fileId(42 as unknown as string)).toThrow(/fileId\(path: string\)/);
  });
});

describe("the supervisor's side without an fd channel", () => {
  it('passes the pipes as node handles, in the order the host expects, and reports the exit', async () => {
    const sent: { message: SupervisorMessage; handle: Socket | undefined }[] = [];
    const children = new SupervisorChildren((message, handle) => sent.push({ message, handle }), false, {
      kind: 'posix_spawn',
      module: native,
    });
    const base = { t: 'spawn' as const, args: [] as string[], cwd: dir, env: { PATH: '/usr/bin:/bin' } };
    children.spawn({ ...base, id: 1, file: 'cat', stdin: 'pipe', capture: true });
    const [spawned, ...streams] = sent.splice(0);
    expect(spawned!.message).toMatchObject({ t: 'spawned', id: 1, fds: [1, 2, 0] });
    expect((spawned!.message as { channel?: true }).channel).toBeUndefined();
    expect(spawned!.handle).toBeInstanceOf(Socket);
    expect(streams.map((s) => s.message)).toEqual([
      { t: 'stream', id: 1, fd: 2 },
      { t: 'stream', id: 1, fd: 0 },
    ]);
    expect(streams.every((s) => s.handle instanceof Socket)).toBe(true);
    // cat ends when its stdin closes; the exit comes by message once SIGCHLD is seen
    for (const s of [spawned!, ...streams]) s.handle!.destroy();
    await waitFor(() => sent.some((s) => s.message.t === 'exit'), {
      what: 'the exit message',
      timeoutMs: 10_000,
    });
    expect(sent.find((s) => s.message.t === 'exit')!.message).toMatchObject({
      t: 'exit',
      id: 1,
      code: 0,
      signal: null,
    });
    // an error is a message too, with node's code
    children.spawn({ ...base, id: 2, file: 'conch-missing-xyz', stdin: 'ignore', capture: true });
    expect(sent.find((s) => s.message.t === 'spawn-error')!.message).toMatchObject({ id: 2, code: 'ENOENT' });
  });
});

describe('a supervisor with and without posix_spawn', () => {
  const managers: ProcessManager[] = [];
  afterAll(async () => {
    await Promise.all(managers.map((m) => m.dispose()));
  });
  const results = async (nativeSpawn: boolean) => {
    const m = new ProcessManager({
      tempDir: () => dir,
      cwd: dir,
      killGraceMs: 300,
      drainMs: 300,
      supervisor: { nativeSpawn },
    });
    managers.push(m);
    const shell = (cmd: string, opts = {}) => m.spawn(cmd, [], { shell: true, ...opts }).result;
    const out = {
      exit: await shell('echo out; echo err >&2; exit 3'),
      signal: await shell('kill -INT $$'),
      missing: await m.spawn('conch-definitely-missing').result,
      denied: await m.spawn(dir).result,
      gone: await m.spawn('true', [], { cwd: join(dir, 'gone') }).result,
      stdin: await (async () => {
        const p = m.spawn('cat', [], { stdin: 'pipe' });
        p.stdin!.end('in');
        return p.result;
      })(),
      status: (await m.status()).spawner,
    };
    return {
      exit: [out.exit.exitCode, out.exit.signal, out.exit.stdout.head, out.exit.stderr.head],
      signal: [out.signal.exitCode, out.signal.signal],
      missing: [out.missing.reason, out.missing.spawnError?.code, out.missing.spawnError?.message],
      gone: [out.gone.spawnError?.code, out.gone.spawnError?.message],
      denied: [out.denied.spawnError?.code, out.denied.spawnError?.message],
      stdin: out.stdin.stdout.head,
      status: out.status,
    };
  };

  it('the host sees the same results, errors and wording from both; status() names the spawner', async () => {
    const withNative = await results(true);
    const withNode = await results(false);
    expect(withNative.status).toEqual({ kind: 'posix_spawn' });
    expect(withNode.status).toEqual({ kind: 'node', reason: 'CONCH_NATIVE_SPAWN=0' });
    expect({ ...withNative, status: undefined }).toEqual({ ...withNode, status: undefined });
    expect(withNative.exit).toEqual([3, null, 'out\n', 'err\n']);
    expect(withNative.signal).toEqual([null, 'SIGINT']);
    expect(withNative.missing.slice(0, 2)).toEqual(['error', 'ENOENT']);
    expect(withNative.gone[1]).toContain('does not exist');
    expect(withNative.denied[0]).toBe('EACCES');
    expect(withNative.stdin).toBe('in');
  });
});
