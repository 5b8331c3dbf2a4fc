// The test sshd lives in @conch/test-support (shared with @conch/environment's suite).
export { SSHD, sshdAvailable, sshExecutorConfig, startSshd, type TestSshd } from '@conch/test-support/sshd';
