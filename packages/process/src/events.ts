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
    /**
     * A server listening in a sandbox is now reachable from the host at 127.0.0.1:<port> (port
     * forwarding; `sandbox`: the profile kind it runs in).
     */
    'process.port.forwarded': { port: number; sandbox: string };
    /** A forwarded port closed on the host (the server stopped listening, or its sandbox ended). */
    'process.port.closed': { port: number; sandbox: string };
  }
}

export {};
