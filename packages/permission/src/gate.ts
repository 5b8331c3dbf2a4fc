import './events.js';
import {
  InvalidConfigError,
  type ApprovalAnswer,
  type ApprovalRequest,
  type ApproveFn,
  type EventBus,
  type KernelPolicy,
  type Logger,
  type PermissionDecision,
  type PermissionGate,
  type PermissionRequest,
} from '@conch/core';
import { shellQuote, type ParsedCommand, type ShellParser } from '@conch/shell-syntax';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { Analyzer, type Analysis, type Dialect, type Part, type Verdict } from './analyze.js';
import type { OwnProcess } from './rules/self-kill.js';
import type { PermissionConfig } from './config.js';
import { escapeHidden } from './display.js';
import { compileProtected, type PathContext } from './paths.js';
import { protectedWrite } from './protected-write.js';
import { kernelPolicy } from './kernel-policy.js';
import { compileRule, type CompiledRule, type HostRules, type RuleList } from './host-rules.js';

/** One decision as the audit log keeps it. */
export interface AuditEntry {
  /** Milliseconds since the epoch. */
  time: number;
  callId: string;
  tool: string;
  /** The command (or the action summary), hidden characters escaped. */
  command: string;
  cwd?: string;
  outcome: 'allow' | 'deny';
  /** What the policy said before any human answer. */
  verdict: Verdict;
  askedHuman: boolean;
  answer?: ApprovalAnswer;
  rule?: string;
  reason: string;
  parts: { command: string; verdict: Verdict; reason: string; rule: string }[];
  durationMs: number;
}

export interface PermissionEngineOptions {
  parser: ShellParser;
  config: PermissionConfig;
  /** Default workspace root and cwd (the registry cwd). */
  cwd: string;
  logger?: Logger;
  events?: EventBus;
  /** The home directory `~` and `$HOME` mean. Default: os.homedir(). */
  home?: string;
  /** Pids of conch's process supervisors (the host itself is always protected). */
  supervisorPids?: () => readonly number[];
}

/** Thrown (wrapped by core as an invalid config) when a rule does not compile or its examples fail. */
export interface RuleProblem {
  path: (string | number)[];
  message: string;
}

/**
 * The permission gate: decides allow / ask / deny on the parse of each command, asks the host's
 * approver when needed, remembers `always` answers for the session, logs every decision and keeps
 * an audit log the host can read.
 */
export class PermissionEngine implements PermissionGate {
  private readonly analyzer: Analyzer;
  private readonly paths: PathContext;
  private readonly rules: HostRules;
  private readonly session: CompiledRule[] = [];
  private readonly log: AuditEntry[] = [];
  private readonly config: PermissionConfig;
  private readonly logger: Logger | undefined;
  private readonly events: EventBus | undefined;
  readonly workspaceRoot: string;

  constructor(options: PermissionEngineOptions) {
    this.config = options.config;
    this.logger = options.logger;
    this.events = options.events;
    this.workspaceRoot = resolve(options.cwd, options.config.workspaceRoot ?? '.');
    const compiled = compileRules(options.config.rules);
    if ('problems' in compiled)
      throw new InvalidConfigError(
        'permission',
        compiled.problems.map((p) => ({
          path: p.path.join('.'),
          expected: 'a rule in prefix syntax (`*` only at the end) or a valid regex',
          received: p.message,
        })),
      );
    this.rules = compiled.rules;
    this.paths = {
      home: options.home ?? homedir(),
      workspaceRoot: this.workspaceRoot,
      extra: compileProtected(options.config.protectedPaths),
    };
    this.analyzer = new Analyzer({
      parser: options.parser,
      safety: options.config.safety,
      rules: this.rules,
      sessionAllow: () => this.session,
      useAllowRules: options.config.mode !== 'readOnly',
      paths: this.paths,
      maxBytes: options.config.maxCommandBytes,
      timeoutMs: options.config.parseTimeoutMs,
      maxNesting: options.config.maxNesting,
      ownProcesses: () => ownProcesses(options.supervisorPids?.() ?? []),
    });
  }

