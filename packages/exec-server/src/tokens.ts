import { token } from '@conch/core';
import type { ExecutionTarget } from './execution-target.js';

/** The registry's execution target, provided by the `executor` plugin. */
export const EXECUTION_TARGET = token<ExecutionTarget>('conch.exec-server.ExecutionTarget');

/**
 * Declared by the packages that consume them (tokens of one name are one key): @conch/process's
 * `PROCESS_LAYER` (cli and its background tasks spawn through it), @conch/terminal's
 * `TERMINAL_BACKEND` (the terminal tool runs its sessions through it) and @conch/files'
 * `FILE_OPERATIONS_TARGET` (the files plugin's tools run their operations through it). The
 * executor plugin provides them for a remote target.
 */
export { PROCESS_LAYER } from '@conch/process';
export { TERMINAL_BACKEND } from '@conch/terminal';
export { FILE_OPERATIONS_TARGET } from '@conch/files';
