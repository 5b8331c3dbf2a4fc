import type { CommandFacts, Part } from '../facts.js';
import { baseName } from '../program.js';

/** Programs that run commands with another user's (root's) privileges. */
export const PRIVILEGE = new Set([
  'sudo',
  'sudoedit',
  'su',
  'doas',
  'pkexec',
  'run0',
  'runuser',
  'calife',
  'ksu',
  'sg',
  'newgrp',
]);

/** A privilege program named anywhere in a text the gate could not parse. */
export const PRIVILEGE_WORD =
  /(^|[\s;&|(){}`$'"=/])(sudo|sudoedit|su|doas|pkexec|run0|runuser|ksu)(?=$|[\s;&|(){}`'"])/;

/**
 * Rule `safety:privilegeEscalation`: sudo, su, doas, pkexec, run0 … are denied wherever they
 * run — as the command, through any wrapper, or handed as an argument to a program that is not
 * known to only read (strace, chroot, script -c … run their arguments).
 */
export function privilegeEscalation(facts: CommandFacts, readOnly: boolean): Part | undefined {
  const program = facts.programs.find((p) => PRIVILEGE.has(p));
  if (program) {
    return {
      command: facts.shown,
      verdict: 'deny',
      reason: `${program} runs commands with elevated privileges, which agents may not do`,
      rule: 'safety:privilegeEscalation',
    };
  }
  if (readOnly) return undefined;
  const arg = facts.args.find((a) => a.value !== undefined && PRIVILEGE.has(baseName(a.value)));
  if (arg) {
    return {
      command: facts.shown,
      verdict: 'deny',
      reason: `${facts.name} is given ${arg.value} as an argument and may run it with elevated privileges`,
      rule: 'safety:privilegeEscalation',
    };
  }
  return undefined;
}
