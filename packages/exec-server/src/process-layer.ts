/**
 * The process-layer interfaces a command runner is typed with live in @conch/process (so cli and
 * background use a remote layer without importing this package); re-exported here for users of
 * `RemoteProcessManager`. `test-support/process-layer-conformance.ts` pins that both managers fit.
 */
export type { OutputStore, ProcessHandle, ProcessLayer, ProcessTarget } from '@conch/process';
