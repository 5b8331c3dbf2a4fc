import './events.js';

export { terminalPlugin, terminalPlugin as default } from './plugin.js';
export { terminalConfigSchema, type TerminalConfig, type TerminalConfigInput } from './config.js';
export { TERMINAL_SERVICE } from './tokens.js';
export {
  SessionPool,
  type FinishedResult,
  type RunningResult,
  type TerminalService,
  type TerminalSessionInfo,
} from './session-pool.js';
export type { SessionState } from './pty-session.js';
export { classifyCall, terminalInputSchema, type CallShape, type TerminalArgs } from './terminal-tool.js';
export { cleanOutput, stripAnsi, applyLineEdits, capTotal } from './output-cleaner.js';
export { looksLikePrompt } from './prompt-detector.js';
