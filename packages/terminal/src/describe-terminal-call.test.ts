// Invariant: a terminal call is described in the seed's five shapes (run, background, send, check output, stop), on one bounded line.
import { describe, expect, it } from 'vitest';
import { describeTerminalCall } from './describe-terminal-call.js';

describe('describeTerminalCall', () => {
  it.each([
    [{ command: 'npm test' }, 'terminal(npm test)'],
    [{ session_id: 3, input: 'y\n' }, 'terminal(send "y")'],
    [{ session_id: 3 }, 'terminal(check output)'],
    [{ session_id: 3, input: '' }, 'terminal(check output)'],
    [{ session_id: 3, kill: true }, 'terminal(stop)'],
    [{ command: 'npm run dev', background: true }, 'terminal(npm run dev, background)'],
    [{}, 'terminal(?)'],
  ])('%j -> %s', (args, expected) => {
    expect(describeTerminalCall(args)).toBe(expected);
  });

  it('keeps long commands and inputs to one short line', () => {
    const long = describeTerminalCall({ command: `cat <<'EOF'\n${'line\n'.repeat(50)}EOF` });
    expect(long).not.toContain('\n');
    expect(long.endsWith('…)')).toBe(true);
    expect(long.length).toBeLessThanOrEqual('terminal()'.length + 60);
    expect(describeTerminalCall({ session_id: 1, input: 'a'.repeat(40) })).toBe(
      `terminal(send "${'a'.repeat(30)}...")`,
    );
  });
});
