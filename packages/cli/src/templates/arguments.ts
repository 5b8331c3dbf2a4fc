/** An argument value as the text a shell command receives (objects and arrays as JSON). */
export function argumentText(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  return JSON.stringify(value);
}

/** The environment variable that carries argument `name` (non-identifier characters become `_`). */
export function argumentVariable(name: string): string {
  return `CONCH_ARG_${name.replace(/[^A-Za-z0-9_]/g, '_')}`;
}
