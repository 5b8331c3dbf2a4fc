// podman exec -i into a real container (rootfs: this machine's / read-only, overlaid): the whole target suite, with the container's own /tmp, ~/.cache (empty: the first connection really copies the bundle) and pids.
import { expect, test } from 'vitest';
import { podmanAvailable, startContainer, type TestContainer } from './test-support/podman.js';
import { describeTarget } from './test-support/target-suite.js';

let container: TestContainer;

describeTarget('container target (podman exec, a real container)', {
  available: podmanAvailable(),
  start: async () => {
    container = await startContainer();
    return {
      config: {
        kind: 'container',
        engine: 'podman',
        container: container.name,
        engineArgs: container.engineArgs,
        // The exec starts in the container's WORKDIR (/ here); the workspace is set apart from it.
        cwd: '/root',
      },
      target: `podman:${container.name}`,
      cwd: '/root',
      home: '/root',
      isolated: true,
      stop: () => container.stop(),
    };
  },
  extra: ({ target, newTarget }) => {
    test('the first connection copies the bundle into the container (its ~/.cache is empty), the next target reuses it', async () => {
      const first = await target().client!.connect();
      expect(first.deployed).toBe(true);
      const other = newTarget();
      try {
        expect((await other.client!.connect()).deployed).toBe(false);
      } finally {
        await other.dispose();
      }
    });
  },
});
