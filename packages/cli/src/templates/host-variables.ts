import { argumentText } from './arguments.js';

/** `${HOST_VAR}` or an argument placeholder, replaced in one pass so a value is never re-scanned. */
const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}|UTCP_ARG_([A-Za-z0-9_.-]+?)_UTCP_END/g;

export interface ResolvedEnv {
  env: Record<string, string>;
  /** `${NAME}` references the host map did not supply, with the env var that used them. */
  missing: { variable: string; reference: string }[];
}

/**
 * Resolves a template's `env_vars`: `${NAME}` takes the host-supplied value (plugin config
 * `variables`), `UTCP_ARG_<name>_UTCP_END` the call's argument. Values go into the environment,
 * never into the script text, and are never logged.
 */
export function resolveEnvVars(
  envVars: Readonly<Record<string, string>> | null | undefined,
  hostVariables: Readonly<Record<string, string>>,
  args: Readonly<Record<string, unknown>>,
): ResolvedEnv {
  const env: Record<string, string> = {};
  const missing: ResolvedEnv['missing'] = [];
  for (const [key, raw] of Object.entries(envVars ?? {})) {
    env[key] = raw.replace(REFERENCE, (whole, host: string | undefined, arg: string | undefined) => {
      if (arg !== undefined) return argumentText(args[arg]);
      if (host !== undefined && Object.hasOwn(hostVariables, host)) return hostVariables[host] as string;
      missing.push({ variable: key, reference: whole });
      return '';
    });
  }
  return { env, missing };
}
