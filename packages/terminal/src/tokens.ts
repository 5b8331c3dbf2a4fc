/** DI token of the terminal's host API (`TerminalService`): `registry.resolve(TERMINAL_SERVICE)`. */
export const TERMINAL_SERVICE = Symbol.for('conch.terminal.TerminalService');
