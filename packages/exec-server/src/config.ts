import { z } from 'zod';

/** Options every remote kind shares: how the server is started and the link watched. */
const remote = {
  cwd: z
    .string()
    .min(1)
    .optional()
    .describe(
      "the workspace in the target (absolute, or relative to the login directory; '~' expands). Default: where the server starts",
    ),
  node: z
    .string()
    .min(1)
    .optional()
    .describe("node (>= 20) in the target. Default 'node' on the target's PATH"),
  cacheDir: z
    .string()
    .min(1)
    .optional()
    .describe('where the server bundle is cached in the target. Default ~/.cache/conch/exec-server'),
  serverCommand: z
    .array(z.string())
    .min(1)
    .optional()
    .describe('run this server command in the target instead of deploying the bundle (installed by hand)'),
  heartbeatMs: z
    .number()
    .int()
    .min(100)
    .optional()
    .describe(
      'ping interval of the host; 3 silent intervals mean the link is lost (half-open links too). Default 2000',
    ),
  idleTimeoutMs: z
    .number()
    .int()
    .min(1000)
    .optional()
    .describe(
      'the server treats this long without a message as a dropped link: it detaches (or, with detachGraceMs 0, ends, killing what it runs). Default 4 heartbeats; max(60000, 6 heartbeats) with detachGraceMs 0',
    ),
  detachGraceMs: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe(
      'how long the server keeps running what it started after its link drops, for the host to re-attach (processes, background tasks, terminal sessions, output by offset). 0 kills everything at once. Default 60000',
    ),
  connectTimeoutMs: z
    .number()
    .int()
    .min(1000)
    .optional()
    .describe('time to connect, deploy and start. Default 60000'),
  serverLogLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).optional(),
  keepTempFiles: z
    .boolean()
    .optional()
    .describe("keep the server's temp dir (spill files, session logs) after it ends"),
};

export const localExecutorSchema = z.strictObject({
  kind: z.literal('local'),
});

export const bubblewrapExecutorSchema = z.strictObject({
  kind: z.literal('bubblewrap'),
  writable: z.array(z.string().min(1)).optional().describe('directories writable besides the workspace'),
  network: z.boolean().optional().describe('share the network (default false)'),
  extraArgs: z.array(z.string()).optional().describe('more bwrap arguments'),
});

export const sshExecutorSchema = z.strictObject({
  kind: z.literal('ssh'),
  host: z.string().min(1).describe('host name or address (an ssh_config Host alias works)'),
  port: z.number().int().min(1).max(65535).optional(),
  user: z.string().min(1).optional(),
  identityFile: z.string().min(1).optional().describe('private key file'),
  options: z
    .array(z.string().min(1))
    .optional()
    .describe("extra ssh options as 'Key=Value' (each passed with -o)"),
  ssh: z.string().min(1).optional().describe("the ssh client. Default 'ssh'"),
  controlPersistSeconds: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe('how long the control master outlives its last session. Default 600'),
  ...remote,
});

export const containerExecutorSchema = z.strictObject({
  kind: z.literal('container'),
  engine: z.enum(['docker', 'podman']).default('docker'),
  container: z.string().min(1).describe('name or id of a running container'),
  user: z.string().min(1).optional().describe('--user of the exec'),
  command: z.string().min(1).optional().describe('the engine binary (default: engine)'),
  engineArgs: z.array(z.string()).optional().describe('global engine arguments before exec'),
  ...remote,
});

/**
 * `claim`: a sandbox from kubernetes-sigs/agent-sandbox. A SandboxClaim is created on first use,
 * its pod (named by the Sandbox it gets) is exec'd into once the claim is Ready, and the claim is
 * deleted at dispose.
 */
export const sandboxClaimSchema = z
  .strictObject({
    template: z
      .string()
      .min(1)
      .optional()
      .describe(
        'a SandboxTemplate name: an extensions.agents.x-k8s.io/v1alpha1 claim (spec.sandboxTemplateRef; agent-sandbox 0.4, deprecated but served in 0.5)',
      ),
    warmPool: z
      .string()
      .min(1)
      .optional()
      .describe(
        'a SandboxWarmPool name: an extensions.agents.x-k8s.io/v1beta1 claim (spec.warmPoolRef; agent-sandbox 0.5 and later)',
      ),
    namespace: z
      .string()
      .min(1)
      .optional()
      .describe("where the claim (and so its pod) is. Default: the kubeconfig context's namespace"),
    readyTimeoutMs: z
      .number()
      .int()
      .min(1000)
      .optional()
      .describe('how long the claim may take to become Ready (a cold start pulls images). Default 300000'),
    shutdownAfterSeconds: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        "sets the claim's spec.lifecycle.shutdownTime this long after its creation (shutdownPolicy Delete): agent-sandbox deletes it then, even when this host never does (killed, or `keep`)",
      ),
    keep: z
      .boolean()
      .optional()
      .describe('leave the claim at dispose (to its shutdown time, or for good) instead of deleting it'),
    labels: z
      .record(z.string(), z.string())
      .optional()
      .describe('labels on the claim, besides app.kubernetes.io/managed-by: conch'),
  })
  .superRefine((claim, ctx) => {
    if (claim.template === undefined && claim.warmPool === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['template'],
        message: 'one of `template` (a SandboxTemplate name) or `warmPool` (a SandboxWarmPool name)',
      });
    } else if (claim.template !== undefined && claim.warmPool !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['warmPool'],
        message: 'either `template` or `warmPool`, not both (a claim refers to one of them)',
      });
    }
  });

export const kubernetesExecutorSchema = z
  .strictObject({
    kind: z.literal('kubernetes'),
    pod: z.string().min(1).optional().describe('an existing pod to exec into (or `claim`)'),
    claim: sandboxClaimSchema.optional().describe('a SandboxClaim to create for this target (or `pod`)'),
    namespace: z
      .string()
      .min(1)
      .optional()
      .describe("the pod's namespace. Default: the kubeconfig context's namespace"),
    container: z.string().min(1).optional(),
    context: z.string().min(1).optional(),
    kubeconfig: z.string().min(1).optional(),
    kubectl: z.string().min(1).optional().describe("the kubectl binary. Default 'kubectl'"),
    ...remote,
  })
  .superRefine((config, ctx) => {
    if (config.pod === undefined && config.claim === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['pod'],
        message: 'one of `pod` (an existing pod) or `claim` (a SandboxClaim to create, e.g. { template })',
      });
    } else if (config.pod !== undefined && config.claim !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['claim'],
        message: 'either `pod` or `claim`, not both',
      });
    }
    if (config.claim !== undefined && config.namespace !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['namespace'],
        message: "no top-level namespace with `claim`: the claim's namespace is claim.namespace",
      });
    }
  });

/**
 * Where a registry's commands, terminal sessions and file operations run: `executor: { kind, … }`
 * in cli, terminal and environment config and in conch.config.json (the `executor` plugin).
 */
export const executorConfigSchema = z.discriminatedUnion('kind', [
  localExecutorSchema,
  bubblewrapExecutorSchema,
  sshExecutorSchema,
  containerExecutorSchema,
  kubernetesExecutorSchema,
]);

export type ExecutorConfig = z.output<typeof executorConfigSchema>;
export type ExecutorConfigInput = z.input<typeof executorConfigSchema>;
export type RemoteExecutorConfig = Extract<ExecutorConfig, { kind: 'ssh' | 'container' | 'kubernetes' }>;
