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
  /** The host command running `argv` in the target, stdin/stdout passed through. */
  command(argv: readonly string[]): { file: string; args: string[] };
  /** A hint for a transport command that exited before the server spoke (e.g. ssh's 255). */
  describeExit?(code: number | null, stderr: string): string | undefined;
  /** Releases what the transport keeps between connections (ssh's control master). */
  dispose(): Promise<void>;
  /** The same, synchronously, for a host that is exiting. */
  disposeSync?(): void;
}
