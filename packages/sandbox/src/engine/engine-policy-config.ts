import { isAbsolute } from 'node:path';
import { InvalidConfigError, toValidationIssues } from '@conch/core';
import { z } from 'zod';

/** Linux capability names as the engines take them (`NET_ADMIN`; `CAP_` prefix and case are dropped). */
const CAPABILITY = /^[A-Z_]+$/;

/** A compose project name as compose normalises one: lowercase letters, digits, `_` and `-`. */
const PROJECT_NAME = /^[a-z0-9][a-z0-9_-]*$/;

/**
 * The settable part of the container-engine policy (the `engine` config of a host). Everything else
 * the policy does is fixed: no privileged containers, no devices, no host namespaces, no security
 * relaxations, no engine socket in a container, bind mounts only from the workspace.
 */
export const enginePolicySchema = z.strictObject({
  /**
   * Whether `docker pull` (and a create or `compose up` that pulls) may fetch images. The engine
   * fetches them with the host's network, outside the sandbox's allow-list. Default true.
   */
  pull: z.boolean().default(true),
  /**
   * Where published ports listen on the host: 'loopback' (default) rewrites an unspecified host
   * address (`-p 8080:80`, `0.0.0.0`, `::`) to 127.0.0.1 and refuses any other non-loopback one;
   * 'any' lets them through.
   */
  publish: z.enum(['loopback', 'any']).default('loopback'),
  /**
   * Directories, besides the workspace, whose contents may be bind-mounted into containers
   * (absolute; resolved with realpath when the proxy starts).
   */
  bindRoots: z.array(z.string().refine((p) => isAbsolute(p), 'an absolute path')).default([]),
  /** Capabilities a container may add (`--cap-add`); none by default. `ALL` is never allowed. */
  capabilities: z
    .array(
      z
        .string()
        .transform((c) => c.toUpperCase().replace(/^CAP_/, ''))
        .refine((c) => CAPABILITY.test(c) && c !== 'ALL', 'a capability name such as NET_ADMIN (not ALL)'),
    )
    .default([]),
  /**
   * Compose project names whose containers, networks and volumes (label
   * `com.docker.compose.project`) count as the workspace's, besides the one derived from the
   * workspace directory's name and COMPOSE_PROJECT_NAME.
   */
  composeProjects: z
    .array(z.string().regex(PROJECT_NAME, 'a compose project name (lowercase letters, digits, _ and -)'))
    .default([]),
});

/** The validated policy (defaults filled in). */
export type EnginePolicy = z.output<typeof enginePolicySchema>;
/** The policy as a host may give it (every field optional). */
export type EnginePolicyInput = z.input<typeof enginePolicySchema>;

/** Validates an engine policy, or throws InvalidConfigError naming the field. */
export function parseEnginePolicy(input: unknown): EnginePolicy {
  const parsed = enginePolicySchema.safeParse(input ?? {});
  if (!parsed.success) {
    throw new InvalidConfigError(
      'engine',
      toValidationIssues(parsed.error, input, { schema: enginePolicySchema }),
      parsed.error,
    );
  }
  return parsed.data;
}

/** The default policy. */
export function defaultEnginePolicy(): EnginePolicy {
  return parseEnginePolicy({});
}

/**
 * The compose project names of a workspace directory, as compose v2 (lowercase, only `a-z0-9_-`,
 * leading `_`/`-` trimmed) and compose v1 (without the trim) name it; `COMPOSE_PROJECT_NAME`
 * (when given) is used as given, normalised the same way.
 */
export function composeProjectNames(workspaceBasename: string, composeProjectName?: string): string[] {
  const names = new Set<string>();
  for (const raw of [workspaceBasename, composeProjectName]) {
    if (!raw) continue;
    const v1 = raw.toLowerCase().replace(/[^-_a-z0-9]/g, '');
    const v2 = v1.replace(/^[-_]+/, '');
    for (const name of [v1, v2]) if (name) names.add(name);
  }
  return [...names];
}
