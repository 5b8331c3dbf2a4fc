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
    .describe('ping interval; 3 silent intervals mean the link is lost. Default 10000'),
  idleTimeoutMs: z
    .number()
    .int()
    .min(1000)
    .optional()
    .describe(
      'the server ends (killing what it runs) after this long without a message. Default max(60000, 6 heartbeats)',
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

export const kubernetesExecutorSchema = z.strictObject({
  kind: z.literal('kubernetes'),
  pod: z.string().min(1),
  namespace: z.string().min(1).optional(),
  container: z.string().min(1).optional(),
  context: z.string().min(1).optional(),
  kubeconfig: z.string().min(1).optional(),
  kubectl: z.string().min(1).optional().describe("the kubectl binary. Default 'kubectl'"),
  ...remote,
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
