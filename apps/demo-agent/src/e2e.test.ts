// Invariant: the real app, driven in tmux like a person would, completes the scripted walkthrough for real (approvals answered, sudo denied, a file removed by rm restored from the trash, a served page waited for and screenshotted by the browser), !ps shows the browser and the background task, !kill ends it, and after exit no child remains.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { descendants, isAlive, processesMentioning, processesWithEnv, waitFor } from '@conch/test-support';
import { afterEach, describe, expect, it } from 'vitest';
import { commandDescendantsOf, hasTmux, pngSize, TmuxSession } from './test-support/tmux.js';

const APP = resolve(dirname(fileURLToPath(import.meta.url)), '../dist/main.js');
// Provider keys would pick a real model; CI=true would make Ink print only the last frame.
const PROVIDER_VARS = ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_API_KEY', 'CONCH_MODEL', 'CI'];

let session: TmuxSession | undefined;
let workDir: string | undefined;

afterEach(() => {
  session?.kill();
  session = undefined;
  if (workDir) rmSync(workDir, { recursive: true, force: true });
  workDir = undefined;
});

/**
 * The live part of the screen: the bottom lines, where prompts and the input line are (24: a prompt
 * for a command leaving the sandbox also lists what it will reach there).
 */
function bottom(screen: string, lines = 24): string {
  return screen.trimEnd().split('\n').slice(-lines).join('\n');
}

function startApp(cookie: string, extraArgs = '', config?: unknown): TmuxSession {
  if (!hasTmux()) throw new Error('tmux is required for the end-to-end test (apt-get install -y tmux)');
  if (!existsSync(APP)) throw new Error(`build the app first: ${APP} is missing`);
  workDir = mkdtempSync(join(tmpdir(), 'conch-demo-e2e-'));
  if (config) {
    writeFileSync(join(workDir, 'conch.config.json'), JSON.stringify(config, null, 2));
    extraArgs += ' --config conch.config.json';
  }
  const unset = PROVIDER_VARS.map((v) => `-u ${v}`).join(' ');
  // The environment's temp dir (the browser profile) under the work dir, to find Chromium by it.
  mkdirSync(join(workDir, 'tmp'));
  return new TmuxSession(`exec env ${unset} node ${APP} ${extraArgs}`, {
    cwd: workDir,
    env: {
      TMPDIR: join(workDir, 'tmp'),
      CONCH_E2E_COOKIE: cookie,
      CONCH_DEMO_DIR: join(workDir, 'demo-out'),
      CONCH_DEMO_LOG: join(workDir, 'demo.log'),
      // The trash the terminal's rm moves files into ($XDG_DATA_HOME/conch/trash/…): in the work dir.
      XDG_DATA_HOME: join(workDir, 'data'),
      TERM: 'xterm-256color',
    },
  });
}

/**
 * Answers the prompt on screen as a person would: after it has appeared (the app ignores keys
 * pressed in its first 300 ms, typeahead), then waits for it to close.
 */
async function answerPrompt(tmux: TmuxSession, answer: string): Promise<void> {
  for (let attempt = 0; attempt < 5; attempt++) {
    await new Promise((r) => setTimeout(r, 600));
    tmux.type(answer, false);
    try {
      await tmux.waitForScreen((s) => !/\[y\]es once/.test(bottom(s)), 'the prompt to close', 5_000);
      return;
    } catch {
      // not taken yet (e.g. a slow render under load): press again
    }
  }
  throw new Error(`the approval prompt did not take the answer '${answer}'; screen:\n${tmux.screen()}`);
}

