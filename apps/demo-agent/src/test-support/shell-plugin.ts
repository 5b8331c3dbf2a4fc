// A small real plugin for the agent-loop tests: runs `sh -c` in its own process group and kills the
// group on abort (the real cli plugin is exercised by the end-to-end test).
import { spawn } from 'node:child_process';
import { definePlugin, defineTool } from '@conch/core';
import { z } from 'zod';

export const startedPids: number[] = [];

export const shTool = defineTool({
  name: 'sh',
  description: 'Runs a shell command and returns stdout and the exit code',
  inputSchema: z.strictObject({ command: z.string() }),
  execute: ({ command }, ctx) =>
    new Promise<{ stdout: string; returncode: number | null }>((resolve, reject) => {
      const child = spawn('sh', ['-c', command], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      if (child.pid) startedPids.push(child.pid);
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      const kill = () => {
        try {
          if (child.pid) process.kill(-child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      };
      ctx.signal.addEventListener('abort', kill, { once: true });
      child.on('error', reject);
      child.on('close', (code) => {
        ctx.signal.removeEventListener('abort', kill);
        resolve({ stdout, returncode: code });
      });
    }),
});

export const shellPlugin = definePlugin({
  name: 'test-shell',
  version: '0.0.0',
  configSchema: z.object({}),
  tools: [shTool],
});
