// Invariant: in a pipe the app prints plain lines, runs the whole walkthrough for real, takes approval answers from stdin (or --yes), exits at end of input and leaves no process behind.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from './test-support/mock-model.js';
import { pngSize, processesMentioning, processesWithEnv } from './test-support/tmux.js';

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
    expect(code).toBe(0);
    expect(stdout).toContain('model: scripted demo model');
    expect(stdout).toMatch(/✓ cli_based_tool ok .*\n\s+apple\n\s+fig/);
    expect(stdout).toMatch(/→ background task \S+/);
    expect(stdout).toMatch(/status: completed/);
    expect(stdout).toContain('42');
    expect(stdout).toMatch(/⊘ cli_based_tool denied/);
    expect(stdout).toMatch(/\? conch asks to run: mkdir -p .*approved\.txt/);
    expect(stdout).toContain('(--yes)');
    expect(stdout).toContain('walkthrough complete');
    expect(existsSync(join(workDir!, 'demo-out', 'approved.txt'))).toBe(true);
    // The page served from a terminal background session was opened and screenshotted.
    expect(stdout).toMatch(/✓ browser_navigate ok .*\n\s+200 conch demo page/);
    expect(stdout).toContain(`Saved ${join(workDir!, 'demo-out', 'conch-demo.png')} (1280x800)`);
    expect(pngSize(join(workDir!, 'demo-out', 'conch-demo.png'))).toEqual({ width: 1280, height: 800 });
    // !ps after the walkthrough shows the browser with its CDP address, and the watcher running.
    expect(stdout).toMatch(
      /^p\d+\s+browser\s+CDP Ready\s+\d+\s+\S+\s+\[browser\] Chrome Headless\s+ws:\/\/127\.0\.0\.1:\d+\/devtools\/browser\/\S+$/m,
    );
    expect(stdout).toMatch(/^t\d+\s+terminal\s+background\s+\d+.*http\.server/m);
    expect(stdout).toMatch(/^\S+\s+background\s+running\s+\d+.*while true/m);
    await waitFor(() => processesWithEnv('CONCH_E2E_COOKIE', cookie).length === 0, 30_000, 'no process left');
    await waitFor(
      () => processesMentioning(join(workDir!, 'tmp', 'conch-env-')).length === 0,
      30_000,
      'no browser left',
    );
  }, 240_000);

  it('reads approval answers from stdin: "n" denies and the model is told', async () => {
    const { code, stdout } = await runApp(
      ['--no-walkthrough'],
      '$ touch refused.txt\nn\n$ echo after\n!exit\n$ echo never-read\n',
    );
    expect(code).toBe(0);
    expect(stdout).toContain('? conch asks to run: touch refused.txt');
    expect(stdout).toContain('→ deny');
    expect(stdout).toMatch(/Not run: Permission denied/);
    expect(existsSync(join(workDir!, 'refused.txt'))).toBe(false);
    expect(stdout).toMatch(/✓ cli_based_tool ok .*\n\s+after/);
    // !exit stops reading input.
    expect(stdout).not.toContain('never-read');
  }, 240_000);

  it('denies an approval at end of input and reports bad options', async () => {
    const denied = await runApp(['--no-walkthrough', '--prompt', '$ touch never.txt'], '');
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
