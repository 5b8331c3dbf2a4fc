#!/usr/bin/env node
// The conch demo agent: a terminal chat whose model runs shell commands through conch.
import 'reflect-metadata';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destination, pino } from 'pino';
import { Agent } from './agent.js';
import { ApprovalQueue } from './approvals.js';
import { parseDemoArgs, USAGE, type DemoArgs } from './args.js';
import { ChatController } from './chat.js';
import { runPlain } from './plain.js';
import { ProcessTracker } from './processes.js';
import { chooseModel, logSdkWarnings } from './providers.js';
import { rawModeGuard } from './raw-mode.js';
import { createDemoEnvironment, DEMO_AUTO_BACKGROUND_THRESHOLD, SITE_DIR } from './setup.js';

export const WALKTHROUGH_PROMPT = 'Walk me through what conch can do.';

async function main(): Promise<number> {
  let args: DemoArgs;
  try {
    args = parseDemoArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`conch-demo: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const plain = args.plain || !process.stdin.isTTY || !process.stdout.isTTY;

  // Logs (permission decisions, plugin warnings) go to a file: they never tear the screen or
  // mix with plain output. CONCH_LOG_LEVEL=debug for more.
  const logFile = process.env.CONCH_DEMO_LOG ?? join(tmpdir(), 'conch-demo.log');
  const logger = pino(
    { name: 'conch-demo', level: process.env.CONCH_LOG_LEVEL ?? 'info' },
    destination({ dest: logFile, sync: true, mkdir: true }),
  );
  logSdkWarnings(logger);

  // Where the walkthrough writes (the asked command's file, the browser's screenshot).
  const demoDir = process.env.CONCH_DEMO_DIR ?? '/tmp/conch-demo';
  let demo: Awaited<ReturnType<typeof createDemoEnvironment>>;
  try {
    demo = await createDemoEnvironment({
      cwd: process.cwd(),
      logger,
      screenshotDir: demoDir,
      siteDir: SITE_DIR,
      ...(args.config ? { configFile: args.config, trust: args.trust } : {}),
    });
  } catch (error) {
    process.stderr.write(`conch-demo: cannot set up conch: ${(error as Error).message}\n`);
    return 1;
  }
  const { env, registry } = demo;

  const choice = await chooseModel(process.env, {
    scripted: args.scripted,
    scriptedOptions: {
      autoBackgroundThreshold: demo.autoBackgroundThreshold ?? DEMO_AUTO_BACKGROUND_THRESHOLD,
      demoDir,
      siteDir: SITE_DIR,
    },
  });
  const approvals = new ApprovalQueue();
  const tracker = new ProcessTracker(registry);
  const agent = new Agent({ model: choice.model, registry, toolOptions: { approve: approvals.approve } });

  let shuttingDown: Promise<void> | undefined;
  const shutdown = () =>
    (shuttingDown ??= (async () => {
      approvals.denyAll();
      chat.cancel();
      // Processes, then the browser, then the registry and the temp dir (@conch/environment).
      await env.close().catch((error: unknown) => logger.error({ err: error }, 'closing the environment'));
      tracker.dispose();
    })());

  let openPager: (id: string, text: string) => void = () => {};
  let requestExit: () => void = () => {};
  const chat: ChatController = new ChatController({
    agent,
    tracker,
    approvals,
    onLogs: (id, text) => openPager(id, text),
    onExit: () => requestExit(),
  });

  // The terminal closing (SIGHUP, or EIO/EPIPE on a write) or a kill (SIGTERM) ends the app the
  // same clean way: dispose the registry, then exit. The listeners stay registered (not `once`):
  // a repeated signal must not fall through to the default action, which would kill the app
  // mid-dispose, and Ink's signal-exit re-raises a signal it believes nobody else handles.
  const exitOn = (code: number) => () => {
    void shutdown().finally(() => process.exit(code));
  };
  process.on('SIGTERM', exitOn(143));
  process.on('SIGHUP', exitOn(129));
  process.stdout.on('error', exitOn(129));
  process.stderr.on('error', exitOn(129));

  // Where commands run, said up front: the sandbox's mode, or that there is none here and why.
  const permission = (await registry.status()).permission as
    { sandbox?: string; sandboxReason?: string } | undefined;
  const sandboxNote = permission?.sandbox
    ? permission.sandbox === 'off'
      ? `sandbox: off (${permission.sandboxReason ?? 'not available'}): commands that are not provably read-only ask`
      : `sandbox: ${permission.sandbox}`
    : undefined;
  const notes = [
    ...(sandboxNote ? [sandboxNote] : []),
    `tools: ${registry
      .tools()
      .map((t) => t.name)
      .join(', ')}  ·  config: ${demo.source}  ·  cwd: ${registry.cwd}`,
    ...(env.browser
      ? [`browser: ${env.browser.version ?? 'Chrome'} headless (cdpUrl ${env.browser.cdpUrl})`]
      : []),
    ...(demo.missing.length ? [`not available, skipped: ${demo.missing.join(', ')}`] : []),
    `log: ${logFile}  ·  !help for process commands`,
  ];
  const initial = [
    ...(choice.scripted && !args.noWalkthrough ? [WALKTHROUGH_PROMPT] : []),
    ...(args.prompt ? [args.prompt] : []),
  ];

  if (plain) {
    let interrupts = 0;
    process.on('SIGINT', () => {
      interrupts += 1;
      if (interrupts === 1 && chat.cancel()) {
        process.stderr.write('\ncancelling: press Ctrl+C again to exit\n');
        return;
      }
      void shutdown().finally(() => process.exit(130));
    });
    let stopped = false;
    requestExit = () => {
      stopped = true;
    };
    chat.subscribe(() => {
      if (!chat.busy) interrupts = 0;
    });
    await runPlain({
      chat,
      approvals,
      header: [`conch demo agent · model: ${choice.label}`, ...notes],
      initial,
      yes: args.yes,
      input: process.stdin,
      output: process.stdout,
      shutdown,
      stopped: () => stopped,
    });
    return 0;
  }

  // Ink (and its layout engine) loads only for the full-screen UI.
  const { startTui } = await import('./ui.js');
  const app = startTui({
    chat,
    approvals,
    tracker,
    modelLabel: choice.label,
    scripted: choice.scripted,
    notes,
    initial,
    onExit: shutdown,
    registerPager: (open) => {
      openPager = open;
    },
  });
  requestExit = () => void shutdown().finally(() => app.unmount());
  // Raw mode re-asserted after whatever may have reset the terminal (a tool's child reaching
  // /dev/tty, an approval), and restored however the app exits.
  const raw = rawModeGuard(process.stdin);
  const reassert = () => setImmediate(() => raw.reassert());
  const offResult = registry.events.on('tool.result', reassert);
  const offExited = registry.events.on('process.exited', reassert);
  const offApprovals = approvals.subscribe(reassert);
  process.on('SIGCONT', reassert);
  process.on('exit', () => raw.restore());
  await app.waitUntilExit();
  for (const off of [offResult, offExited, offApprovals]) off();
  process.off('SIGCONT', reassert);
  raw.restore();
  await shutdown();
  process.stdout.write('bye: the registry is disposed and nothing it started is running.\n');
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`conch-demo: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exit(1);
  },
);