  /** The policy's answer for a command line, without asking anyone or logging (for UIs and tests). */
  evaluate(command: string, cwd: string = this.workspaceRoot, dialect: Dialect = 'bash'): Analysis {
    return this.analyzer.analyze(command, resolve(this.workspaceRoot, cwd), { dialect });
  }

  /**
   * What the kernel must enforce: the existing protected paths, read-only for every command (none
   * when the host turned the protected-paths rule off); undefined when `kernelWall: false`.
   */
  kernelPolicy(): KernelPolicy | undefined {
    if (!this.config.kernelWall) return undefined;
    // With the protected-paths rule off, reads still run read-only; nothing else is bound.
    if (!this.config.safety.protectedPaths) return { readOnlyPaths: [] };
    return kernelPolicy(this.paths);
  }

  /**
   * Why writing `path` is refused under this gate's protected-path rule (the same check and the
   * same words the gate uses for commands), or undefined when it may be written. For tools that
   * write files themselves (an environment's file operator). Relative paths resolve from `cwd`.
   */
  protectedWriteReason(path: string, cwd: string = this.workspaceRoot): string | undefined {
    if (!this.config.safety.protectedPaths) return undefined;
    return protectedWrite(path, cwd, this.paths);
  }

  /** The decisions so far, oldest first (at most `auditLimit`). */
  audit(): AuditEntry[] {
    return this.log.map((e) => ({ ...e, parts: [...e.parts] }));
  }

  /** Rules added by `always` answers this session. */
  sessionRules(): string[] {
    return this.session.map((r) => r.text);
  }

  async check(
    request: PermissionRequest,
    options: { signal?: AbortSignal; approve?: ApproveFn; callId: string },
  ): Promise<PermissionDecision> {
    const started = performance.now();
    const { analysis, display, cwd } = this.analyzeRequest(request);
    let verdict = analysis.verdict;
    const decisive = analysis.decisive;
    const mode = this.config.mode;
    let modeNote: string | undefined;
    if (verdict === 'ask' && mode === 'readOnly') {
      verdict = 'deny';
      modeNote = 'readOnly mode denies everything not known to be read-only';
    } else if (verdict === 'ask' && mode === 'acceptAll') {
      verdict = 'allow';
      modeNote = 'acceptAll mode';
      this.logger?.warn(
        { tool: request.tool, command: display, reason: decisive.reason },
        'permission: allowed by acceptAll mode (the policy would have asked)',
      );
    }

    let decision: PermissionDecision;
    let askedHuman = false;
    let answer: ApprovalAnswer | undefined;
    const toAllow = this.suggestedRules(analysis);
    const suggestion = toAllow
      ? `Add ${toAllow.map((r) => `"${r}"`).join(', ')} to rules.allow to allow it.`
      : undefined;
    if (verdict === 'allow') {
      decision = {
        outcome: 'allow',
        reason: modeNote ? `${modeNote} allows it (${decisive.reason})` : allowReason(analysis),
        rule: modeNote ? `mode:${mode}` : decisive.rule,
        ...(analysis.readOnly && !modeNote ? { readOnly: true } : {}),
      };
    } else if (verdict === 'deny') {
      decision = {
        outcome: 'deny',
        reason: `${modeNote ? `${modeNote}: ` : ''}${subject(decisive)} ${decisive.reason}.`,
        rule: modeNote && analysis.verdict === 'ask' ? `mode:${mode}` : decisive.rule,
        ...(analysis.verdict === 'ask' && suggestion ? { suggestion } : denySuggestion(decisive)),
      };
    } else {
      const approve = options.approve ?? this.config.approve;
      if (!approve) {
        decision = {
          outcome: 'deny',
          reason: `${subject(decisive)} needs approval: ${decisive.reason}. No approver is configured, so asking means no.`,
          rule: decisive.rule,
          ...(suggestion
            ? { suggestion }
            : {
                suggestion:
                  'Run the parts separately without $(...), eval or other constructs the gate cannot check.',
              }),
        };
      } else {
        askedHuman = true;
        const approval: ApprovalRequest = {
          tool: request.tool,
          display,
          request,
          reason: decisive.reason,
          ...(toAllow ? { suggestedRule: toAllow.join('; ') } : {}),
          parts: analysis.parts.map((p) => ({
            command: escapeHidden(p.command),
            verdict: p.verdict,
            reason: p.reason,
          })),
        };
        try {
          answer = await approve(approval, options.signal ? { signal: options.signal } : {});
        } catch (error) {
          answer = undefined;
          this.logger?.error({ err: error, tool: request.tool }, 'permission: approver failed; denying');
        }
        if (answer === 'once' || answer === 'always') {
          if (answer === 'always' && toAllow) this.remember(toAllow);
          decision = {
            outcome: 'allow',
            reason: `approved ${answer === 'always' ? 'for this session' : 'once'} by a human`,
            rule: decisive.rule,
            askedHuman: true,
          };
        } else {
          decision = {
            outcome: 'deny',
            reason:
              answer === 'deny'
                ? `a human denied it (${decisive.reason})`
                : `the approver failed or gave no valid answer, so it is denied (${decisive.reason})`,
            rule: decisive.rule,
            askedHuman: true,
          };
        }
      }
    }
    if (askedHuman) decision.askedHuman = true;

    const entry: AuditEntry = {
      time: Date.now(),
      callId: options.callId,
      tool: request.tool,
      command: display,
      ...(cwd ? { cwd } : {}),
      outcome: decision.outcome,
      verdict: analysis.verdict,
      askedHuman,
      ...(answer ? { answer } : {}),
      ...(decision.rule ? { rule: decision.rule } : {}),
      reason: decision.reason,
      parts: analysis.parts.map((p) => ({
        command: escapeHidden(p.command),
        verdict: p.verdict,
        reason: p.reason,
        rule: p.rule,
      })),
      durationMs: performance.now() - started,
    };
    this.log.push(entry);
    if (this.log.length > this.config.auditLimit)
      this.log.splice(0, this.log.length - this.config.auditLimit);
    const level = decision.outcome === 'deny' ? 'warn' : 'info';
    this.logger?.[level](
      {
        tool: request.tool,
        command: display,
        outcome: decision.outcome,
        rule: decision.rule,
        askedHuman,
        callId: options.callId,
      },
      `permission: ${decision.outcome}`,
    );
    this.events?.emit('permission.decision', {
      tool: request.tool,
      ...(request.kind === 'command' ? { command: display } : {}),
      outcome: decision.outcome,
      askedHuman,
      ...(decision.rule ? { rule: decision.rule } : {}),
      reason: decision.reason,
    });
    return decision;
  }

