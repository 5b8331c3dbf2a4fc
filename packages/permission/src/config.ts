import { formatBytes, type ApproveFn } from '@conch/core';
import {
  MIN_MEMORY_BYTES,
  MIN_PROCESSES,
  normalizeSandboxResources,
  parseByteSize,
  type SandboxResources,
} from '@conch/sandbox';
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

/** A size: bytes, or a string with a binary unit ('512MiB', '2GiB', '64k'). */
const byteSize = (min: number) =>
  z.union([z.number(), z.string()]).superRefine((value, ctx) => {
    const bytes = parseByteSize(value);
    if (bytes === undefined || (bytes !== 0 && bytes < min))
      ctx.addIssue({
        code: 'custom',
        message: `expected 0 or a size of at least ${formatBytes(min)}, in bytes or as '512MiB' / '2GiB'`,
      });
  });

/**
 * What a sandbox may take from the machine (@conch/sandbox resource-limits.ts, whose defaults come
 * from the machine's RAM: tmpfs min(512 MiB, RAM/8), memory min(RAM/2, 8 GiB), 4096 processes,
 * 5 minutes idle). `false` turns a limit off.
 */
export const resourcesSchema = z.strictObject({
  tmpfs: byteSize(1024 ** 2)
    .optional()
    .describe(
      "size of each private tmpfs inside the sandbox (/dev/shm, /run, /var/tmp): bytes or '512MiB'; writes past it fail (No space left on device). Default min(512 MiB, RAM/8); 0: the kernel's default (half of RAM)",
    ),
  memory: z
    .union([byteSize(MIN_MEMORY_BYTES), z.literal(false)])
    .optional()
    .describe(
      "memory limit: for the whole sandbox with cgroup v2 (a systemd scope), else for each of its processes (RLIMIT_DATA); bytes or '4GiB'. Default min(RAM/2, 8 GiB); false: none",
    ),
  processes: z
    .union([z.number().int().min(MIN_PROCESSES), z.literal(false)])
    .optional()
    .describe(
      'most tasks (processes and threads) the sandbox holds; at the limit the process group holding the most is stopped (PROCESS_LIMIT). Default 4096; false: none',
    ),
  idleSeconds: z
    .union([z.number().int().positive(), z.literal(false)])
    .optional()
    .describe(
      'a sandbox nothing runs in is closed after this long, freeing its tmpfs memory (the next command starts a new one; /tmp is kept). Default 300; false: never',
    ),
});
export type ResourcesConfig = z.output<typeof resourcesSchema>;

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
  readableRoots: z
    .array(z.string().min(1))
    .default([])
    .describe(
      "more paths sandboxed commands may read under the closed home (absolute, ~/…, or relative to the workspace); the home reads as empty but for toolchains' entries (see @conch/sandbox's README)",
    ),
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
      openHome: z
        .boolean()
        .default(false)
        .describe(
          "let sandboxed commands read the whole home directory and other users' homes (closed by default: only toolchains' entries and readableRoots are seen; known credential stores stay masked either way)",
        ),
    })
    .default({ hideEnv: [], keepEnv: [], maskPaths: [], exposeDotEnv: false, openHome: false }),
  engine: z
    .union([z.boolean(), z.record(z.string(), z.unknown())])
    .default(false)
    .describe(
      "the container engine from inside the sandbox, through conch's policy socket (docker / docker compose / podman's Docker API): true for the default policy, or its settings (@conch/sandbox README, Containers through a policy); false (default): no engine socket inside",
    ),
  credentials: z
    .array(
      z
        .strictObject({
          hosts: z
            .array(z.string().min(1))
            .min(1)
            .describe('where the real value may go: exact host names, host:port for a port other than 443'),
          fromEnv: z
            .string()
            .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'expected a variable name' })
            .optional()
            .describe("the variable of conch's own environment holding the secret (read at expose)"),
          value: z
            .string()
            .min(1)
            .optional()
            .describe('the secret itself (a host passing it from its own store); prefer fromEnv in files'),
          header: z.string().optional().describe('the header that carries it (default Authorization)'),
          scheme: z
            .enum(['token', 'Bearer', 'Basic'])
            .optional()
            .describe('only a header of this scheme is rewritten (default: token, Bearer, Basic, bare)'),
          placeholder: z
            .string()
            .optional()
            .describe('what the sandbox sees instead (default: drawn at random)'),
          env: z
            .array(z.string())
            .optional()
            .describe('variables the sandbox gets, set to the placeholder (GH_TOKEN, GITHUB_TOKEN)'),
        })
        .refine((c) => (c.fromEnv === undefined) !== (c.value === undefined), {
          error: 'expected exactly one of fromEnv (a variable name) or value (the secret)',
        }),
    )
    .default([])
    .describe(
      "credentials that never enter the sandbox: inside, the tools see a placeholder; conch's proxy ends TLS to these hosts (a per-session CA only the sandbox trusts) and puts the real value in their requests only. Their hosts are reachable. Off by default; risks in @conch/permission's README",
    ),
  resources: resourcesSchema
    .optional()
    .describe(
      'what a sandbox may take from the machine: tmpfs sizes, memory and process limits, how long an idle sandbox lives (registry.status().processes.limits says how they are enforced here)',
    ),
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

/** The permission config's `resources` as a sandbox profile's (false and 0 turn a limit off). */
export function toSandboxResources(config: ResourcesConfig): SandboxResources {
  return normalizeSandboxResources(
    {
      ...(config.tmpfs !== undefined ? { tmpfsBytes: config.tmpfs } : {}),
      ...(config.memory !== undefined ? { memoryBytes: config.memory === false ? 0 : config.memory } : {}),
      ...(config.processes !== undefined
        ? { processes: config.processes === false ? 0 : config.processes }
        : {}),
      ...(config.idleSeconds !== undefined
        ? { idleMs: config.idleSeconds === false ? 0 : config.idleSeconds * 1000 }
        : {}),
    },
    'permission config resources',
  );
}