/** Answers every approval prompt with `answer` until `done(screen)`; returns the prompts seen. */
async function answerPromptsUntil(
  tmux: TmuxSession,
  done: (screen: string) => boolean,
  answer: string,
  what: string,
  timeoutMs = 150_000,
): Promise<string[]> {
  const prompts: string[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const screen = tmux.screen();
    if (done(screen)) return prompts;
    const live = bottom(screen);
    if (/conch asks: allow/.test(live) && /\[y\]es once/.test(live)) {
      const command = /conch asks: allow[^\n]*\n[│| ]*([^\n│]+)/.exec(live)?.[1]?.trim() ?? '?';
      prompts.push(command);
      await answerPrompt(tmux, answer);
      continue;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; screen:\n${screen}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Waits until no turn is running (the footer stops offering to cancel one). */
async function waitIdle(tmux: TmuxSession): Promise<void> {
  await tmux.waitForScreen((s) => !bottom(s, 3).includes('cancel the running tool'), 'the turn to end');
}

describe('demo agent in tmux', () => {
  it('walks through, shows and kills the background task, and leaves nothing running', async () => {
    const cookie = randomBytes(8).toString('hex');
    session = startApp(cookie);
    const tmux = session;
    const appPid = tmux.panePid();

    await tmux.waitForScreen((s) => s.includes('scripted demo model'), 'the header', 60_000);
    const prompts = await answerPromptsUntil(
      tmux,
      (s) => s.includes('walkthrough complete'),
      'y',
      'the walkthrough to complete',
    );
    let screen = tmux.screen();
    // The asked command was approved and really ran.
    expect(prompts.some((p) => p.includes('approved.txt'))).toBe(true);
    expect(existsSync(join(workDir!, 'demo-out', 'approved.txt'))).toBe(true);
    // Every step really ran: the pipeline's output, the promoted build, python's answer, the refusal.
    expect(screen).toContain('apple');
    expect(screen).toMatch(/background task \S+/);
    expect(screen).toContain('Python answered 42');
    // rm moved the draft to the trash, in the sandbox without a question, and it is back.
    expect(prompts.some((p) => p.includes("printf 'draft v1"))).toBe(false);
    expect(screen).toContain('The file is back and reads "draft v1".');
    expect(readFileSync(join(workDir!, 'demo-out', 'notes.txt'), 'utf8')).toBe('draft v1\n');
    // The server was started and waited for in one call.
    expect(screen).toMatch(/The server listens on port \d+\./);
    expect(screen).toMatch(/⊘ cli_based_tool/);
    expect(screen).not.toMatch(/steps skipped/);
    // The page served from a terminal background session, opened in the browser and screenshotted.
    const shot = join(workDir!, 'demo-out', 'conch-demo.png');
    expect(screen).toContain(`Saved ${shot} (1280x800)`);
    expect(pngSize(shot)).toEqual({ width: 1280, height: 800 });
    // The process panel shows the browser with its CDP address.
    expect(screen).toMatch(/\[p\d+\] \[browser\] Chrome Headless browser · pid \d+ · CDP Ready/);
    expect(screen).toMatch(/› ws:\/\/127\.0\.0\.1:\d+\/devtools\/browser\//);
    // (By the environment's temp dirs: the tmux server's own command line names TMPDIR.)
    const envTemp = join(workDir!, 'tmp', 'conch-env-');
    expect(processesMentioning(envTemp).length).toBeGreaterThan(1);

    // !ps lists the browser with its CDP address and the watcher as a running background task.
    tmux.type('!ps');
    await tmux.waitForScreen(
      (s) => /^p\d+\s+browser\s+CDP Ready\s+\d+.*\[browser\] Chrome Headless\s+ws:\/\//m.test(s),
      '!ps to show the browser',
    );
    screen = await tmux.waitForScreen(
      (s) => /^\S+\s+background\s+running\s+\d+.*while true/m.test(s),
      '!ps to show the watcher',
    );
    const row = /^(\S+)\s+background\s+running\s+(\d+).*while true/m.exec(screen)!;
    const [, taskId, pidText] = row;
    const watcherPid = Number(pidText);
    expect(isAlive(watcherPid)).toBe(true);

    // !logs pages its output; q closes the pager.
    tmux.type(`!logs ${taskId}`);
    await tmux.waitForScreen((s) => new RegExp(`!logs ${taskId} lines`).test(s), 'the pager');
    tmux.type('q', false);
    await tmux.waitForScreen((s) => /Processes/.test(bottom(s, 30)), 'the pager to close');

    // !kill ends it: the task is no longer running and its process is gone.
    tmux.type(`!kill ${taskId}`);
    await tmux.waitForScreen((s) => s.includes(`killed background task ${taskId}`), '!kill to confirm');
    await waitFor(() => !isAlive(watcherPid), { what: 'the watcher to die', timeoutMs: 30_000 });
    tmux.type('!ps');
    await tmux.waitForScreen(
      (s) => new RegExp(`^${taskId}\\s+background\\s+(cancelled|failed|completed)`, 'm').test(s),
      '!ps to show the task ended',
    );

    // Leave another command running in the background, then exit: dispose must end it too.
    tmux.type('$ sleep 300');
    await answerPromptsUntil(
      tmux,
      (s) => /running in the background as/.test(s),
      'y',
      'sleep to be backgrounded',
    );
    expect(processesWithEnv('CONCH_E2E_COOKIE', cookie).length).toBeGreaterThan(1);

    await waitIdle(tmux);
    tmux.key('C-c');
    await tmux.waitForScreen((s) => s.includes('bye: the registry is disposed'), 'a clean exit', 60_000);
    await waitFor(() => tmux.paneDead(), { what: 'the app to exit', timeoutMs: 30_000 });
    await waitFor(() => processesWithEnv('CONCH_E2E_COOKIE', cookie).length === 0, {
      what: 'no process with the cookie to remain',
      timeoutMs: 30_000,
    });
    expect(descendants(appPid)).toEqual([]);
    // Chromium's children overwrite their environment block (no cookie to find): by the profile's path.
    await waitFor(() => processesMentioning(envTemp).length === 0, {
      what: 'no browser left',
      timeoutMs: 30_000,
    });
    expect(readFileSync(join(workDir!, 'demo.log'), 'utf8')).not.toMatch(/"level":(50|60)/);
  }, 400_000);

  it('an approval answered "n" is denied and the model is told', async () => {
    const cookie = randomBytes(8).toString('hex');
    session = startApp(cookie, '--no-walkthrough');
    const tmux = session;
    await tmux.waitForScreen((s) => s.includes('scripted demo model'), 'the header', 60_000);
    tmux.type(`$! touch ${join(workDir!, 'not-allowed.txt')}`);
    await tmux.waitForScreen((s) => /conch asks: allow/.test(bottom(s)), 'the approval prompt');
    await answerPrompt(tmux, 'n');
    await tmux.waitForScreen((s) => /Not run: Permission denied/.test(s), 'the denial to reach the model');
    expect(existsSync(join(workDir!, 'not-allowed.txt'))).toBe(false);
    await waitIdle(tmux);
    tmux.key('C-c');
    await waitFor(() => tmux.paneDead(), { what: 'the app to exit', timeoutMs: 60_000 });
    await waitFor(() => processesWithEnv('CONCH_E2E_COOKIE', cookie).length === 0, {
      what: 'no process left',
      timeoutMs: 30_000,
    });
  }, 300_000);

  it('with --config, Ctrl+C cancels a running command and kills its tree; a second Ctrl+C exits', async () => {
    const cookie = randomBytes(8).toString('hex');
    session = startApp(cookie, '--no-walkthrough', {
      plugins: {
        permission: { mode: 'acceptAll' },
        cli: { autoBackgroundThreshold: 600 },
        background: {},
      },
    });
    const tmux = session;
    const appPid = tmux.panePid();
    await tmux.waitForScreen(
      (s) => s.includes('config: conch.config.json'),
      'the header naming the config',
      60_000,
    );
    tmux.type(`$ sh -c 'sleep 300 & sleep 300; wait'`);
    await tmux.waitForScreen(
      (s) => /cli_based_tool sh -c .* running \d/.test(s),
      'the spinner with elapsed time',
    );
    // The command's tree: not the registry's process supervisor, which lives until the app exits.
    await waitFor(() => commandDescendantsOf(appPid).length >= 3, {
      what: 'the shell and both sleeps',
      timeoutMs: 30_000,
    });
    const tree = commandDescendantsOf(appPid);

    tmux.key('C-c');
    await tmux.waitForScreen((s) => s.includes('cancelled: the running tool'), 'the cancel notice');
    await waitFor(() => tree.every((pid) => !isAlive(pid)), {
      what: 'the command tree to die',
      timeoutMs: 30_000,
    });
    expect(commandDescendantsOf(appPid)).toEqual([]);
    expect(tmux.paneDead()).toBe(false);

    tmux.key('C-c');
    await waitFor(() => tmux.paneDead(), { what: 'the app to exit', timeoutMs: 60_000 });
    await waitFor(() => processesWithEnv('CONCH_E2E_COOKIE', cookie).length === 0, {
      what: 'no process left',
      timeoutMs: 30_000,
    });
  }, 300_000);

  it('closing the terminal (SIGHUP) disposes the registry too: no background task survives', async () => {
    const cookie = randomBytes(8).toString('hex');
    session = startApp(cookie, '--no-walkthrough');
    const tmux = session;
    await tmux.waitForScreen((s) => s.includes('scripted demo model'), 'the header', 60_000);
    tmux.type('$ while true; do date +%T; sleep 1; done');
    await tmux.waitForScreen((s) => /running in the background as/.test(s), 'the loop to be backgrounded');
    expect(processesWithEnv('CONCH_E2E_COOKIE', cookie).length).toBeGreaterThan(1);
    tmux.kill();
    session = undefined;
    await waitFor(() => processesWithEnv('CONCH_E2E_COOKIE', cookie).length === 0, {
      what: 'no process left',
      timeoutMs: 30_000,
    });
  }, 300_000);
});
