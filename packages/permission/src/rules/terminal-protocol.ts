import type { CommandFacts, Part } from '../facts.js';
import { PROTOCOL_PREFIX } from '../names.js';

/**
 * Rule `protocol:terminal` (always on): the names of conch's terminal marker protocol
 * (`__conch_*`) are never assigned, unset, exported, read into or redefined by a command. A
 * session whose protocol variables a command could change could be made to run a later `input`
 * as shell code.
 */
export function terminalProtocol(facts: CommandFacts): Part | undefined {
  const hit = facts.names.find((n) => n.name.startsWith(PROTOCOL_PREFIX));
  if (!hit) return undefined;
  return {
    command: facts.shown,
    verdict: 'deny',
    reason: `it changes ${hit.name} (${hit.how}), a variable of conch's terminal protocol`,
    rule: 'protocol:terminal',
  };
}
