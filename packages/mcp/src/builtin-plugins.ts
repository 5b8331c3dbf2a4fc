import type { PluginDefinition } from '@conch/core';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { executorPlugin } from '@conch/exec-server';
import { filesPlugin } from '@conch/files';
import { permissionPlugin } from '@conch/permission';
import { terminalPlugin } from '@conch/terminal';
import { trashPlugin } from '@conch/trash';

/**
 * The plugins conch-mcp ships with, registered without discovery: the published conch-mcp bundles
 * them into its own dist (no `@conch/*` package sits in node_modules to be discovered), so they are
 * passed to the registry as host plugins. In a checkout, discovery finds the same module objects in
 * node_modules, which is not a clash. `executor` (@conch/exec-server) is the one switch for where
 * the others run: `"executor": { "kind": "ssh", "host": "devbox" }` in conch.config.json (the
 * `files` tools then work on the target's files too).
 */
export const BUILTIN_PLUGINS: readonly PluginDefinition[] = [
  executorPlugin,
  permissionPlugin,
  cliPlugin,
  backgroundPlugin,
  terminalPlugin,
  trashPlugin,
  filesPlugin,
];
