// Invariant: in a pipe the app prints plain lines, runs the whole walkthrough for real, takes approval answers from stdin (or --yes), exits at end of input and leaves no process behind.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processesMentioning, processesWithEnv, waitFor } from '@conch/test-support';
import { afterEach, describe, expect, it } from 'vitest';
import { pngSize } from './test-support/tmux.js';

const APP = resolve(dirname(fileURLToPath(import.meta.url)), '../dist/main.js');

let workDir: string | undefined;

afterEach(() => {
  if (workDir) rmSync(workDir, { recursive: true, force: true });
  workDir = undefined;
});

async function runApp(
  args: string[],
  stdin: string,
): Promise<{ code: number | null; stdout: string; stderr: string; cookie: string }> {
  if (!existsSync(APP)) throw new Error(`build the app first: ${APP} is missing`);
  workDir = mkdtempSync(join(tmpdir(), 'conch-demo-plain-'));
  const cookie = randomBytes(8).toString('hex');
  // The environment's temp dir (and so the browser's profile) under the work dir: Chromium's
  // children overwrite their environment block, so they are found by their command line instead.
  mkdirSync(join(workDir, 'tmp'));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TMPDIR: join(workDir, 'tmp'),
    CONCH_E2E_COOKIE: cookie,
    CONCH_DEMO_DIR: join(workDir, 'demo-out'),
    CONCH_DEMO_LOG: join(workDir, 'demo.log'),
    // The trash the terminal's rm moves files into ($XDG_DATA_HOME/conch/trash/…): in the work dir.
    XDG_DATA_HOME: join(workDir, 'data'),
  };
  for (const name of ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_API_KEY', 'CONCH_MODEL'])
    delete env[name];
  const child = spawn(process.execPath, [APP, ...args], {
    cwd: workDir,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdin.end(stdin);
  const code = await new Promise<number | null>((resolvePromise) => child.on('close', resolvePromise));
  return { code, stdout, stderr, cookie };
}

describe('plain mode', () => {
  it('runs the walkthrough with --yes and exits cleanly at end of input', async () => {
    const { code, stdout, stderr, cookie } = await runApp(['--yes'], '!ps\n');
    expect(stderr).toBe('');
    // The scripted model speaks the spec ai 7 calls natively: no SDK warning, not even in the log.
    expect(readFileSync(join(workDir!, 'demo.log'), 'utf8')).not.toContain('AI SDK warning');
    expect(code).toBe(0);
    expect(stdout).toContain('model: scripted demo model');
    // Where commands run is said in the header, and the narration matches it.
    expect(stdout).toContain('sandbox: workspace-write');
    expect(stdout).toContain('inside the sandbox');
    // Each tool line is followed by the result's one-line display.
    expect(stdout).toMatch(/✓ cli_based_tool ok .*\n\s+✓ exit=0 · fig\n/);
    expect(stdout).toContain('Sorted, first two: apple, fig.');
    expect(stdout).toMatch(/✓ cli_based_tool ok .*\n\s+background \S+ running\n/);
    expect(stdout).toMatch(/✓ check_background_task ok .*\n\s+✓ \S+ completed: ✓ exit=0 · build done\n/);
    expect(stdout).toContain('Python answered 42');
    // rm in the terminal moved the draft to the trash; the trash tool found it and put it back.
    // Writing and removing in the walkthrough's directory runs in the sandbox without a question.
    expect(stdout).not.toMatch(/\? conch asks to run: mkdir -p .*notes\.txt && rm /);
    expect(stdout).toMatch(/✓ trash ok .*\n\s+✓ trash: 1 entry matching notes\.txt\n/);
    expect(stdout).toMatch(/✓ trash ok .*\n\s+✓ restored .*notes\.txt\n/);
    expect(stdout).toContain('The file is back and reads "draft v1".');
    expect(readFileSync(join(workDir!, 'demo-out', 'notes.txt'), 'utf8')).toBe('draft v1\n');
    expect(stdout).toMatch(/⊘ cli_based_tool denied/);
    expect(stdout).toMatch(/\? conch asks to run: mkdir -p .*approved\.txt/);
    // The prompt says what the command will reach outside the sandbox (the gate's escalation.reaches).
    expect(stdout).toMatch(
      /\? conch asks to run: mkdir -p [^\n]*approved\.txt\n[^\n]*\n {2}outside the sandbox it will reach:\n {4}- writes anywhere[^\n]*\n {4}- the network[^\n]*\n {4}- your environment variables and secret files[^\n]*\n {4}- your other processes\n/,
    );
    expect(stdout).toContain('(--yes)');
    expect(stdout).toContain('walkthrough complete');
    expect(existsSync(join(workDir!, 'demo-out', 'approved.txt'))).toBe(true);
    // The page served from a terminal background session (started and waited for in one call)
    // was opened and screenshotted.
    expect(stdout).toMatch(/✓ terminal ok .*\n\s+.*session \S+ background/);
    expect(stdout).toMatch(/The server listens on port \d+\./);
    expect(stdout).toMatch(/✓ browser_navigate ok .*\n\s+200 conch demo page/);
    expect(stdout).toContain(`Saved ${join(workDir!, 'demo-out', 'conch-demo.png')} (1280x800)`);
    expect(pngSize(join(workDir!, 'demo-out', 'conch-demo.png'))).toEqual({ width: 1280, height: 800 });
    // !ps after the walkthrough shows the browser with its CDP address, and the watcher running.
    expect(stdout).toMatch(
      /^p\d+\s+browser\s+CDP Ready\s+\d+\s+\S+\s+\[browser\] Chrome Headless\s+ws:\/\/127\.0\.0\.1:\d+\/devtools\/browser\/\S+$/m,
    );
    expect(stdout).toMatch(/^t\d+\s+terminal\s+background\s+\d+.*http\.server/m);
    expect(stdout).toMatch(/^\S+\s+background\s+running\s+\d+.*while true/m);
    await waitFor(() => processesWithEnv('CONCH_E2E_COOKIE', cookie).length === 0, {
      what: 'no process left',
      timeoutMs: 30_000,
    });
    await waitFor(() => processesMentioning(join(workDir!, 'tmp', 'conch-env-')).length === 0, {
      what: 'no browser left',
      timeoutMs: 30_000,
    });
  }, 240_000);

  it('reads approval answers from stdin: "n" denies and the model is told', async () => {
    const { code, stdout } = await runApp(
      ['--no-walkthrough'],
      '$! touch refused.txt\nn\n$ echo after\n!exit\n$ echo never-read\n',
    );
    expect(code).toBe(0);
    expect(stdout).toContain('? conch asks to run: touch refused.txt');
    expect(stdout).toContain('→ deny');
    expect(stdout).toMatch(/Not run: Permission denied/);
    expect(existsSync(join(workDir!, 'refused.txt'))).toBe(false);
    expect(stdout).toMatch(/✓ cli_based_tool ok .*\n\s+✓ exit=0 · after\n/);
    // !exit stops reading input.
    expect(stdout).not.toContain('never-read');
  }, 240_000);

  it('denies an approval at end of input and reports bad options', async () => {
    const denied = await runApp(['--no-walkthrough', '--prompt', '$! touch never.txt'], '');
    expect(denied.code).toBe(0);
    expect(denied.stdout).toContain('(end of input: denied)');
    expect(existsSync(join(workDir!, 'never.txt'))).toBe(false);
    rmSync(workDir!, { recursive: true, force: true });

    const bad = await runApp(['--frobnicate'], '');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--frobnicate/);
    expect(bad.stderr).toContain('usage: conch-demo');
  }, 240_000);
});
