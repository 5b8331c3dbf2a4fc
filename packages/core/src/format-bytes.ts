/**
 * A byte count for a message: whole GiB as GiB (`1 GiB`, `8 GiB`), anything else as MiB to one
 * decimal (`512 MiB`, `1.5 MiB`). One phrasing for every size conch reports (a sandbox's limits,
 * a config's bounds).
 */
export function formatBytes(n: number): string {
  return n >= 1024 ** 3 && n % 1024 ** 3 === 0
    ? `${n / 1024 ** 3} GiB`
    : `${Math.round((n / 1024 ** 2) * 10) / 10} MiB`;
}