  private analyzeRequest(request: PermissionRequest): { analysis: Analysis; display: string; cwd?: string } {
    if (request.kind === 'command') {
      const plan = request.plan;
      if (plan && isParsedCommand(plan.parsed)) {
        // The call's one plan: judged with the parse, shell dialect and cwd the runner will use.
        const analysis = this.analyzer.analyze(plan.line, plan.cwd, {
          dialect: plan.dialect,
          parsed: plan.parsed,
        });
        return { analysis, display: escapeHidden(plan.line, DISPLAY_MAX), cwd: plan.cwd };
      }
      const line = request.args?.length
        ? `${request.command} ${request.args.map(shellQuote).join(' ')}`
        : request.command;
      const cwd = resolve(this.workspaceRoot, request.cwd || '.');
      const analysis = this.analyzer.analyze(line, cwd, request.dialect ? { dialect: request.dialect } : {});
      return { analysis, display: escapeHidden(line, DISPLAY_MAX), cwd };
    }
    const part: Part = request.readOnly
      ? { command: request.summary, verdict: 'allow', reason: 'a read-only action', rule: 'readOnly:action' }
      : {
          command: request.summary,
          verdict: 'ask',
          reason: `${request.tool} wants to: ${request.summary}`,
          rule: 'unknown',
        };
    return {
      analysis: { verdict: part.verdict, decisive: part, parts: [part], readOnly: part.verdict === 'allow' },
      display: escapeHidden(request.summary),
    };
  }

