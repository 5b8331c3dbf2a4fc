import { PERMISSION_GATE, type KernelPolicy, type PluginScope } from '@conch/core';
import { PROCESS_MANAGER, profileFor, type SandboxFileSystem } from '@conch/process';
import type { FileSystemBackend } from './file-system-backend.js';
import { localFileSystem } from './local-file-system.js';

/**
 * The file system the file tools see: the kernel's view of the sandbox commands run in.
 *
 * With a permission gate that has a kernel policy, every operation runs in the registry's process
 * supervisor for that sandbox (inside its mount namespace), so the kernel — not a check in the
 * host — resolves links and refuses writes to read-only paths: `workspace-write` (the workspace
 * writable, protected paths read-only), `read-only`, or, when the gate's sandbox is off, the
 * protected profile (the user's filesystem with protected paths read-only). Without a gate or a
 * process manager: this machine's file system as the host sees it. Chosen per operation.
 */
export function kernelFileSystem(scope: Pick<PluginScope, 'resolveOptional'>): FileSystemBackend {
  const bySandbox = new WeakMap<KernelPolicy, SandboxFileSystem>();
  const current = (): FileSystemBackend => {
    const policy = scope.resolveOptional(PERMISSION_GATE)?.kernelPolicy?.();
    const manager = scope.resolveOptional(PROCESS_MANAGER);
    if (!policy || !manager) return localFileSystem;
    let fs = bySandbox.get(policy);
    if (!fs) {
      const level = policy.mode === 'off' ? 'outside' : policy.mode;
      fs = manager.fileSystem(profileFor(policy, level));
      bySandbox.set(policy, fs);
    }
    return fs;
  };
  return {
    viaKernel: true,
    open: (path) => current().open(path),
    stat: (path) => current().stat(path),
    lstat: (path) => current().lstat(path),
    realpath: (path) => current().realpath(path),
    readlink: (path) => current().readlink(path),
    readdir: (path) => current().readdir(path),
    mkdirp: (path) => current().mkdirp(path),
    writeFileAtomic: (path, data, options) => current().writeFileAtomic(path, data, options),
  };
}

/** Whether `kernelFileSystem(scope)` runs operations in a sandbox now (the gate's sandbox is on). */
export function inKernelSandbox(scope: Pick<PluginScope, 'resolveOptional'>): boolean {
  const policy = scope.resolveOptional(PERMISSION_GATE)?.kernelPolicy?.();
  return (
    policy !== undefined && policy.mode !== 'off' && scope.resolveOptional(PROCESS_MANAGER) !== undefined
  );
}
