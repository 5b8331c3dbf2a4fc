// The terminal tool's five call shapes behave as the design says, with real programs under a real PTY.
import { existsSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { isAlive, processesMentioning, SCREEN_CASES, waitFor } from '@conch/test-support';
import { afterEach, describe, expect, it } from 'vitest';
import type { TerminalService } from './session-pool.js';
import { TERMINAL_SERVICE } from './tokens.js';
import { createHarness, type Harness } from './test-support/harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

describe('terminal tool', () => {
  it('keeps cwd and exported variables within a session', async () => {
    h = createHarness();
    const first = await h.call({ command: 'cd /tmp && export X=1' });
    expect(first).toEqual({ exit_code: 0, output: '', cwd: '/tmp', display: '✓ exit=0' });
    const second = await h.call({ command: 'pwd; echo $X' });
    expect(second).toEqual({ exit_code: 0, output: '/tmp\n1\n', cwd: '/tmp', display: '✓ exit=0 · 1' });
    const failing = await h.call({ command: 'ls /definitely-not-here' });
    expect(failing.exit_code).toBe(2);
    expect(failing.output).toContain('No such file');
  });

  it('applies per-call env for that call only', async () => {
    h = createHarness();
    await h.call({ command: 'export KEEP=kept' });
    const withEnv = await h.call({ command: 'echo "$ONLY-$KEEP"', env: { ONLY: 'once', KEEP: 'shadow' } });
    expect(withEnv.output).toBe('once-shadow\n');
    const after = await h.call({ command: 'echo "[${ONLY-unset}]-$KEEP"' });
    expect(after.output).toBe('[unset]-kept\n');
  });

  it('answers an input() prompt through input', async () => {
    h = createHarness();
    const waiting = await h.call({ command: `python3 -c "x=input('name? '); print('hi', x)"` });
    expect(waiting).toMatchObject({ state: 'waiting', output: 'name? ' });
    expect(typeof waiting.session_id).toBe('number');
    const done = await h.call({ session_id: waiting.session_id, input: 'bob\n' });
    expect(done.exit_code).toBe(0);
    expect(done.output).toContain('hi bob');
    expect(done.session_id).toBeUndefined();
  });

  it('detects a [Y/n] prompt without waiting the idle time', async () => {
    h = createHarness();
    // idle_ms is huge: only prompt detection can return this call before the timeout.
    const waiting = await h.call({
      command: `read -p 'Continue? [Y/n] ' answer; echo "answer=$answer"`,
      idle_ms: 600_000,
      timeout: 120,
    });
    expect(waiting).toMatchObject({ state: 'waiting', output: 'Continue? [Y/n] ' });
    const done = await h.call({ session_id: waiting.session_id, input: 'y\n' });
    expect(done).toMatchObject({ exit_code: 0 });
    expect(done.output).toContain('answer=y');
  });

  it('does not report an answered prompt again before the program prints anything', async () => {
    h = createHarness();
    // read -s: the answer is not echoed, so the prompt stays the output's last line while the
    // program works on the answer.
    const waiting = await h.call({ command: `read -r -s -p 'password: ' p; sleep 1.5; echo "len=\${#p}"` });
    expect(waiting).toMatchObject({ state: 'waiting', output: 'password: ' });
    const done = await h.call({ session_id: waiting.session_id, input: 'hunter2\n' });
    expect(done).toMatchObject({ exit_code: 0 });
    expect(done.output).toContain('len=7');
  });

  it('returns waiting quickly when a program reads the terminal without a prompt', async () => {
    h = createHarness();
    // idle_ms is huge: only the kernel's view (blocked in read on the tty) can return this early.
    const waiting = await h.call({ command: 'grep needle', idle_ms: 600_000, timeout: 120 });
    expect(waiting).toMatchObject({ state: 'waiting', output: '' });
    const done = await h.call({ session_id: waiting.session_id, input: 'hay\nneedle here\n\u0004' });
    expect(done).toMatchObject({ exit_code: 0 });
    expect(done.output).toContain('needle here');
    const read = await h.call({
      command: 'sleep 1; read line; echo "got $line"',
      idle_ms: 600_000,
      timeout: 120,
    });
    expect(read).toMatchObject({ state: 'waiting' });
    expect(await h.call({ session_id: read.session_id, input: 'x\n' })).toMatchObject({
      output: 'x\ngot x\n',
    });
  });

  it('returns waiting after idle_ms of silence and polls with input ""', async () => {
    h = createHarness();
    const waiting = await h.call({ command: 'echo start; sleep 1.5; echo end', idle_ms: 300 });
    expect(waiting).toMatchObject({ state: 'waiting', output: 'start\n' });
    const done = await waitFor(async () => {
      const r = await h!.call({ session_id: waiting.session_id, input: '', idle_ms: 300 });
      return r.exit_code === 0 ? r : undefined;
    });
    expect(done.output).toBe('end\n');
  });

  it('runs a server in background and kills it with its children', async () => {
    h = createHarness();
    const tag = `conch-bg-${randomBytes(4).toString('hex')}`;
    const started = await h.call({
      command: `(exec -a ${tag}-child sleep 300) & setsid bash -c 'exec -a ${tag}-escapee sleep 300' & python3 -m http.server 0 --bind 127.0.0.1`,
      background: true,
    });
    expect(started).toMatchObject({ state: 'background' });
    expect(started.output).toMatch(/Serving HTTP on 127\.0\.0\.1 port \d+/);
    const pids = await waitFor(() => {
      const found = processesMentioning(tag);
      return found.length === 2 ? found : undefined;
    });
    const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    const info = service.list().find((s) => s.id === started.session_id);
    expect(info).toMatchObject({ state: 'background' });
    expect(info?.lastLine).toMatch(/Serving HTTP/);
    const killed = await h.call({ session_id: started.session_id, kill: true });
    expect(killed).toMatchObject({ killed: true });
    for (const pid of [...pids, info!.pid]) expect(isAlive(pid)).toBe(false);
    expect(processesMentioning(tag)).toEqual([]);
    expect(service.list().find((s) => s.id === started.session_id)).toBeUndefined();
    const gone = await h.call({ session_id: started.session_id, input: '' });
    expect(gone.error).toMatch(/not a live terminal session/);
  });

  it('returns the exit of a background command that crashes at startup', async () => {
    h = createHarness();
    const crashed = await h.call({
      command: 'echo booting; exit_code_7() { return 7; }; exit_code_7',
      background: true,
    });
    expect(crashed).toEqual({
      exit_code: 7,
      output: 'booting\n',
      cwd: expect.any(String),
      display: '✗ exit=7 · booting',
    });
  });

  it('caps a 100k-char line and collapses a \\r progress bar, spilling the full output', async () => {
    h = createHarness();
    const long = await h.call({ command: `python3 -c "print('x' * 100000); print('after')"` });
    expect(long.exit_code).toBe(0);
    expect(String(long.output).length).toBeLessThanOrEqual(4000);
    expect(long.output).toContain('after');
    expect(long.output).toMatch(/line cut: 99500 more chars/);
    expect(typeof long.output_file).toBe('string');
    const full = readFileSync(String(long.output_file), 'utf8');
    expect(full).toContain('x'.repeat(100000));

    const bar = await h.call({
      command: `for i in 10 50 100; do printf '\\rprogress %3d%%' $i; sleep 0.05; done; printf '\\n'; printf 'abc\\b\\bX\\n'`,
    });
    expect(bar.output).toBe('progress 100%\naXc\n');
    expect(bar.output_file).toBeUndefined();

    const many = await h.call({ command: 'seq 1 5000' });
    expect(String(many.output).length).toBeLessThanOrEqual(4000);
    expect(many.output).toMatch(/^1\n2\n/);
    expect(many.output).toMatch(/4999\n5000\n$/);
    expect(readFileSync(String(many.output_file), 'utf8').split('\n')).toHaveLength(5001);
  });

  it('names each session failure with its error_code and a display', async () => {
    h = createHarness({ maxSessions: 1 });
    const unknown = await h.call({ session_id: 99, input: 'x' });
    expect(unknown).toMatchObject({
      error_code: 'UNKNOWN_SESSION',
      display: expect.stringMatching(/^✗ UNKNOWN_SESSION: /),
    });
    const server = await h.call({ command: 'sleep 300', background: true });
    expect(server).toMatchObject({
      state: 'background',
      display: `… session ${server.session_id} background`,
    });
    const busy = await h.call({ session_id: server.session_id, command: 'echo again' });
    expect(busy).toMatchObject({
      error_code: 'SESSION_BUSY',
      display: expect.stringMatching(/^✗ SESSION_BUSY: /),
    });
    const full = await h.call({ command: 'echo another' });
    expect(full).toMatchObject({ error_code: 'POOL_FULL', display: expect.stringMatching(/^✗ POOL_FULL: /) });
    const killed = await h.call({ session_id: server.session_id, kill: true });
    expect(killed.display).toBe(`■ session ${server.session_id} killed`);
    expect(await h.call({ command: 'echo free' })).toMatchObject({
      exit_code: 0,
      display: '✓ exit=0 · free',
    });
  });

  // cli_based_tool's test runs the same table: one rendering of progress output in both tools.
  it.each(SCREEN_CASES)('renders $name as a terminal shows it', async ({ printf, screen }) => {
    h = createHarness();
    const r = await h.call({ command: `printf '${printf}'` });
    expect(String(r.output).replace(/\n$/, '')).toBe(screen);
  });

  it('runs multi-line commands and heredocs verbatim', async () => {
    h = createHarness();
    const result = await h.call({
      command: [
        'name=world',
        "cat <<'EOF'",
        'literal $name "quotes" !bang',
        'EOF',
        'cat <<EOF',
        'hello $name',
        'EOF',
        'if true; then',
        '  echo multi-line',
        'fi',
      ].join('\n'),
    });
    expect(result).toMatchObject({
      exit_code: 0,
      output: 'literal $name "quotes" !bang\nhello world\nmulti-line\n',
    });
    const broken = await h.call({ command: 'echo "unclosed' });
    expect(broken.exit_code).not.toBe(0);
    const still = await h.call({ command: 'echo alive' });
    expect(still).toMatchObject({ exit_code: 0, output: 'alive\n' });
  });

  it('kills a session mid-command, and a late input never runs as a command', async () => {
    h = createHarness();
    const marker = `${h.root}/should-not-exist`;
    // A tag of its own: other test files run `sleep 300` in their sessions at the same time.
    const tag = `conch-midkill-${process.pid}`;
    const waiting = await h.call({ command: `(exec -a ${tag} sleep 300)`, idle_ms: 200 });
    expect(waiting).toMatchObject({ state: 'waiting' });
    const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    const shellPid = service.list()[0]!.pid;
    const sleeps = processesMentioning(tag);
    expect(sleeps.length).toBeGreaterThan(0);
    const killed = await h.call({ session_id: waiting.session_id, kill: true });
    expect(killed).toMatchObject({ killed: true });
    expect(isAlive(shellPid)).toBe(false);
    for (const pid of sleeps) expect(isAlive(pid)).toBe(false);

    // A program that prompts but never reads stdin: whether the input lands while it still runs or
    // after it exited, the shell's gate discards it, so it can never run as a command.
    const quick = await h.call({ command: `printf 'name? '; sleep 1`, idle_ms: 100_000 });
    expect(quick).toMatchObject({ state: 'waiting' });
    const late = await h.call({ session_id: quick.session_id, input: `touch ${marker}\n` });
    expect(late.exit_code).toBe(0);
    const next = await h.call({ command: 'echo next' });
    expect(next.output).toBe('next\n');
    expect(existsSync(marker)).toBe(false);
  });

  it('interrupts a running program with Ctrl-C sent as input and keeps the shell', async () => {
    h = createHarness();
    const waiting = await h.call({ command: 'echo before; sleep 300; echo not-reached', idle_ms: 300 });
    expect(waiting).toMatchObject({ state: 'waiting', output: 'before\n' });
    const stopped = await h.call({ session_id: waiting.session_id, input: '\u0003' });
    expect(stopped).toMatchObject({ exit_code: 130 });
    expect(stopped.output).not.toContain('not-reached');
    expect(await h.call({ command: 'echo still-here' })).toMatchObject({
      exit_code: 0,
      output: 'still-here\n',
    });
  });

  it('survives an output flood and keeps every line in the spill file', async () => {
    h = createHarness();
    const flood = await h.call({ command: 'seq 1 1000000', timeout: 120 });
    expect(flood.exit_code).toBe(0);
    expect(String(flood.output).length).toBeLessThanOrEqual(4000);
    expect(flood.output).toMatch(/999999\n1000000\n$/);
    const full = readFileSync(String(flood.output_file), 'utf8');
    expect(full.startsWith('1\n2\n3\n')).toBe(true);
    expect(full.split('\n')).toHaveLength(1_000_001);
  });

  it('reports a cwd that does not exist as a failed command', async () => {
    h = createHarness();
    const result = await h.call({ command: 'pwd', cwd: '/definitely/not/here' });
    expect(result.exit_code).toBe(1);
    expect(result.output).toMatch(/No such file or directory/);
  });

  it('returns clear errors for bad call shapes', async () => {
    h = createHarness();
    expect((await h.call({ input: 'y\n' })).error).toMatch(/input needs session_id/);
    expect((await h.call({ session_id: 42, input: '' })).error).toMatch(
      /session_id 42 is not a live terminal session \(live: none\)/,
    );
    expect((await h.call({ kill: true })).error).toMatch(/kill: true needs session_id/);
    expect((await h.call({ command: 'ls', input: 'x' })).error).toMatch(
      /command and input cannot be combined/,
    );
    expect((await h.call({ command: '  ' })).error).toMatch(/command: expected a shell command/);
    expect((await h.call({ command: 'ls', env: { 'BAD-NAME': '1' } })).error).toMatch(
      /env: expected variable names/,
    );
    expect((await h.call({})).error).toMatch(/give a command/);
    expect((await h.call({ session_id: 1 })).error).toMatch(/without input or kill/);
    await expect(h.call({ command: 'ls', timeout: 1e12 })).rejects.toThrow(/timeout/);
  });

  it('never hands a busy shell a second command and bounds the pool', async () => {
    h = createHarness({ maxSessions: 2 });
    const a = await h.call({ command: 'cd /tmp; sleep 300', idle_ms: 200 });
    expect(a).toMatchObject({ state: 'waiting' });
    const b = await h.call({ command: 'pwd' });
    expect(b).toMatchObject({ exit_code: 0 });
    const busy = await h.call({ command: 'echo x', session_id: a.session_id });
    expect(busy.error).toMatch(/is busy/);
    const c = await h.call({ command: 'sleep 300', idle_ms: 200 });
    expect(c).toMatchObject({ state: 'waiting' });
    const full = await h.call({ command: 'echo third' });
    expect(full.error).toMatch(/all 2 terminal sessions are busy/);
  });

  it('leaves nothing running after dispose with live sessions', async () => {
    h = createHarness();
    const tag = `conch-dispose-${randomBytes(4).toString('hex')}`;
    await h.call({ command: `(exec -a ${tag} sleep 300)`, background: true });
    await h.call({ command: `(setsid bash -c 'exec -a ${tag}-b sleep 300' &); python3 -c "input('? ')"` });
    await h.call({ command: 'echo idle-shell' });
    const service = h.registry.resolve<TerminalService>(TERMINAL_SERVICE);
    const shells = service.list().map((s) => s.pid);
    expect(shells.length).toBe(3);
    await waitFor(() => processesMentioning(tag).length === 2);
    await h.dispose();
    h = undefined;
    expect(processesMentioning(tag)).toEqual([]);
    for (const pid of shells) expect(isAlive(pid)).toBe(false);
  });
});
