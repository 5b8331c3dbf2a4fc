declare module '@conch/core' {
  interface ConchEvents {
    /** A process started (its pid known). */
    'process.started': {
      id: string;
      pid: number | undefined;
      command: string;
      args: readonly string[];
      cwd: string;
      shell: boolean;
      startedAt: number;
    };
    /** Output of a process, decoded as UTF-8 and stripped of ANSI sequences. */
    'process.output': { id: string; stream: 'stdout' | 'stderr'; text: string };
    /** A process ended (its result is final). */
    'process.exited': {
      id: string;
      exitCode: number | null;
      signal: string | null;
      durationMs: number;
      reason?: 'exit' | 'timeout' | 'aborted' | 'killed' | 'error';
    };
  }
}

export {};
