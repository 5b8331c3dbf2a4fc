/**
 * A transport is a command line: given the argv to run in the target, it says which host command
 * runs it there with its stdin/stdout as one byte stream (ssh, docker/podman exec -i, kubectl exec
 * -i). Everything else — deploying the server, the protocol, reconnecting — is the client's and the
 * same for every transport.
 */
export interface Transport {
  readonly kind: 'ssh' | 'container' | 'kubernetes' | 'command';
  /** Where commands run, as results and errors name it: 'ssh:user@host:port', 'podman:name', ... */
  readonly target: string;
  /**
   * An asynchronous step before the first command (a SandboxClaim's transport creates the claim
   * and waits for its pod); resolves at once when done. Its failure is the connection's start
   * failure. Called by ExecClient before it starts a fresh server (not before a re-attach).
   */
  prepare?(): Promise<void>;
  /** Gives up a `prepare()` in progress, and refuses later ones: the target is being disposed. */
  cancelPrepare?(): void;
  /** The host command running `argv` in the target, stdin/stdout passed through. */
  command(argv: readonly string[]): { file: string; args: string[] };
  /** A hint for a transport command that exited before the server spoke (e.g. ssh's 255). */
  describeExit?(code: number | null, stderr: string): string | undefined;
  /**
   * A connection through it went silent (half-open): what it keeps between connections may be
   * wedged on the same dead path (an ssh control master), so the next connection must not reuse it.
   */
  reset?(): void;
  /** Releases what the transport keeps between connections (ssh's control master). */
  dispose(): Promise<void>;
  /** The same, synchronously, for a host that is exiting. */
  disposeSync?(): void;
}
