// Owns what a command INTENDS: where the analysis applies the deny rules, each switched by the
// host's `safety` settings. The rules themselves are one file each beside this one; this file is
// the only place that decides which of them run on what — a whole line (fork bombs, downloads fed
// to interpreters), a line that cannot be parsed, one resolved command, a compound statement's
// redirects, a program handed an argument list, and names or scripts only known at run time.
// (The terminal protocol's reserved names are also guarded by the walk, `assignedName` and
// function definitions, because the names come from the syntax tree there.)
import type { Syntax } from '@conch/shell-syntax';
import type { AnalysisContext } from '../analyze/context.js';
import type { CommandFacts, LineFacts, Part } from '../facts.js';
import { shellGlob } from '../paths.js';
import type { Arg } from '../words.js';
import { downloadToInterpreter } from './download-to-interpreter.js';
import { forkBomb } from './fork-bomb.js';
import { privilegeEscalation, PRIVILEGE, PRIVILEGE_WORD } from './privilege-escalation.js';
import { protectedPaths } from './protected-paths.js';
import { recursiveDeleteRoot } from './recursive-delete-root.js';
import { selfKill, selfKillTree } from './self-kill.js';
import { sourceDownloaded } from './source-downloaded.js';
import { terminalProtocol } from './terminal-protocol.js';

/** The rules on a whole line, once every command of it (substitutions, `-c` strings) was walked. */
export function lineRules(ctx: AnalysisContext, line: LineFacts): Part[] {
  const s = ctx.options.safety;
  const parts: Part[] = [];
  if (s.downloadToInterpreter) parts.push(...downloadToInterpreter(line));
  if (s.sourceDownloaded) parts.push(...sourceDownloaded(line));
  return parts;
}

/** The rules on a line the parser could not read: only its text is known. */
export function unparsedLineRules(ctx: AnalysisContext, source: string, shown: string): Part[] {
  const s = ctx.options.safety;
  const parts: Part[] = [];
  if (s.privilegeEscalation && PRIVILEGE_WORD.test(source.slice(0, 1 << 20)))
    parts.push({
      command: shown,
      verdict: 'deny',
      reason:
        'it names a privilege-escalation program (sudo, su, doas, pkexec) and cannot be parsed to prove it is not run',
      rule: 'safety:privilegeEscalation',
    });
  if (s.forkBomb) parts.push(...forkBomb(undefined, source));
  return parts;
}

/** The rules on a parsed line's syntax tree. */
export function treeRules(ctx: AnalysisContext, tree: Syntax.SyntaxTree, source: string): Part[] {
  const s = ctx.options.safety;
  const parts = s.forkBomb ? forkBomb(tree, source) : [];
  if (s.selfKill && ctx.options.ownProcesses)
    parts.push(...selfKillTree(tree, ctx.options.ownProcesses, ctx.options.paths.home));
  return parts;
}

/** The safety rules on one resolved command. */
export function commandRules(ctx: AnalysisContext, facts: CommandFacts, readOnly: boolean): Part[] {
  const s = ctx.options.safety;
  const parts: Part[] = [];
  if (s.privilegeEscalation) {
    const p = privilegeEscalation(facts, readOnly);
    if (p) parts.push(p);
  }
  const protocol = terminalProtocol(facts);
  if (protocol) parts.push(protocol);
  if (s.protectedPaths) parts.push(...protectedPaths(facts, ctx.ruleContext));
  if (s.recursiveDeleteRoot) parts.push(...recursiveDeleteRoot(facts, ctx.ruleContext));
  if (s.selfKill && ctx.options.ownProcesses && /^(kill|pkill|killall)$/.test(facts.name ?? '')) {
    const p = selfKill(facts, ctx.options.ownProcesses());
    if (p) parts.push(p);
  }
  return parts;
}

/** The rules on what a compound statement's redirects write (`{ …; } > ~/.bashrc`). */
export function redirectRules(ctx: AnalysisContext, facts: CommandFacts): Part[] {
  return ctx.options.safety.protectedPaths ? protectedPaths(facts, ctx.ruleContext) : [];
}

/**
 * The first deny of the write rules on an argument list a program is handed (`strace -f rm -rf ~`
 * is judged as `rm -rf ~`).
 */
export function handedOverDeny(ctx: AnalysisContext, inner: CommandFacts): Part | undefined {
  const s = ctx.options.safety;
  return [
    ...(s.protectedPaths ? protectedPaths(inner, ctx.ruleContext) : []),
    ...(s.recursiveDeleteRoot ? recursiveDeleteRoot(inner, ctx.ruleContext) : []),
  ].find((p) => p.verdict === 'deny');
}

/** A command name only known at run time that is a glob able to match a privilege program (`/usr/bin/su?o`). */
export function dynamicNameRules(ctx: AnalysisContext, nameArg: Arg, shown: string): Part[] {
  if (!ctx.options.safety.privilegeEscalation || !nameArg.glob || nameArg.opaque) return [];
  const pattern = nameArg.pattern.slice(nameArg.pattern.lastIndexOf('/') + 1);
  const re = shellGlob(pattern, true);
  const hit = [...PRIVILEGE].find((p) => re.test(p));
  if (!hit || pattern === '*') return [];
  return [
    {
      command: shown,
      verdict: 'deny',
      reason: `the command name ${nameArg.raw} is a pattern that can match ${hit}`,
      rule: 'safety:privilegeEscalation',
    },
  ];
}

/** A command string only known at run time (`bash -c "$x"`) that mentions a privilege program. */
export function dynamicScriptRules(ctx: AnalysisContext, script: Arg, via: string, shown: string): Part[] {
  if (!ctx.options.safety.privilegeEscalation || !PRIVILEGE_WORD.test(script.raw)) return [];
  return [
    {
      command: shown,
      verdict: 'deny',
      reason: `${via} runs a command string that mentions a privilege-escalation program`,
      rule: 'safety:privilegeEscalation',
    },
  ];
}
