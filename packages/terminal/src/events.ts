import type { SessionExitReason, SessionState } from './session-state.js';

declare module '@conch/core' {
  interface ConchEvents {
    'terminal.session.started': { sessionId: number; pid: number; shell: string; cwd: string };
    'terminal.session.state': { sessionId: number; state: SessionState; command?: string };
    'terminal.session.output': { sessionId: number; text: string };
    'terminal.session.exited': {
      sessionId: number;
      exitCode: number;
      signal: number;
      reason: SessionExitReason;
    };
    'terminal.command.started': { sessionId: number; seq: number; command: string; cwd: string };
    'terminal.command.finished': { sessionId: number; exitCode: number; cwd: string; durationMs: number };
    'terminal.input': { sessionId: number; length: number };
  }
}

export {};
