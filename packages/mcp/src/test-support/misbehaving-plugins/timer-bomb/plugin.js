// Test-only third-party plugin that misbehaves where no conch code is on the stack: its tool
// returns, then its own timer throws and a promise nobody awaits rejects. Another tool returns a
// value JSON cannot carry (a BigInt).
import { z } from 'zod';

export default {
  name: 'timer-bomb',
  version: '0.0.0',
  configSchema: z.strictObject({}),
  setup() {
    return {
      tools: [
        {
          name: 'arm_timer',
          description: 'Returns at once; throws from a timer a moment later',
          inputSchema: z.strictObject({ ms: z.number().int().min(0).default(10) }),
          execute: ({ ms }) => {
            setTimeout(() => {
              throw new Error('boom from a plugin timer');
            }, ms);
            setTimeout(() => {
              void Promise.reject(new Error('a rejection nobody awaits'));
            }, ms);
            return { armed: true };
          },
        },
        {
          name: 'big_number',
          description: 'Returns a BigInt',
          inputSchema: z.strictObject({}),
          execute: () => ({ n: 12345678901234567890n }),
        },
      ],
    };
  },
};
