import { z } from 'zod';

/**
 * The longest time limit in seconds: node's timers wait at most 2^31 - 1 ms (~24.8 days), and a
 * larger delay would fire at once — killing a healthy command as timed out. A larger value is
 * refused (INVALID_ARGUMENTS naming the field and this maximum); leave the field out for no limit.
 */
export const MAX_TIMEOUT_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

/** A number of seconds a timer can wait (0 < s <= MAX_TIMEOUT_SECONDS). */
export const timerSeconds = () =>
  z
    .number()
    .positive()
    .max(MAX_TIMEOUT_SECONDS, {
      message: `expected at most ${MAX_TIMEOUT_SECONDS} seconds (~24.8 days, the longest a timer can wait); leave it out for no limit`,
    });

export const slowPatternSchema = z.strictObject({
  /** Leading words of a simple command, e.g. 'npm install' or 'make'. */
  pattern: z.string().trim().min(1),
  /** Estimated duration in seconds. */
  seconds: z.number().positive(),
});

export const cliConfigSchema = z.strictObject({
  extraPaths: z
    .array(z.string().min(1))
    .default([])
    .describe(
      'directories prepended to PATH (~ expanded, relative ones resolved from the working directory)',
    ),
  maxOutputChars: z
    .number()
    .int()
    .min(200)
    .default(50_000)
    .describe('characters of stdout + stderr returned to the model; the rest is in output_file'),
  autoBackgroundThreshold: timerSeconds()
    .default(10)
    .describe(
      'seconds before a command becomes a background task (a hard timeout without the background plugin)',
    ),
  backgroundMaxWorkers: z
    .number()
    .int()
    .min(1)
    .max(64)
    .default(4)
    .describe('background tasks running at once (passed to the background plugin)'),
  defaultTimeout: timerSeconds()
    .optional()
    .describe('seconds after which any command (foreground or background) is killed; default none'),
  env: z.record(z.string(), z.string()).default({}).describe('variables added to every command environment'),
  cwd: z.string().min(1).optional().describe("working directory (default: the registry's cwd)"),
  slowPatterns: z
    .array(slowPatternSchema)
    .default([])
    .describe('extra { pattern, seconds } estimates added to the built-in slow-command table'),
  background: z
    .boolean()
    .default(true)
    .describe('expose the background plugin with cli and hand long commands to it'),
  shell: z
    .string()
    .min(1)
    .default('auto')
    .describe(
      "shell of shell mode: 'auto' is bash when installed (what the permission gate parses), else /bin/sh (the gate then reads commands as sh)",
    ),
  leftovers: z
    .enum(['adopt', 'kill'])
    .default('adopt')
    .describe(
      'processes a command leaves running when it returns: adopted as a background task (with the background plugin) or killed',
    ),
  safeRm: z
    .boolean()
    .default(false)
    .describe(
      "rm moves files into the project's trash (the terminal's rm function, sourced before commands that run rm; they run in shell mode) instead of deleting them; exposes the 'trash' plugin",
    ),
  outputDir: z
    .string()
    .min(1)
    .optional()
    .describe(
      'where output_file files go (relative to the working directory); default $XDG_CACHE_HOME/conch/output (~/.cache/conch/output), kept 7 days',
    ),
  spillLimitPerCall: z
    .number()
    .int()
    .nonnegative()
    .optional()
    .describe(
      "bytes one command's output file may take; past it the file stops growing and the result says how much was kept (default 1 GiB)",
    ),
  spillLimitPerRegistry: z
    .number()
    .int()
    .nonnegative()
    .optional()
    .describe(
      "bytes all output and spill files of the registry may take over its life (default 4 GiB); set on the registry's process manager",
    ),
  onSpillLimit: z
    .enum(['continue', 'stop'])
    .default('continue')
    .describe(
      "what a spill limit does to the command: 'continue' lets it run on (its output counted, the end kept in memory), 'stop' kills it",
    ),
  sandbox: z
    .union([
      z.boolean(),
      z.strictObject({
        writable: z.array(z.string().min(1)).optional(),
        network: z.boolean().optional(),
      }),
    ])
    .default(false)
    .describe(
      'run every command in bubblewrap: read-only root, writable workspace (+ writable dirs), private /tmp and PID namespace',
    ),
});

export type CliConfig = z.output<typeof cliConfigSchema>;
export type CliConfigInput = z.input<typeof cliConfigSchema>;
export type SlowPattern = z.output<typeof slowPatternSchema>;

/** The config with every default filled in. */
export const DEFAULT_CLI_CONFIG: CliConfig = cliConfigSchema.parse({});
