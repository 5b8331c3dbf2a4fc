import { z } from 'zod';

/**
 * `idle_ms` values at or above this disable the idle return, like `idle_ms: 0` (the reference
 * terminal's sentinel, DISABLED_IDLE_MS).
 */
export const DISABLED_IDLE_MS = 10_000_000;

/** The terminal plugin's config (`registry.exposeTool('terminal', config)`); snake_case keys work too. */
export const terminalConfigSchema = z.strictObject({
  shell: z
    .string()
    .min(1)
    .optional()
    .describe('login shell to run; default $SHELL when it is bash, else /bin/bash'),
  shellArgs: z
    .array(z.string())
    .default(['-l', '-i'])
    .describe('arguments of the shell: login + interactive so rc files (nvm, mise, pyenv) load'),
  maxSessions: z.number().int().min(1).max(64).default(8).describe('live sessions at most'),
  idleSessionTtlMs: z
    .number()
    .int()
    .min(1000)
    .default(10 * 60_000)
    .describe('an idle shell unused this long is closed'),
  defaultTimeout: z
    .number()
    .positive()
    .max(24 * 3600)
    .default(60)
    .describe('seconds a call waits for its command before returning the session_id'),
  defaultIdleMs: z
    .number()
    .int()
    .min(50)
    .default(20_000)
    .describe(
      "silence after which a running command is reported as waiting for input (measured: silent tsc/eslint runs take up to 18 s here; the reference terminal's 10 000 is SEED_TERMINAL_CONFIG.defaultIdleMs)",
    ),
  promptQuietMs: z
    .number()
    .int()
    .min(10)
    .default(300)
    .describe('silence after which a recognised prompt (password:, [Y/n], >>> ...) returns'),
  backgroundCollectMs: z
    .number()
    .int()
    .min(0)
    .default(2000)
    .describe('startup output collected for background: true'),
  pollQuietMs: z
    .number()
    .int()
    .min(10)
    .default(1000)
    .describe('silence after which a poll of a background session returns'),
  maxOutputChars: z.number().int().min(200).default(4000).describe('characters of output returned per call'),
  overflowPreviewChars: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe(
      "when set, output over maxOutputChars shows its first N characters and a notice (the reference terminal's 3800) instead of the default head and tail",
    ),
  maxLineChars: z.number().int().min(20).default(500).describe('characters kept of one line'),
  maxBufferChars: z
    .number()
    .int()
    .min(10_000)
    .default(8_000_000)
    .describe('raw characters of one command kept in memory (the session log keeps all)'),
  maxLogBytes: z
    .number()
    .int()
    .min(1024)
    .default(64 * 1024 * 1024)
    .describe('bytes a session log may grow to'),
  cols: z.number().int().min(20).max(1000).default(160),
  rows: z.number().int().min(5).max(500).default(40),
  startupTimeoutMs: z
    .number()
    .int()
    .min(100)
    .default(20_000)
    .describe(
      'time a starting login shell may go without progress (CPU time, a new process or output of its rc files, or of another shell starting beside it) before it is taken for stuck and killed; a slow rc file or a slow machine is progress, not a stall',
    ),
  startupMaxMs: z
    .number()
    .int()
    .min(100)
    .default(300_000)
    .describe('time a login shell may take to start at most, however busy its rc files keep it'),
  commandStartTimeoutMs: z
    .number()
    .int()
    .min(100)
    .default(10_000)
    .describe(
      "time a typed command's shell may go without progress before printing its begin marker; a shell that stalls that long (its protocol was broken) is killed",
    ),
  killGraceMs: z.number().int().min(0).default(2000).describe('SIGTERM to SIGKILL grace on kill'),
  safeRm: z
    .boolean()
    .default(true)
    .describe(
      "every session defines an rm function that moves its operands into the project's trash instead of deleting them (exposes the 'trash' plugin)",
    ),
  slowPatterns: z
    .array(
      z.union([
        z.string().trim().min(1),
        z.strictObject({ pattern: z.string().trim().min(1), seconds: z.number().positive().optional() }),
      ]),
    )
    .default([])
    .describe(
      'commands added to the shared slow-command table (@conch/process): leading words, e.g. "make" or { pattern: "make" }',
    ),
  defaultSlowPatterns: z
    .boolean()
    .default(true)
    .describe(
      "false: only slowPatterns are slow commands (the shared table of @conch/process is not used), e.g. the reference terminal's list SEED_SLOW_PATTERNS",
    ),
  slowCommandTimeout: z
    .number()
    .positive()
    .max(24 * 3600)
    .default(180)
    .describe(
      'seconds a known slow command (npm install, cargo build, pytest ...) waits, with no idle return',
    ),
  reloadRcFiles: z
    .boolean()
    .default(true)
    .describe(
      "re-source the user's rc files (in start-up order) before a command when they changed since the session started or last re-sourced them",
    ),
  outputDir: z
    .string()
    .min(1)
    .optional()
    .describe(
      'where output_file files go (relative to the registry cwd); default $XDG_CACHE_HOME/conch/output (~/.cache/conch/output), kept 7 days',
    ),
  sessionEnv: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string())
    .default({ PAGER: 'cat', GIT_PAGER: 'cat', MANPAGER: 'cat', SYSTEMD_PAGER: '' })
    .describe('exported in every session after the rc files ran'),
});

export type TerminalConfig = z.output<typeof terminalConfigSchema>;
export type TerminalConfigInput = z.input<typeof terminalConfigSchema>;

/**
 * The reference terminal's (Clacky's) slow-command list, verbatim: a host that wants exactly it
 * sets `{ defaultSlowPatterns: false, slowPatterns: SEED_SLOW_PATTERNS }`. (The shared table of
 * @conch/process, the default, holds all of these and more.)
 */
export const SEED_SLOW_PATTERNS: readonly string[] = [
  'bundle install',
  'bundle update',
  'bundle exec rspec',
  'npm install',
  'npm run build',
  'npm run test',
  'yarn install',
  'yarn build',
  'pnpm install',
  'pnpm build',
  'rspec',
  'rake test',
  'rails test',
  'cargo build',
  'cargo test',
  'go build',
  'go test',
  'mvn test',
  'mvn package',
  'gradle build',
  'pytest',
  'pip install',
  'docker build',
  'docker-compose build',
];

/**
 * The reference terminal's defaults, for a host that wants them where conch's differ (see the
 * README's table): `registry.expose('terminal', { ...SEED_TERMINAL_CONFIG })`. The values conch
 * shares with it (timeout 60 s, 2 s of background output, 4000 / 500 characters, 180 s for slow
 * commands) are repeated so the object is the whole list.
 */
export const SEED_TERMINAL_CONFIG: Readonly<TerminalConfigInput> = {
  defaultIdleMs: 10_000,
  defaultTimeout: 60,
  backgroundCollectMs: 2000,
  pollQuietMs: 10_000,
  maxOutputChars: 4000,
  overflowPreviewChars: 3800,
  maxLineChars: 500,
  defaultSlowPatterns: false,
  slowPatterns: [...SEED_SLOW_PATTERNS],
  slowCommandTimeout: 180,
};
