import type { ApproveFn } from '@conch/core';
import { z } from 'zod';

const examples = z.strictObject({
  match: z.array(z.string()).default([]).describe('commands the rule must match'),
  notMatch: z.array(z.string()).default([]).describe('commands the rule must not match'),
});

/** A host rule: a prefix-syntax string, or an object with a pattern or a regex and examples. */
export const ruleSchema = z.union([
  z.string().min(1, 'a rule cannot be empty'),
  z.strictObject({
    pattern: z.string().min(1).describe('prefix syntax: `git status`, `npm run test:*`'),
    examples: examples.optional(),
  }),
  z.strictObject({
    regex: z.string().min(1).describe('a JavaScript regular expression tested against each simple command'),
    flags: z
      .string()
      .regex(/^[imsu]*$/, 'regex flags may only be i, m, s, u')
      .optional(),
    examples: examples.optional(),
  }),
]);
export type RuleInput = z.input<typeof ruleSchema>;

export const safetySchema = z.strictObject({
  privilegeEscalation: z.boolean().default(true).describe('deny sudo, su, doas, pkexec, run0 anywhere'),
  downloadToInterpreter: z
    .boolean()
    .default(true)
    .describe('deny curl/wget output piped or substituted into sh, bash, python, node, ...'),
  protectedPaths: z
    .boolean()
    .default(true)
    .describe('deny writes to .env*, .ssh/, .git/hooks/, .git/config, shell rc files and extra globs'),
  recursiveDeleteRoot: z
    .boolean()
    .default(true)
    .describe('deny rm -r of /, ~, the workspace root or their parents'),
  sourceDownloaded: z.boolean().default(true).describe('deny eval or source of downloaded content'),
  forkBomb: z.boolean().default(true).describe('deny fork bombs'),
  selfKill: z
    .boolean()
    .default(true)
    .describe('deny kill/pkill/killall of the host process or its process supervisors'),
});
export type SafetyRuleId = keyof z.output<typeof safetySchema>;

export const permissionConfigSchema = z.strictObject({
  mode: z
    .enum(['default', 'readOnly', 'acceptAll'])
    .default('default')
    .describe(
      'default: safe commands run, others ask; readOnly: only safe commands; acceptAll: all but built-in denies',
    ),
  rules: z
    .strictObject({
      allow: z.array(ruleSchema).default([]),
      ask: z.array(ruleSchema).default([]),
      deny: z.array(ruleSchema).default([]),
    })
    .default({ allow: [], ask: [], deny: [] }),
  approve: z
    .custom<ApproveFn>((value) => typeof value === 'function', {
      message: 'expected a function (request, { signal }) => Promise<"once" | "always" | "deny">',
    })
    .optional(),
  safety: safetySchema.default({
    privilegeEscalation: true,
    downloadToInterpreter: true,
    protectedPaths: true,
    recursiveDeleteRoot: true,
    sourceDownloaded: true,
    forkBomb: true,
    selfKill: true,
  }),
  protectedPaths: z.array(z.string().min(1)).default([]).describe('extra globs never written to'),
  sandbox: z
    .enum(['workspace-write', 'read-only', 'off'])
    .optional()
    .describe(
      "where commands run: 'workspace-write' (default where bubblewrap works): every command the gate does not deny runs without a prompt in a sandbox where only the workspace (and writableRoots) is writable, protected paths are read-only, /tmp is private, no network, its own pid namespace; 'read-only': the same with nothing writable; 'off' (default where bubblewrap does not work): no sandbox is relied on, and the gate asks for anything it cannot prove read-only",
    ),
  writableRoots: z
    .array(z.string().min(1))
    .default([])
    .describe('more directories sandboxed commands may write (absolute, or relative to the workspace)'),
  protectedFiles: z
    .array(z.string().min(1))
    .default(['Gemfile', 'Gemfile.lock', '.aws'])
    .describe(
      "names protected at any depth like .env files, a file or a directory with everything in it (the reference terminal's list: Gemfile, Gemfile.lock, .aws/ beside .env* and .ssh/, which are always protected); [] turns the default off",
    ),
  network: z
    .strictObject({
      allow: z
        .array(z.string().min(1))
        .default([])
        .describe(
          'destinations sandboxed commands may reach through the proxy: host, *.domain, host:port, IP, *',
        ),
      deny: z
        .array(z.string().min(1))
        .default([])
        .describe('destinations never reached (beats allow and approvals)'),
    })
    .default({ allow: [], deny: [] })
    .describe(
      "the sandbox has no network but through conch's proxy: allowed destinations connect, others are asked (with an approver) or refused as NETWORK_BLOCKED",
    ),
  secrets: z
    .strictObject({
      hideEnv: z
        .array(z.string().min(1))
        .default([])
        .describe(
          'more variable-name globs sandboxed commands never get (besides *_TOKEN, *_KEY, AWS_*, ...)',
        ),
      keepEnv: z
        .array(z.string().min(1))
        .default([])
        .describe('variable names (globs) passed in although they look like credentials'),
      maskPaths: z
        .array(z.string().min(1))
        .default([])
        .describe(
          'more files or directories hidden inside the sandbox (absolute, ~/…, or relative to the workspace)',
        ),
      exposeDotEnv: z
        .boolean()
        .default(false)
        .describe('let sandboxed commands read the workspace .env* files (masked by default)'),
    })
    .default({ hideEnv: [], keepEnv: [], maskPaths: [], exposeDotEnv: false }),
  kernelWall: z
    .boolean()
    .default(true)
    .describe(
      "with sandbox 'off', where bubblewrap works: commands allowed as reads run read-only without network, and protected paths are read-only for every command; false: the parser alone",
    ),
  workspaceRoot: z.string().min(1).optional().describe('default: the registry cwd'),
  maxCommandBytes: z
    .number()
    .int()
    .positive()
    .default(64 * 1024)
    .describe('longer commands fail closed'),
  parseTimeoutMs: z
    .number()
    .int()
    .positive()
    .default(500)
    .describe(
      'the parse budget, read as work: × 1,000 parser steps, counted, not timed; larger parses fail closed',
    ),
  maxNesting: z.number().int().min(0).max(8).default(3).describe('how deep bash -c strings are parsed'),
  auditLimit: z.number().int().positive().default(1000).describe('decisions kept in the audit log'),
});
export type PermissionConfig = z.output<typeof permissionConfigSchema>;
export type PermissionConfigInput = z.input<typeof permissionConfigSchema>;
