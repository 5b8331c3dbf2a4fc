// eslint-disable-next-line no-restricted-imports -- reads conch's own bundle, shipped in its package
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConchError } from '@conch/core';

export interface BundleFile {
  path: string;
  size: number;
  sha256: string;
  mode: number;
}

export interface BundleManifest {
  /** Content hash of the bundle (names its directory in a target's cache). */
  hash: string;
  /** node-pty platforms with a prebuilt binary in the bundle (e.g. 'linux-x64'). */
  platforms: string[];
  files: BundleFile[];
}

/**
 * Where the deployable bundle is: this package's dist/server-bundle (from the sources under vitest
 * as well), or `server-bundle` beside the running code when a host bundled this package into its
 * own files (the published conch-mcp ships it there).
 */
export function bundleDir(): string {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith('.ts')) return join(dirname(here), '..', '..', 'dist', 'server-bundle');
  const beside = join(dirname(here), 'server-bundle');
  return existsSync(join(beside, 'manifest.json')) ? beside : join(dirname(here), '..', 'server-bundle');
}

let cached: { dir: string; manifest: BundleManifest } | undefined;

/** The bundle's manifest (read once). Throws a ConchError when the package was not built. */
export function bundleManifest(dir: string = bundleDir()): BundleManifest {
  if (cached?.dir === dir) return cached.manifest;
  let manifest: BundleManifest;
  try {
    manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as BundleManifest;
  } catch (error) {
    throw new ConchError({
      code: 'EXEC_SERVER_BUNDLE_MISSING',
      message: `exec-server bundle: expected ${join(dir, 'manifest.json')} (built by \`pnpm --filter @conch/exec-server build\`); it cannot be read: ${(error as Error).message}`,
      cause: error,
    });
  }
  cached = { dir, manifest };
  return manifest;
}

/** The byte stream a boot script reads when it asks for the bundle: a JSON header line, then every file's bytes. */
export function bundlePayload(dir: string = bundleDir()): Buffer {
  const manifest = bundleManifest(dir);
  const header = Buffer.from(`${JSON.stringify({ hash: manifest.hash, files: manifest.files })}\n`);
  return Buffer.concat([header, ...manifest.files.map((f) => readFileSync(join(dir, f.path)))]);
}
