// kubectl exec -i as the transport, through a fake kubectl that runs the command locally in a "pod" of its own: the whole target suite, and the kubectl command line it builds (context, namespace, pod, container). Untested against a real cluster.
import { homedir } from 'node:os';
import { expect, test } from 'vitest';
import { fakeExecCommand, type FakeCommand } from './test-support/fake-kubectl.js';
import { describeTarget } from './test-support/target-suite.js';

let kubectl: FakeCommand;

describeTarget('kubernetes target (fake kubectl)', {
  available: true,
  start: async () => {
    kubectl = fakeExecCommand('kubectl');
    return {
      config: {
        kind: 'kubernetes',
        pod: 'agent-sandbox-0',
        namespace: 'agents',
        container: 'shell',
        context: 'kind-conch',
        kubectl: kubectl.path,
      },
      target: 'kubernetes:kind-conch/agents/agent-sandbox-0/shell',
      cwd: kubectl.workdir,
      home: homedir(),
      isolated: kubectl.isolated,
      stop: async () => kubectl.remove(),
    };
  },
  extra: ({ target }) => {
    test('kubectl is called as `kubectl --context C exec -i -n NS POD -c CONTAINER -- node -e <boot> <hash>`', async () => {
      await target().client!.connect();
      const call = kubectl.calls()[0]!;
      expect(
        call.startsWith('--context kind-conch exec -i -n agents agent-sandbox-0 -c shell -- node -e '),
      ).toBe(true);
      expect(call).toMatch(/ [0-9a-f]{24}$/);
    });
  },
});