  /** The allow rules that would let this asked command run, when rules can (not for fail-closed asks). */
  private suggestedRules(analysis: Analysis): string[] | undefined {
    if (analysis.verdict !== 'ask') return undefined;
    const asks = analysis.parts.filter((p) => p.verdict === 'ask');
    if (asks.some((p) => !p.suggestedRule)) return undefined;
    return [...new Set(asks.map((p) => p.suggestedRule!))];
  }

  private remember(rules: readonly string[]): void {
    for (const rule of rules) {
      const compiled = compileRule('allow', this.session.length, rule);
      if (typeof compiled !== 'string' && !this.session.some((r) => r.text === compiled.text))
        this.session.push(compiled);
    }
  }

  /** Checks every rule's examples against the policy; returns the problems found. */
  checkExamples(): RuleProblem[] {
    const problems: RuleProblem[] = [];
    for (const list of ['allow', 'ask', 'deny'] as RuleList[]) {
      for (const rule of this.rules[list]) {
        for (const [key, expected] of [
          ['match', true],
          ['notMatch', false],
        ] as const) {
          rule.examples?.[key].forEach((example, i) => {
            if (this.analyzer.ruleMatches(rule, example) !== expected) {
              problems.push({
                path: ['rules', list, rule.index, 'examples', key, i],
                message: `rule "${rule.text}" ${expected ? 'does not match' : 'matches'} its example ${JSON.stringify(example)}`,
              });
            }
          });
        }
      }
    }
    return problems;
  }
}

export function compileRules(
  rules: PermissionConfig['rules'],
): { rules: HostRules } | { problems: RuleProblem[] } {
  const out = { allow: [] as CompiledRule[], ask: [] as CompiledRule[], deny: [] as CompiledRule[] };
  const problems: RuleProblem[] = [];
  for (const list of ['allow', 'ask', 'deny'] as RuleList[]) {
    rules[list].forEach((input, i) => {
      const compiled = compileRule(list, i, input);
      if (typeof compiled === 'string') problems.push({ path: ['rules', list, i], message: compiled });
      else out[list].push(compiled);
    });
  }
  return problems.length ? { problems } : { rules: out };
}

/** Longest command text shown to a human or kept in the audit log. */
const DISPLAY_MAX = 20_000;

function subject(part: Part): string {
  return part.command ? `\`${escapeHidden(part.command)}\`:` : 'The command:';
}

function allowReason(analysis: Analysis): string {
  const rules = [...new Set(analysis.parts.map((p) => p.rule))];
  if (rules.every((r) => r.startsWith('readOnly:'))) return 'every part of the command only reads';
  return `allowed: ${analysis.parts.map((p) => p.reason).join('; ')}`;
}

function denySuggestion(part: Part): { suggestion?: string } {
  if (part.rule.startsWith('safety:')) {
    const id = part.rule.slice(7);
    if (id === 'downloadToInterpreter' || id === 'sourceDownloaded')
      return { suggestion: 'Download the script to a file, read it, then run the file.' };
    return {
      suggestion: `This is the built-in safety rule "${id}"; the host can turn it off with safety.${id}: false.`,
    };
  }
  if (part.rule.startsWith('deny:'))
    return { suggestion: `Remove "${part.rule.slice(5)}" from rules.deny to allow it.` };
  return {};
}

/** A plan's parse as @conch/shell-syntax makes it (the gate re-parses anything else). */
function isParsedCommand(value: object): value is ParsedCommand {
  return 'source' in value && 'ok' in value && 'flags' in value;
}

/** The host process and the given supervisors, as /proc describes them (Linux; the host alone elsewhere). */
function ownProcesses(supervisors: readonly number[]): OwnProcess[] {
  const out: OwnProcess[] = [];
  for (const pid of [process.pid, ...supervisors]) {
    let name = pid === process.pid ? process.title : '';
    let cmdline = pid === process.pid ? process.argv.join(' ') : '';
    let pgid: number | undefined;
    try {
      name = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').filter(Boolean).join(' ');
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
      pgid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
    } catch {
      if (pid !== process.pid) continue;
    }
    out.push({ pid, name, cmdline, ...(pgid ? { pgid } : {}) });
  }
  return out;
}
