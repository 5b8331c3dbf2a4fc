/**
 * Maps snake_case config keys (the seeds' names: `extra_paths`, `max_output_chars`, ...) to their
 * camelCase names, at the top level. Giving both spellings of one key is an error.
 */
export function normalizeConfigKeys(
  config: unknown,
): { ok: true; value: unknown } | { ok: false; key: string; alias: string } {
  if (config === null || typeof config !== 'object' || Array.isArray(config))
    return { ok: true, value: config };
  const out: Record<string, unknown> = {};
  const aliasOf = new Map<string, string>();
  for (const [key, value] of Object.entries(config)) {
    const camel = key.includes('_') ? key.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase()) : key;
    if (camel in out) return { ok: false, key: camel, alias: aliasOf.get(camel) ?? key };
    out[camel] = value;
    aliasOf.set(camel, key);
  }
  return { ok: true, value: out };
}
