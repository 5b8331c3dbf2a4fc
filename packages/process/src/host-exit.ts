// The host-exit hooks live in @conch/core, so the registry's temp dir is removed after every process
// manager has killed its trees (one ordered list for the whole host).
export { onHostExit, type HostExitPhase } from '@conch/core';
