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
  type NetworkRequest,
  type PermissionRequest,
  type SandboxLevel,
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
import { KernelPolicyBuilder, type SandboxMode } from './kernel-policy.js';
import { compileHostPattern, type HostPattern } from './network-rules.js';
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
  /** Where an allowed command ran. */
  sandbox?: SandboxLevel;
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
  /**
   * The sandbox commands run in (the config's `sandbox`, or what the machine allows: the plugin
   * probes bubblewrap). Default: the config's, else 'off'.
   */
  sandbox?: SandboxMode;
  /** The sandbox-private cache directory (default per workspace under the user's cache dir). */
  sandboxCacheDir?: string;
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
  private readonly kernel: KernelPolicyBuilder | undefined;
  private readonly network: { allow: HostPattern[]; deny: HostPattern[] };
  /** Hosts a human allowed this session (`always`), and until when `once` answers hold. */
  private readonly networkSession = new Set<string>();
  private readonly networkOnce = new Map<string, number>();
  /** Questions about a host still waiting for the human: connections to it share the answer. */
  private readonly networkAsking = new Map<string, Promise<PermissionDecision>>();
  readonly workspaceRoot: string;
  /** The sandbox every command runs in unless it is escalated ('off': none is relied on). */
  readonly sandbox: SandboxMode;

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
      names: new Set(options.config.protectedFiles),
    };
    this.sandbox = options.sandbox ?? options.config.sandbox ?? 'off';
    const patterns = (list: readonly string[]) =>
      list.map(compileHostPattern).filter((p): p is HostPattern => typeof p !== 'string');
    this.network = {
      allow: patterns(options.config.network.allow),
      deny: patterns(options.config.network.deny),
    };
    this.kernel =
      this.sandbox === 'off' && !options.config.kernelWall
        ? undefined
        : new KernelPolicyBuilder({
            mode: this.sandbox,
            paths: this.paths,
            writableRoots: options.config.writableRoots.map((r) => resolve(this.workspaceRoot, r)),
            secrets: options.config.secrets,
            ...(options.sandboxCacheDir ? { cacheDir: options.sandboxCacheDir } : {}),
            ...(options.logger ? { logger: options.logger } : {}),
          });
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
   * What the kernel must enforce: the sandbox, its writable roots, and the existing protected
   * paths read-only for every command (none when the host turned the protected-paths rule off);
   * undefined with `sandbox: 'off'` and `kernelWall: false`. Cached; walked again after a change in
   * the workspace (see kernel-policy.ts).
   */
  kernelPolicy(): KernelPolicy | undefined {
    if (!this.kernel) return undefined;
    const policy = this.kernel.policy();
    // With the protected-paths rule off, nothing is bound read-only (reads still run read-only).
    if (!this.config.safety.protectedPaths) return { ...policy, readOnlyPaths: [], pinnedPaths: [] };
    return policy;
  }

  /** Stops watching the workspace. */
  dispose(): void {
    this.kernel?.dispose();
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
    const policy = this.policy(request, analysis);
    const { decisive } = policy;
    let verdict = policy.verdict;
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
    const toAllow = policy.suggestedRules;
    const suggestion = toAllow
      ? `Add ${toAllow.map((r) => `"${r}"`).join(', ')} to rules.allow to ${policy.escalation ? 'let it run outside the sandbox' : 'allow it'}.`
      : undefined;
    const where = policy.sandbox ? { sandbox: policy.sandbox } : {};
    if (verdict === 'allow') {
      decision = {
        outcome: 'allow',
        reason: modeNote ? `${modeNote} allows it (${decisive.reason})` : policy.reason,
        rule: modeNote ? `mode:${mode}` : policy.rule,
        ...(analysis.readOnly && !modeNote ? { readOnly: true } : {}),
        ...where,
      };
    } else if (verdict === 'deny') {
      decision = {
        outcome: 'deny',
        reason: `${modeNote ? `${modeNote}: ` : ''}${subject(decisive)} ${decisive.reason}.`,
        rule: modeNote && policy.verdict === 'ask' ? `mode:${mode}` : decisive.rule,
        ...(policy.verdict === 'ask' && suggestion ? { suggestion } : denySuggestion(decisive)),
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
          ...(policy.escalation ? { escalation: policy.escalation } : {}),
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
            reason: `approved ${answer === 'always' ? 'for this session' : 'once'} by a human${policy.escalation ? ' to run outside the sandbox' : ''}`,
            rule: decisive.rule,
            askedHuman: true,
            ...where,
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
      verdict: policy.verdict,
      askedHuman,
      ...(answer ? { answer } : {}),
      ...(decision.rule ? { rule: decision.rule } : {}),
      ...(decision.sandbox ? { sandbox: decision.sandbox } : {}),
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
        sandbox: decision.sandbox,
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
      ...(decision.sandbox ? { sandbox: decision.sandbox } : {}),
      reason: decision.reason,
    });
    return decision;
  }

  /**
   * A connection a sandboxed command asks the proxy for. The deny-list refuses; the allow-list and
   * hosts a human allowed this session pass; otherwise a human is asked ("allow <host>: once /
   * always") — `once` holds for five minutes (a package manager opens many connections), `always`
   * for the session — and with no approver it is refused with the rule to add. Connections to a
   * host whose question is pending share its answer. Audited and emitted like a command.
   */
  async checkNetwork(
    request: NetworkRequest,
    options: { signal?: AbortSignal } = {},
  ): Promise<PermissionDecision> {
    const started = performance.now();
    const { host, port } = request;
    const display = `${host}:${port}`;
    const denied = this.network.deny.find((p) => p.test(host, port));
    let decision: PermissionDecision;
    let askedHuman = false;
    if (denied) {
      decision = {
        outcome: 'deny',
        reason: `the network deny-list names ${denied.text}`,
        rule: `network.deny:${denied.text}`,
      };
    } else {
      const allowed = this.network.allow.find((p) => p.test(host, port));
      const once = this.networkOnce.get(host);
      if (allowed) {
        decision = {
          outcome: 'allow',
          reason: `the network allow-list names ${allowed.text}`,
          rule: `network.allow:${allowed.text}`,
        };
      } else if (this.networkSession.has(host) || (once !== undefined && once > Date.now())) {
        decision = { outcome: 'allow', reason: `a human allowed ${host}`, rule: `network.approved:${host}` };
      } else {
        const pending = this.networkAsking.get(host);
        if (pending) return pending;
        const asking = this.askNetwork(host, port, options.signal);
        this.networkAsking.set(host, asking);
        try {
          decision = await asking;
        } finally {
          this.networkAsking.delete(host);
        }
        askedHuman = decision.askedHuman === true;
      }
    }
    const entry: AuditEntry = {
      time: Date.now(),
      callId: 'network',
      tool: 'network',
      command: `connect ${display}`,
      outcome: decision.outcome,
      verdict: decision.outcome === 'allow' ? 'allow' : askedHuman ? 'ask' : 'deny',
      askedHuman,
      ...(decision.rule ? { rule: decision.rule } : {}),
      reason: decision.reason,
      parts: [],
      durationMs: performance.now() - started,
    };
    this.log.push(entry);
    if (this.log.length > this.config.auditLimit)
      this.log.splice(0, this.log.length - this.config.auditLimit);
    this.logger?.[decision.outcome === 'deny' ? 'warn' : 'info'](
      { host, port, outcome: decision.outcome, rule: decision.rule, askedHuman },
      `permission: network ${decision.outcome}`,
    );
    this.events?.emit('permission.decision', {
      tool: 'network',
      command: `connect ${display}`,
      outcome: decision.outcome,
      askedHuman,
      ...(decision.rule ? { rule: decision.rule } : {}),
      reason: decision.reason,
    });
    return decision;
  }

  private async askNetwork(host: string, port: number, signal?: AbortSignal): Promise<PermissionDecision> {
    const approve = this.config.approve;
    const suggestion = `Add "${host}" to network.allow to let sandboxed commands reach it.`;
    if (!approve) {
      return {
        outcome: 'deny',
        reason: `${host} is not on the network allow-list, and no approver is configured`,
        rule: 'network:notAllowed',
        suggestion,
      };
    }
    const summary = `connect to ${host}:${port}`;
    const approval: ApprovalRequest = {
      tool: 'network',
      display: summary,
      request: { kind: 'action', tool: 'network', summary },
      reason: `a sandboxed command wants to reach ${host}, which is not on the network allow-list`,
      suggestedRule: host,
      network: { host, port },
    };
    let answer: ApprovalAnswer | undefined;
    try {
      answer = await approve(approval, signal ? { signal } : {});
    } catch (error) {
      this.logger?.error({ err: error }, 'permission: approver failed; refusing the connection');
    }
    if (answer === 'always') this.networkSession.add(host);
    if (answer === 'once') this.networkOnce.set(host, Date.now() + 5 * 60_000);
    return answer === 'once' || answer === 'always'
      ? {
          outcome: 'allow',
          reason: `approved ${answer === 'always' ? 'for this session' : 'for five minutes'} by a human`,
          rule: `network.approved:${host}`,
          askedHuman: true,
        }
      : {
          outcome: 'deny',
          reason: `a human refused ${host}`,
          rule: 'network:refused',
          askedHuman: true,
          suggestion,
        };
  }

  /** The sandbox a request runs under: the gate's, unless the runner says it cannot sandbox there. */
  sandboxFor(request: PermissionRequest): SandboxMode {
    if (request.kind === 'command' && request.sandboxAvailable === false) return 'off';
    return this.sandbox;
  }

  /**
   * The policy, in one place: what the parse says (deny rules, what only reads, host rules), and
   * where the command then runs.
   *
   * - Sandbox 'off' (or a target without one): allow what is proven read-only or allowed by a rule,
   *   ask for the rest; reads run in the read-only sandbox where bubblewrap works, the rest outside.
   * - Sandbox on: a command no deny rule refuses runs in the sandbox without a prompt (the kernel
   *   confines it), unless a host `ask` rule names it. A command the model asks to run outside
   *   (`sandbox: false` + justification) runs outside when every part is allowed by a host or
   *   session rule, else a human is asked (with what it will reach), narrowest rule suggested.
   */
  private policy(request: PermissionRequest, analysis: Analysis): Policy {
    const sandbox = this.sandboxFor(request);
    const suggestedRules = this.suggestedRules(analysis);
    if (
      request.kind === 'action' &&
      request.inSandbox &&
      sandbox !== 'off' &&
      analysis.verdict === 'ask' &&
      this.config.mode !== 'readOnly'
    ) {
      // A tool that acts through the kernel sandbox (a file write by the sandbox's supervisor).
      const inside: SandboxLevel = sandbox === 'read-only' ? 'read-only' : 'workspace-write';
      return {
        verdict: 'allow',
        decisive: analysis.decisive,
        reason: `it runs in the ${inside} sandbox`,
        rule: `sandbox:${inside}`,
        sandbox: inside,
      };
    }
    if (sandbox === 'off' || request.kind !== 'command') {
      const verdict = analysis.verdict;
      return {
        verdict,
        decisive: analysis.decisive,
        reason: allowReason(analysis),
        rule: analysis.decisive.rule,
        ...(verdict === 'ask' && suggestedRules ? { suggestedRules } : {}),
        ...(request.kind === 'command' && this.kernel
          ? { sandbox: (analysis.readOnly ? 'read-only' : 'outside') as SandboxLevel }
          : {}),
      };
    }
    if (analysis.verdict === 'deny') {
      return { verdict: 'deny', decisive: analysis.decisive, reason: '', rule: analysis.decisive.rule };
    }
    const inside: SandboxLevel = sandbox === 'read-only' ? 'read-only' : 'workspace-write';
    if (request.escalation) {
      const byRule = analysis.parts.every((p) => p.rule.startsWith('allow:'));
      const exact = escalationRule(request);
      const escalation = { justification: request.escalation.justification, reaches: OUTSIDE_REACHES };
      if (byRule) {
        return {
          verdict: 'allow',
          decisive: analysis.decisive,
          reason: `allowed outside the sandbox: ${analysis.parts.map((p) => p.reason).join('; ')}`,
          rule: analysis.decisive.rule,
          sandbox: 'outside',
        };
      }
      return {
        verdict: 'ask',
        decisive: {
          command: analysis.decisive.command,
          verdict: 'ask',
          reason: `it asks to run outside the sandbox ("${oneLineText(request.escalation.justification)}")`,
          rule: 'sandbox:escalation',
        },
        reason: '',
        rule: 'sandbox:escalation',
        sandbox: 'outside',
        escalation,
        ...(exact ? { suggestedRules: [exact] } : {}),
      };
    }
    const hostAsk = analysis.parts.find((p) => p.rule.startsWith('ask:'));
    if (hostAsk) {
      return {
        verdict: 'ask',
        decisive: hostAsk,
        reason: '',
        rule: hostAsk.rule,
        sandbox: inside,
      };
    }
    if (this.config.mode === 'readOnly' && !analysis.readOnly) {
      return {
        verdict: 'deny',
        decisive: { ...analysis.decisive, rule: 'mode:readOnly' },
        reason: '',
        rule: 'mode:readOnly',
      };
    }
    return {
      verdict: 'allow',
      decisive: analysis.decisive,
      reason:
        analysis.verdict === 'allow'
          ? allowReason(analysis)
          : `it runs in the ${inside} sandbox (${analysis.decisive.reason})`,
      rule: analysis.verdict === 'allow' ? analysis.decisive.rule : `sandbox:${inside}`,
      sandbox: inside,
    };
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

/** What the policy says of a request before modes and humans. */
interface Policy {
  verdict: Verdict;
  decisive: Part;
  /** Why, for an allow. */
  reason: string;
  rule: string;
  /** Where it runs when allowed. */
  sandbox?: SandboxLevel;
  /** Rules that would let it run without asking. */
  suggestedRules?: string[];
  /** An escalation out of the sandbox: the model's reason and what the command will reach. */
  escalation?: { justification: string; reaches: readonly string[] };
}

/** What a command outside the sandbox can reach, for the human who approves it. */
const OUTSIDE_REACHES = [
  'writes anywhere your user can write (protected paths stay read-only where bubblewrap works)',
  'the network, without the allow-list',
  'your environment variables and secret files (~/.ssh, ~/.aws, .env)',
  'your other processes',
];

/** The narrowest rule an approved escalation stores: exactly this command line. */
function escalationRule(request: Extract<PermissionRequest, { kind: 'command' }>): string | undefined {
  const line = request.plan?.line ?? request.command;
  // Prefix syntax reads a trailing `*` as a wildcard and cannot hold newlines: such lines get no rule.
  if (line.includes('\n') || line.trimEnd().endsWith('*')) return undefined;
  return line.trim();
}

function oneLineText(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
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
