// Compile-time check (run by `typecheck`): @conch/process's ProcessManager / ManagedProcess and this
// package's RemoteProcessManager / RemoteProcess all fit the ProcessLayer / ProcessHandle
// interfaces a runner (cli's runCommand, background tasks) is typed with, and RemoteTerminal fits
// @conch/terminal's TerminalBackend.
import type { ManagedProcess, ProcessManager } from '@conch/process';
import type { TerminalBackend } from '@conch/terminal';
import type { RemoteProcess } from '../client/remote-process.js';
import type { RemoteProcessManager } from '../client/remote-process-manager.js';
import type { RemoteTerminal } from '../client/remote-terminal.js';
import type { ProcessHandle, ProcessLayer } from '../process-layer.js';

type Fits<T, U> = T extends U ? true : never;

export const conformance: [
  Fits<ProcessManager, ProcessLayer>,
  Fits<ManagedProcess, ProcessHandle>,
  Fits<RemoteProcessManager, ProcessLayer>,
  Fits<RemoteProcess, ProcessHandle>,
  Fits<RemoteTerminal, TerminalBackend>,
] = [true, true, true, true, true];
