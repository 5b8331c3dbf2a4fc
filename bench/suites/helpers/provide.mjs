// Plugin API v1 for the bench's fixtures: services are provided by a plugin's setup, never put into
// the registry's container by hand.
import { definePlugin, PERMISSION_GATE } from '@conch/core';

/** A plugin named `name` that provides `value` under `token` and has no tools. */
export function providing(name, token, value) {
  return definePlugin({
    name,
    version: '0',
    setup(ctx) {
      ctx.provide(token, value);
      return { tools: [] };
    },
  });
}

/** A gate that allows everything: the bench measures running, not judging (permission.mjs does that). */
export const allowAll = providing('bench-allow-all', PERMISSION_GATE, {
  check: async () => ({ outcome: 'allow', reason: 'bench' }),
});
