import { spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tempDir } from '@conch/test-support';
import { findBwrap } from '../find-bwrap.js';
import {
  encodeGuardRules,
  GUARD_BINARY,
  GuardEventReader,
  type GuardEvent,
  type GuardRules,
} from '../guard.js';
import { sandboxArgs, type SandboxProfile } from '../profile.js';

export const bwrap = findBwrap();

/** A workspace in a fresh temp dir (real path: the guard judges real paths). */
export function tempWorkspace(prefix = 'conch-guard-'): string {
  return realpathSync(tempDir(prefix));
}

export function rulesFor(workspace: string, more: Partial<GuardRules> = {}): GuardRules {
  return {
    readOnly: [],
    masked: [],
    nameRoots: [workspace],
    fileNames: ['.envrc', '.mcp.json', 'conch.config.json', '.bashrc'],
    dirNames: ['.vscode', '.claude', '.idea'],
    envSecrets: true,
    hooks: true,
    watchNames: ['.npmrc', '.yarnrc.yml', 'pip.py'],
    watchGit: true,
    cookieVar: 'CONCH_PROC_COOKIE',
    ...more,
  };
}

export interface Guarded {
  /** Resolves when the program ends: its exit code, output and the guard's events. */
  done: Promise<{ code: number | null; stdout: string; stderr: string; events: GuardEvent[] }>;
  events: GuardEvent[];
  /** Sends new rules (resolves on the guard's acknowledgement). */
  update(rules: GuardRules): Promise<void>;
  kill(): void;
}

/**
 * Runs `bash -c script` under the guard inside bubblewrap with the workspace-write profile's walls
 * (the profile's own mounts: `profile`), as a supervisor would run: bwrap -- conch-guard -- bash.
 */
export function runGuarded(
  rules: GuardRules,
  script: string,
  options: {
    profile?: SandboxProfile;
    cwd?: string;
    env?: Record<string, string>;
    /** false: the guard alone, no bubblewrap. */
    sandbox?: boolean;
    /** true: bubblewrap's mounts alone, no guard (what the guard is measured against). */
    noGuard?: boolean;
  } = {},
): Guarded {
  const profile: SandboxProfile = options.profile ?? {
    kind: 'workspace-write',
    writableRoots: rules.nameRoots,
    readOnlyPaths: rules.readOnly,
    maskedPaths: rules.masked,
  };
  const inner = options.noGuard
    ? ['bash', '-c', script]
    : [GUARD_BINARY, '--channel', '3', '--', 'bash', '-c', script];
  const [file, args] =
    options.sandbox === false
      ? [inner[0]!, inner.slice(1)]
      : [
          bwrap!,
          [
            ...sandboxArgs(profile, [GUARD_BINARY]).args,
            '--chdir',
            options.cwd ?? rules.nameRoots[0]!,
            '--',
            ...inner,
          ],
        ];
  const child = spawn(file, args, {
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', ...options.env },
    ...(options.sandbox === false ? { cwd: options.cwd ?? rules.nameRoots[0]! } : {}),
  });
  const channel = child.stdio[3] as Socket;
  const reader = new GuardEventReader();
  const events: GuardEvent[] = [];
  const acks: (() => void)[] = [];
  channel.on('data', (chunk: Buffer) => {
    for (const event of reader.push(chunk)) {
      events.push(event);
      if (event.kind === 'ack') acks.shift()?.();
    }
  });
  channel.on('error', () => {});
  // Every commit is acknowledged in order; the first one (the start) is not waited for.
  const update = (next: GuardRules) =>
    new Promise<void>((resolve) => {
      acks.push(resolve);
      channel.write(encodeGuardRules(next));
    });
  void update(rules);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<{ code: number | null; stdout: string; stderr: string; events: GuardEvent[] }>(
    (resolve) => {
      child.on('close', (code) => resolve({ code, stdout, stderr, events }));
    },
  );
  return { done, events, update, kill: () => child.kill('SIGKILL') };
}
