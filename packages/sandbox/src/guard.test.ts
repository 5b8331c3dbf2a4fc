// The guard judges every path a sandboxed process opens or changes: protected names born during the
// session are refused, the agent's own `.env` is its own, the sandbox's init, guard and supervisor
// are out of reach, and ordinary tools (git, node, python, make, cc, FIFOs, /dev/stdin) still work.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { release } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { encodeGuardRules, GuardEventReader, guardAvailability } from './guard.js';
import { bwrap, rulesFor, runGuarded, tempWorkspace } from './test-support/guarded.js';

const ready = bwrap !== undefined && guardAvailability().available;
const maybe = ready ? describe : describe.skip;
if (!ready && process.env.CI) throw new Error('CI needs bubblewrap and the guard for the guard suite');

/** `name=$?` lines of a script's output, as a record. */
/** The JSON object a script printed on a line of its own (`{}` when there is none). */
function jsonLine<T>(stdout: string): T {
  return JSON.parse(stdout.split('\n').find((l) => l.startsWith('{')) ?? '{}') as T;
}

function statuses(stdout: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of stdout.matchAll(/^([\w.-]+)=(\d+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

describe('the guard protocol', () => {
  it('encodes rules as records ending in a commit, and reads events split anywhere', () => {
    const bytes = encodeGuardRules(rulesFor('/w', { readOnly: ['/w/.git/config'] }));
    expect(bytes.subarray(bytes.length - 5)).toEqual(Buffer.from([0x43, 0, 0, 0, 0]));
    expect(bytes.includes(Buffer.from('/w/.git/config'))).toBe(true);
    const reader = new GuardEventReader();
    const record = (type: string, body: string) => {
      const b = Buffer.from(body);
      const h = Buffer.alloc(5);
      h[0] = type.charCodeAt(0);
      h.writeUInt32LE(b.length, 1);
      return Buffer.concat([h, b]);
    };
    const stream = Buffer.concat([
      record('S', '2 3 wait-killable,sync-wake'),
      record('S', '4 5 wait-killable'),
      record('S', '6 7 '),
      record('r', 'write\0/w/.git/config\x0030\0cookie-1'),
      record('w', 'create\0/w/.npmrc\0'),
    ]);
    const events = [
      ...reader.push(stream.subarray(0, 7)),
      ...reader.push(stream.subarray(7, 30)),
      ...reader.push(stream.subarray(30)),
    ];
    expect(events).toEqual([
      { kind: 'started', guardPid: 2, supervisorPid: 3, waitKillable: true, syncWake: true },
      { kind: 'started', guardPid: 4, supervisorPid: 5, waitKillable: true, syncWake: false },
      { kind: 'started', guardPid: 6, supervisorPid: 7, waitKillable: false, syncWake: false },
      { kind: 'refused', op: 'write', path: '/w/.git/config', errno: 30, cookie: 'cookie-1' },
      { kind: 'written', op: 'create', path: '/w/.npmrc' },
    ]);
  });
});

maybe('the guard on this kernel', () => {
  it('asks for synchronous hand-offs where the kernel has them (Linux 6.6+), and works either way', () => {
    const [major = 0, minor = 0] = release().split(/[.-]/).map(Number);
    const found = guardAvailability();
    expect(found).toMatchObject({ available: true, syncWake: major > 6 || (major === 6 && minor >= 6) });
  });
});

maybe('names born during the session', () => {
  it('refuses protected names and non-sample hooks wherever they are made, in every spelling', async () => {
    const ws = tempWorkspace();
    const script = `
      cd ${ws}
      echo x > .envrc; echo envrc=$?
      python3 -c "open('sub1.envrc'.replace('sub1', ''),'w').write('x')" 2>/dev/null; echo py_envrc=$?
      node -e "require('fs').writeFileSync('.mcp.json','{}')" 2>/dev/null; echo node_mcp=$?
      perl -e 'open(F, ">", "conch.config.json") or exit 1' ; echo perl_conch=$?
      mkdir -p a/b/.vscode 2>/dev/null; echo vscode=$?
      mkdir -p tmpl && echo '{}' > tmpl/tasks.json && cp -a tmpl .claude 2>/dev/null; echo cp_claude=$?
      mv tmpl .idea 2>/dev/null; echo mv_idea=$?
      tar -C /tmp -cf /tmp/t.tar . 2>/dev/null; mkdir -p ex && printf 'x' > /tmp/envrc && (cd /tmp && tar -cf /tmp/e.tar envrc) && tar -C ex -xf /tmp/e.tar --transform 's/envrc/.envrc/' 2>/dev/null; echo tar_envrc=$?
      git init -q repo && echo init=$?
      printf '#!/bin/sh\\necho planted\\n' > repo/.git/hooks/pre-commit 2>/dev/null; echo hook=$?
      cp repo/.git/hooks/pre-commit.sample repo/.git/hooks/post-checkout 2>/dev/null; echo cp_hook=$?
      ln -s /bin/true repo/.git/hooks/pre-push 2>/dev/null; echo ln_hook=$?
      mkdir -p tpl/hooks && printf '#!/bin/sh\\necho planted\\n' > tpl/hooks/post-checkout && chmod +x tpl/hooks/post-checkout
      git init -q --template=tpl repo2 2>/dev/null; echo init_template=$?
      echo ok > repo/.git/hooks/pre-commit.sample2 2>/dev/null; echo not_sample=$?
      echo ok > plain.txt; echo plain=$?
    `;
    const r = await runGuarded(rulesFor(ws), script).done;
    const s = statuses(r.stdout);
    expect(s).toMatchObject({ plain: 0, init: 0 });
    for (const key of [
      'envrc',
      'node_mcp',
      'perl_conch',
      'vscode',
      'cp_claude',
      'mv_idea',
      'tar_envrc',
      'hook',
      'cp_hook',
      'ln_hook',
      'init_template',
      'not_sample',
    ])
      expect(s[key], `${key}\n${r.stdout}${r.stderr}`).not.toBe(0);
    for (const name of [
      '.envrc',
      '.mcp.json',
      'conch.config.json',
      'a/b/.vscode',
      '.claude',
      '.idea',
      'ex/.envrc',
      'repo/.git/hooks/pre-commit',
      'repo/.git/hooks/post-checkout',
      'repo/.git/hooks/pre-push',
      'repo2/.git/hooks/post-checkout',
    ])
      expect(existsSync(join(ws, name)), name).toBe(false);
    const refused = r.events.filter((e) => e.kind === 'refused').map((e) => (e as { path: string }).path);
    expect(refused).toContain(join(ws, '.envrc'));
    expect(refused).toContain(join(ws, 'repo', '.git', 'hooks', 'pre-commit'));
  });

  it("the agent's own .env is its own; a secret the host writes meanwhile is not", async () => {
    const ws = tempWorkspace();
    const marker = join(ws, 'host-wrote');
    const script = `
      cd ${ws}
      cp /dev/null .env.example; echo 'A=1' > .env; echo own_write=$?
      grep -q A=1 .env; echo own_read=$?
      while [ ! -e ${marker} ]; do sleep 0.05; done
      cat .env.production; echo host_read=$?
      grep -c SECRET .env.production; echo
      echo 'B=2' >> .env.production; echo host_write=$?
      mv .env .env.moved 2>/dev/null; echo own_move=$?
    `;
    const run = runGuarded(rulesFor(ws), script);
    for (let i = 0; i < 600 && !existsSync(join(ws, '.env')); i++)
      await new Promise((r) => setTimeout(r, 50));
    writeFileSync(join(ws, '.env.production'), 'SECRET=host\n');
    writeFileSync(marker, '');
    const r = await run.done;
    const s = statuses(r.stdout);
    expect(s).toMatchObject({ own_write: 0, own_read: 0, own_move: 0 });
    expect(s.host_write).not.toBe(0);
    expect(r.stdout).not.toContain('SECRET');
    expect(readFileSync(join(ws, '.env.production'), 'utf8')).toBe('SECRET=host\n');
  });

  it('O_PATH opens answer at once (the kernel cannot take one over ADDFD), and what they open stays judged', async () => {
    const ws = tempWorkspace();
    writeFileSync(join(ws, '.env'), 'SECRET=host\n');
    mkdirSync(join(ws, 'sub', 'dir'), { recursive: true });
    writeFileSync(join(ws, 'sub', 'dir', '.env.local'), 'SECRET=local\n');
    const py = (code: string) => `timeout -s KILL 20 python3 -c "import os; ${code}"`;
    const script = `
      cd ${ws}
      ${py("os.open('sub', os.O_PATH | os.O_DIRECTORY)")}; echo dir=$?
      ${py("os.open('sub/dir/.env.local', os.O_PATH | os.O_NOFOLLOW)")} 2>/dev/null; echo masked_path=$?
      ${py("fd = os.open('sub/dir', os.O_PATH | os.O_DIRECTORY); os.open('.env.local', os.O_RDONLY, dir_fd=fd)")} 2>/dev/null; echo from_dir=$?
      ${py("fd = os.open('sub', os.O_PATH); print(open('/proc/self/fd/%d/dir/.env.local' % fd).read())")} 2>/dev/null; echo via_proc=$?
      mv moved sub 2>/dev/null; echo mv_missing=$?
      realpath sub/dir >/dev/null; echo realpath=$?
    `;
    const r = await runGuarded(rulesFor(ws), script).done;
    const s = statuses(r.stdout);
    // none was killed by timeout (137): each call answered
    expect(s).toMatchObject({ dir: 0, realpath: 0, mv_missing: 1 });
    for (const k of ['masked_path', 'from_dir', 'via_proc']) expect(s[k], k).toBe(1);
    expect(r.stdout).not.toContain('SECRET');
  });

  it('a rule sent while the sandbox runs applies to the next call, without a restart', async () => {
    const ws = tempWorkspace();
    mkdirSync(join(ws, 'data'));
    writeFileSync(join(ws, 'data', 'keep.txt'), 'original\n');
    const go = join(ws, 'go');
    const script = `
      cd ${ws}
      echo before >> data/keep.txt; echo before=$?
      while [ ! -e ${go} ]; do sleep 0.05; done
      echo after >> data/keep.txt; echo after=$?
    `;
    const rules = rulesFor(ws);
    const run = runGuarded(rules, script);
    for (let i = 0; i < 600 && !readFileSync(join(ws, 'data', 'keep.txt'), 'utf8').includes('before'); i++)
      await new Promise((r) => setTimeout(r, 50));
    await run.update({ ...rules, readOnly: [join(ws, 'data')] });
    writeFileSync(go, '');
    const r = await run.done;
    expect(statuses(r.stdout)).toMatchObject({ before: 0 });
    expect(statuses(r.stdout).after).not.toBe(0);
    expect(readFileSync(join(ws, 'data', 'keep.txt'), 'utf8')).toBe('original\nbefore\n');
  });
});

maybe('rules that change while the sandbox is busy', () => {
  it('two hundred rule changes while a process opens a file in a loop: every one acknowledged, the last in force at once', async () => {
    // The guard judges opens on one thread and takes rule changes on another: a change swaps the
    // rules under a lock while opens are judged. Whatever the interleaving, the guard answers
    // every open, acknowledges every change, and once the last one (the file masked) is
    // acknowledged, no open of it succeeds.
    const ws = tempWorkspace();
    mkdirSync(join(ws, 'data'));
    const file = join(ws, 'data', 'keep.txt');
    writeFileSync(file, 'content\n');
    const started = join(ws, 'started');
    const go = join(ws, 'go');
    const loop = `
import json, os
reads = denied = 0
open(${JSON.stringify(started)}, 'w').close()
while not os.path.exists(${JSON.stringify(go)}):
    try:
        with open(${JSON.stringify(file)}) as f:
            f.read()
        reads += 1
    except OSError:
        denied += 1
final = []
for _ in range(20):
    try:
        open(${JSON.stringify(file)}).read()
        final.append('read')
    except OSError as e:
        final.append(e.errno)
print(json.dumps({'reads': reads, 'denied': denied, 'final': final}))
`;
    writeFileSync(join(ws, 'loop.py'), loop);
    const rules = rulesFor(ws);
    const run = runGuarded(rules, `python3 ${join(ws, 'loop.py')}`);
    for (let i = 0; i < 600 && !existsSync(started); i++) await new Promise((r) => setTimeout(r, 50));
    expect(existsSync(started)).toBe(true);
    const masked = { ...rules, masked: [...rules.masked, file] };
    const changes: Promise<void>[] = [];
    for (let i = 0; i < 200; i++) changes.push(run.update(i % 2 === 0 ? masked : rules));
    await Promise.all(changes);
    await run.update(masked);
    writeFileSync(go, '');
    const r = await run.done;
    const out = jsonLine<{ reads?: number; final?: (string | number)[] }>(r.stdout);
    expect(out.reads, `${r.stdout}\n${r.stderr}`).toBeGreaterThan(0);
    expect(out.final, r.stdout).toEqual(Array(20).fill(13)); // EACCES: a masked file
    expect(r.code).toBe(0);
  });
});

maybe('the sandbox cannot reach its init, its guard or its supervisor', () => {
  it('refuses ptrace, memory reads, pidfds, signals, /proc secrets, the keyring, io_uring and a second listener', async () => {
    const ws = tempWorkspace();
    // The script is the "supervisor" (the guard's direct child); the python it starts is the attacker.
    const attack = `
import ctypes, ctypes.util, errno, json, os, signal
libc = ctypes.CDLL(None, use_errno=True)
sup = os.getppid(); guard = 2; out = {}
def sc(name, nr, *args):
    r = libc.syscall(nr, *args)
    out[name] = 0 if r >= 0 else ctypes.get_errno()
X = os.uname().machine == 'x86_64'
NR = dict(ptrace=101 if X else 117, pidfd_open=434, process_vm_readv=310 if X else 270, kill=62 if X else 129,
          keyctl=250 if X else 219, add_key=248 if X else 217, io_uring_setup=425, seccomp=317 if X else 277,
          prlimit64=302 if X else 261, tkill=200 if X else 130)
for who, pid in (('sup', sup), ('guard', guard), ('init', 1)):
    sc('ptrace_' + who, NR['ptrace'], 16, pid, 0, 0)              # PTRACE_ATTACH
    sc('pidfd_' + who, NR['pidfd_open'], pid, 0)
    buf = ctypes.create_string_buffer(16)
    class iovec(ctypes.Structure): _fields_ = [('b', ctypes.c_void_p), ('l', ctypes.c_size_t)]
    l = iovec(ctypes.addressof(buf), 16); r = iovec(0x400000, 16)
    sc('vm_' + who, NR['process_vm_readv'], pid, ctypes.byref(l), 1, ctypes.byref(r), 1, 0)
    sc('prlimit_' + who, NR['prlimit64'], pid, 7, 0, 0)
for who, pid in (('guard', guard), ('all', -1), ('group', -guard)):
    sc('kill_' + who, NR['kill'], pid, 0)
sc('keyctl', NR['keyctl'], 0, -3, 0)                               # KEYCTL_GET_KEYRING_ID @s
sc('add_key', NR['add_key'], b'user', b'k', b'v', 1, -3)
sc('io_uring', NR['io_uring_setup'], 1, ctypes.create_string_buffer(120))
sc('listener', NR['seccomp'], 1, 8, 0)                              # SET_MODE_FILTER, NEW_LISTENER
for entry in ('mem', 'environ', 'fd/0', 'maps', ''):
    try:
        open('/proc/%d/%s' % (sup, entry), 'rb').read(1); out['proc_' + entry] = 0
    except OSError as e:
        out['proc_' + entry] = e.errno
out['stat_readable'] = int(len(open('/proc/%d/stat' % sup).read()) > 0)
print(json.dumps(out))
`;
    writeFileSync(join(ws, 'attack.py'), attack);
    const r = await runGuarded(rulesFor(ws), `python3 ${join(ws, 'attack.py')}; echo alive=$?`).done;
    const out = jsonLine<Record<string, number>>(r.stdout);
    expect(out.stat_readable, r.stderr).toBe(1);
    for (const [key, value] of Object.entries(out)) {
      if (key === 'stat_readable') continue;
      expect(value, `${key}: ${JSON.stringify(out)}`).not.toBe(0);
    }
    expect(r.stdout).toContain('alive=0');
  });

  it.each([
    ['in the sandbox', true],
    ['the guard alone (the filter is all that refuses: no namespace in between)', false],
  ])(
    'no thread of the guard can be signalled or stopped, %s: its main thread, its workers and the thread that takes notifications',
    async (_how, sandbox) => {
      const ws = tempWorkspace();
      // The guard is the supervisor's parent. Its threads' ids follow its own (it starts them before
      // anything else): each id whose Tgid is the guard's is one of its threads, and a tkill of
      // signal 0 (or SIGSTOP) must be refused for every one.
      const attack = `
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
X = os.uname().machine == 'x86_64'
TKILL, TGKILL = (200, 234) if X else (130, 131)
def tgid_of(tid):
    status = open('/proc/%d/status' % tid).read()
    return int(status.split('\\nTgid:')[1].split()[0])
def ppid_of(pid):
    return int(open('/proc/%d/stat' % pid).read().rsplit(') ', 1)[1].split()[1])
guard = ppid_of(os.getppid())
pid_max = int(open('/proc/sys/kernel/pid_max').read())
threads = []
for tid in range(guard, guard + 256):
    if tid >= pid_max:
        tid = 300 + tid - pid_max  # ids wrap past pid_max to 300 (the kernel's RESERVED_PIDS)
    try:
        if tgid_of(tid) == guard:
            threads.append(tid)
    except (OSError, IndexError, ValueError):
        pass
# No file is opened from here on: a stopped guard thread would hang the next open. A stop that
# went through is undone at once (SIGCONT), so a failure reports instead of hanging.
found = {}
for tid in threads:
    out = {}
    for name, args in (('tkill', (TKILL, tid, 0)), ('tgkill', (TGKILL, guard, tid, 0)), ('stop', (TKILL, tid, 19))):
        out[name] = 0 if libc.syscall(*args) >= 0 else ctypes.get_errno()
        if name == 'stop' and out[name] == 0:
            libc.syscall(TKILL, tid, 18)
    found[tid] = out
print(json.dumps(found))
`;
      writeFileSync(join(ws, 'threads.py'), attack);
      const r = await runGuarded(rulesFor(ws), `python3 ${join(ws, 'threads.py')}; echo alive=$?`, {
        sandbox,
      }).done;
      const found = jsonLine<Record<string, Record<string, number>>>(r.stdout);
      // The main thread, eight workers and the listener.
      expect(Object.keys(found).length, `${r.stdout}\n${r.stderr}`).toBeGreaterThanOrEqual(10);
      for (const [tid, out] of Object.entries(found)) {
        for (const [call, errno] of Object.entries(out))
          expect(errno, `${call} of guard thread ${tid}`).toBe(1); // EPERM
      }
      expect(r.stdout).toContain('alive=0');
    },
  );
});

maybe('ordinary work under the guard', () => {
  it('git, node, python, make, cc, FIFOs, process substitution, stdin and umask behave as without it', async () => {
    const ws = tempWorkspace();
    const script = `
      set -u
      cd ${ws}
      git init -q . && git -c user.email=a@b -c user.name=n commit -q --allow-empty -m init; echo git_init=$?
      echo 'console.log(21*2)' > a.js && git add a.js && git -c user.email=a@b -c user.name=n commit -qm a; echo git_commit=$?
      git branch feature && git tag v1 && echo '// more' >> a.js && git stash -q && git stash pop -q; echo git_more=$?
      node a.js | grep -q 42; echo node=$?
      python3 -c "import tempfile, os; f = tempfile.TemporaryFile(dir='.'); f.write(b'x'); f.seek(0); assert f.read() == b'x'"; echo py_tmpfile=$?
      python3 -c "import os; fd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o600); os.write(fd, b'x')"; echo o_tmpfile=$?
      printf 'all:\\n\\t@echo made > made.txt\\n' > Makefile && make -s && test -s made.txt; echo make=$?
      echo 'int main(void){return 0;}' > c.c && cc c.c -o c && ./c; echo cc=$?
      mkfifo p && (echo through > p &) && read line < p && [ "$line" = through ]; echo fifo=$?
      diff <(echo a) <(echo a) >/dev/null; echo procsub=$?
      echo piped | cat /dev/stdin | grep -q piped; echo stdin=$?
      (umask 077 && touch private.txt) && [ "$(stat -c %a private.txt)" = 600 ]; echo umask=$?
      ln -s a.js link.js && cat link.js >/dev/null && mv link.js link2.js; echo symlinks=$?
      mkdir -p d/e && rmdir d/e && rm -r d; echo dirs=$?
      chmod 755 a.js && truncate -s 0 made.txt; echo meta=$?
      cat /dev/tty 2>/dev/null </dev/null; echo tty=$?
      ls /proc/1/stat >/dev/null && ps -e >/dev/null; echo ps=$?
    `;
    const r = await runGuarded(rulesFor(ws), script).done;
    const s = statuses(r.stdout);
    expect(r.stderr).toBe('');
    const ok = [
      'git_init',
      'git_commit',
      'git_more',
      'node',
      'py_tmpfile',
      'o_tmpfile',
      'make',
      'cc',
      'fifo',
      'procsub',
      'stdin',
      'umask',
      'symlinks',
      'dirs',
      'meta',
      'ps',
    ];
    for (const key of ok) expect(s[key], `${key}\n${r.stdout}`).toBe(0);
    expect(s.tty).not.toBe(0); // no controlling terminal: ENXIO, as without the guard
    expect(statSync(join(ws, 'a.js')).mode & 0o777).toBe(0o755);
    // The repository the sandbox made is reported as written (plant candidates), its objects are not.
    const written = r.events.filter((e) => e.kind === 'written').map((e) => (e as { path: string }).path);
    expect(written).toContain(join(ws, '.git', 'config'));
    expect(written.some((p) => p.includes('/objects/'))).toBe(false);
    expect(
      execFileSync('git', ['-C', ws, 'log', '--oneline'], { encoding: 'utf8' }).split('\n').filter(Boolean),
    ).toHaveLength(2);
  });
});

maybe('directories the guard names the slow way', () => {
  // The guard names a directory by fchdir + getcwd; where that fails it falls back to readlink of
  // /proc/self/fd (native/conch_guard.c, real_path_of_fd). Each case here takes the fallback, and
  // must behave as the kernel does without the guard, protections included.
  it('a deleted cwd, a dirfd without search permission and a cwd deeper than PATH_MAX behave as without it', async () => {
    const ws = tempWorkspace();
    const deep = 'd'.repeat(200);
    const script = `
      cd ${ws}
      mkdir gone && cd gone && rmdir ../gone
      ls . >/dev/null 2>&1; echo gone_ls=$?
      (echo x > f) 2>/dev/null; echo gone_create=$?
      (echo x > .envrc) 2>/dev/null; echo gone_envrc=$?
      cd ${ws}
      mkdir -p locked/inner && echo hi > locked/inner/file && chmod 0600 locked
      python3 -c "
import os
fd = os.open('locked', os.O_RDONLY | os.O_DIRECTORY)
for name, flags in (('read', os.O_RDONLY), ('create', os.O_WRONLY | os.O_CREAT)):
    try:
        os.close(os.open('inner/file' if name == 'read' else 'new', flags, 0o644, dir_fd=fd)); print(f'locked_{name}=0')
    except OSError as e:
        print(f'locked_{name}={e.errno}')
"
      chmod 0700 locked
      for i in $(seq 24); do cd ${deep} || break; done
      [ $(pwd | wc -c) -gt 4096 ]; echo deep_cd=$?
      echo x > plain 2>/dev/null; echo deep_create=$?
      (echo x > .envrc) 2>/dev/null; echo deep_envrc=$?
      mkdir -p .git/hooks 2>/dev/null; (printf '#!/bin/sh\\n' > .git/hooks/pre-commit) 2>/dev/null; echo deep_hook=$?
      cd ${ws}/locked && echo x > .envrc 2>/dev/null; echo locked_envrc=$?
    `;
    // A tree deeper than PATH_MAX, made outside (one level at a time: no call takes the whole path).
    const deepTree = (root: string) =>
      execFileSync('bash', ['-c', `cd ${root} && for i in $(seq 24); do mkdir ${deep} && cd ${deep}; done`]);
    // The same script in bubblewrap's mounts alone, in a workspace of its own.
    const other = tempWorkspace();
    let guarded: Record<string, number>;
    let bare: Record<string, number>;
    try {
      deepTree(ws);
      guarded = statuses((await runGuarded(rulesFor(ws), script).done).stdout);
      deepTree(other);
      bare = statuses(
        (await runGuarded(rulesFor(other), script.replaceAll(ws, other), { noGuard: true }).done).stdout,
      );
    } finally {
      // rm descends by directory fd; node's rmSync (the temp dirs' cleanup) stops at PATH_MAX.
      execFileSync('rm', ['-rf', join(ws, deep), join(other, deep)]);
    }
    expect(guarded, JSON.stringify(guarded)).toHaveProperty('locked_envrc');
    for (const key of ['gone_ls', 'gone_create', 'locked_read', 'locked_create', 'deep_cd'])
      expect(guarded[key], `${key}: ${JSON.stringify(guarded)}`).toBe(bare[key]);
    // A deleted directory takes nothing, protected or not, as without the guard.
    expect(guarded.gone_create).not.toBe(0);
    expect(guarded.gone_envrc).not.toBe(0);
    // Protected names hold where the directory cannot be named by getcwd (deeper than PATH_MAX:
    // the guard cannot name it at all, so nothing is made there, deep_create included)...
    expect(guarded.deep_envrc).not.toBe(0);
    expect(guarded.deep_hook).not.toBe(0);
    // ...and where it was found the fast way after a chmod.
    expect(guarded.locked_envrc).not.toBe(0);
    expect(existsSync(join(ws, 'locked', '.envrc'))).toBe(false);
  });
});
