import { token } from '@conch/core';
import type { TerminalService } from './session-pool.js';

/** The terminal's host API (`TerminalService`): `registry.resolve(TERMINAL_SERVICE)`. */
export const TERMINAL_SERVICE = token<TerminalService>('conch.terminal.TerminalService');
