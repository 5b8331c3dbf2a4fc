// One path policy for local and remote file operations: @conch/exec-server's.
export { PathPolicy, type PathPolicyOptions } from '@conch/exec-server';
