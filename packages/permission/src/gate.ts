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
import {
  compileHostPattern,
  internalRefusal,
  KernelPolicyBuilder,
  loopbackPorts,
  parseCredentialHost,
  parseEnginePolicy,
  type HostPattern,
  type SandboxMode,
} from '@conch/sandbox';
import type { ParsedCommand, ShellParser } from '@conch/shell-syntax';
import { isIP } from 'node:net';
import { homedir } from 'node:os';
import { join, posix, resolve } from 'node:path';
import { Analyzer, type Analysis, type Dialect, type Part, type Verdict } from './analyze.js';
import { summarize } from './analyze/helpers.js';
import { potentialOwnProcesses, runningOwnProcesses } from './rules/self-kill.js';
import { toSandboxResources, type PermissionConfig } from './config.js';
import { envExports, escapeHidden, MAX_DISPLAY_CHARS, requestLine } from './display.js';
import { compileProtected, type PathContext } from './paths.js';
import { protectedWrite } from './protected-write.js';
import { compileRule, type CompiledRule, type HostRules, type RuleList } from './host-rules.js';
import { RuleGrants, type Change, type RuleGrantsOptions } from './rule-grants.js';

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
  /**
   * Why the sandbox is off when the machine could not make one (the probe's reason and its fix):
   * said in every refusal of a command the sandbox would have run without asking.
   */
  sandboxOffReason?: string;
  /** The sandbox-private cache directory (default per workspace under the user's cache dir). */
  sandboxCacheDir?: string;
  /** Bounds of the snapshot host rules are granted on (the walk of the workspace, the reads). */
  grantLimits?: RuleGrantsOptions['limits'];
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
  /** What each allow rule (host or session) was granted on: the files its commands execute. */
  private readonly grants: RuleGrants;
  private readonly log: AuditEntry[] = [];
  private readonly config: PermissionConfig;
  private readonly logger: Logger | undefined;
  private readonly events: EventBus | undefined;
  private readonly kernel: KernelPolicyBuilder | undefined;
  /** The config's `resources` for the sandbox (undefined: @conch/sandbox's defaults). */
  private readonly resources: KernelPolicy['resources'];
  /**
   * Host loopback ports the allow-list names (`127.0.0.1:5432`, `localhost:8080`, `[::1]:3000`):
   * reached inside the sandbox at their own address (the bridge listens there and CONNECTs to
   * `127.0.0.1:<port>` through the proxy, which this gate still decides).
   */
  private readonly hostPorts: readonly number[];
  /** The container-engine policy's settings, when the engine is opened (config `engine`). */
  private readonly engine: Readonly<Record<string, unknown>> | undefined;
  /** The last policy the builder gave, and the same with `resources` (one object per policy). */
  private withResources: { from: KernelPolicy; policy: KernelPolicy } | undefined;
  private readonly network: { allow: HostPattern[]; deny: HostPattern[] };
  /** The destinations of the config's credentials (`host:port`), reachable like the allow-list's. */
  private readonly credentialHosts: HostPattern[];
  /** Hosts a human allowed this session (`always`), and until when `once` answers hold. */
  private readonly networkSession = new Set<string>();
  private readonly networkOnce = new Map<string, number>();
  /** Questions about a host still waiting for the human: connections to it share the answer. */
  private readonly networkAsking = new Map<string, Promise<PermissionDecision>>();
  readonly workspaceRoot: string;
  /** The sandbox every command runs in unless it is escalated ('off': none is relied on). */
  readonly sandbox: SandboxMode;
  private readonly sandboxOffReason: string | undefined;

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
    this.sandboxOffReason = this.sandbox === 'off' ? options.sandboxOffReason : undefined;
    // The host's allow rules are granted now: what their commands execute is snapshotted, so a
    // command a rule lets run with the user's rights cannot run code changed since (rule-grants.ts).
    this.grants = new RuleGrants({
      workspaceRoot: this.workspaceRoot,
      home: this.paths.home,
      ...(options.grantLimits ? { limits: options.grantLimits } : {}),
    });
    if (options.config.mode !== 'readOnly') this.grants.grantHostRules(this.rules.allow);
    const patterns = (list: readonly string[]) =>
      list.map(compileHostPattern).filter((p): p is HostPattern => typeof p !== 'string');
    this.network = {
      allow: patterns(options.config.network.allow),
      deny: patterns(options.config.network.deny),
    };
    // A credential's hosts are destinations the user named: reachable (on their port only).
    this.credentialHosts = patterns(
      options.config.credentials.flatMap((c) =>
        c.hosts.map((text) => {
          const parsed = parseCredentialHost(text);
          if (typeof parsed === 'string') return text; // normalizeCredentials names it at expose
          return `${parsed.host.includes(':') ? `[${parsed.host}]` : parsed.host}:${parsed.port}`;
        }),
      ),
    );
    this.resources = options.config.resources ? toSandboxResources(options.config.resources) : undefined;
    this.hostPorts = loopbackPorts(options.config.network.allow);
    const engine = options.config.engine;
    if (engine !== false) {
      // Checked now (a bad field fails at expose, naming it), passed on as given.
      parseEnginePolicy(engine === true ? {} : engine);
      this.engine = engine === true ? {} : engine;
    }
    this.kernel =
      this.sandbox === 'off' && !options.config.kernelWall
        ? undefined
        : new KernelPolicyBuilder({
            mode: this.sandbox,
            paths: this.paths,
            writableRoots: options.config.writableRoots.map((r) => resolve(this.workspaceRoot, r)),
            readableRoots: options.config.readableRoots.map((r) =>
              r === '~' || r.startsWith('~/')
                ? join(this.paths.home, r.slice(1))
                : resolve(this.workspaceRoot, r),
            ),
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
      // conch's processes as they run now and as they look whether or not they run (a pattern is
      // judged by what it can match: a supervisor started later, another conch on the machine).
      ownProcesses: () => [
        ...runningOwnProcesses(options.supervisorPids?.() ?? []),
        ...potentialOwnProcesses(this.workspaceRoot),
      ],
    });
  }

  /** The policy's answer for a command line, without asking anyone or logging (for UIs and tests). */
  evaluate(command: string, cwd: string = this.workspaceRoot, dialect: Dialect = 'bash'): Analysis {
    return readWhole(this.analyzer.analyze(command, resolve(this.workspaceRoot, cwd), { dialect }));
  }

  /**
   * What the kernel must enforce: the sandbox, its writable roots, and the existing protected
   * paths read-only for every command (none when the host turned the protected-paths rule off);
   * undefined with `sandbox: 'off'` and `kernelWall: false`. Cached; walked again after a change in
   * the workspace (see @conch/sandbox's kernel-policy.ts).
   */
  kernelPolicy(): KernelPolicy | undefined {
    if (!this.kernel) return undefined;
    const built = this.kernel.policy();
    // The same object while the policy is (profiles are compared by their fields' identity).
    const wrap = this.resources !== undefined || this.hostPorts.length > 0 || this.engine !== undefined;
    if (wrap && this.withResources?.from !== built)
      this.withResources = {
        from: built,
        policy: {
          ...built,
          ...(this.resources ? { resources: this.resources } : {}),
          ...(this.hostPorts.length ? { hostPorts: this.hostPorts } : {}),
          ...(this.engine ? { engine: this.engine } : {}),
        },
      };
    const policy = wrap ? this.withResources!.policy : built;
    // With the protected-paths rule off, nothing is bound read-only (reads still run read-only).
    if (!this.config.safety.protectedPaths)
      return { ...policy, readOnlyPaths: [], pinnedPaths: [], protectedNames: false };
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
    const limit = this.config.auditLimit;
    return this.log.slice(Math.max(0, this.log.length - limit)).map((e) => ({ ...e, parts: [...e.parts] }));
  }

  /**
   * Keeps a decision in the audit log. The oldest go in batches (up to an eighth of the limit, at
   * least 64, past it): trimming one per decision moved the whole log on every call once it was
   * full (~2% of a cli call's host CPU). `audit()` shows the last `auditLimit`.
   */
  private appendAudit(entry: AuditEntry): void {
    this.log.push(entry);
    const limit = this.config.auditLimit;
    if (this.log.length > limit + Math.max(64, limit >> 3)) this.log.splice(0, this.log.length - limit);
  }

  /**
   * Rules added by `always` answers this session: each the exact command approved, holding only in
   * the directory it ran in.
   */
  sessionRules(): string[] {
    return this.session.map((r) => r.text);
  }

  async check(
    request: PermissionRequest,
    options: { signal?: AbortSignal; approve?: ApproveFn; callId: string },
  ): Promise<PermissionDecision> {
    const started = performance.now();
    // A poll phase of the event loop first: a file created before this call (a new .env) has its
    // inotify event queued by the kernel already; the loop's next poll reads it and fs.watch marks
    // the kernel policy stale, so the policy the runner reads next is fresh. Two immediates: the
    // first may run in the current iteration (no poll before it), the second runs after the next
    // poll, whatever phase this call started in.
    if (this.kernel && request.kind === 'command')
      await new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
    const { analysis: analyzed, line, cwd } = this.analyzeRequest(request);
    const analysis = this.pinned(request, analyzed);
    // The human sees the whole command or is not asked; logs and the audit keep a bounded copy.
    // Escaped only as far as it is shown: the log's copy is at most DISPLAY_MAX characters, and
    // the whole display is made only for a human (a 1 MB command refused or allowed is not
    // scanned a character at a time for it).
    const shown = clipDisplay(line);
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
        { tool: request.tool, command: shown, reason: decisive.reason },
        'permission: allowed by acceptAll mode (the policy would have asked)',
      );
    }
    let tooLong = false;
    // Escaping never shortens a text, so a line over the limit is too long before it is escaped.
    const display = verdict === 'ask' && line.length <= DISPLAY_MAX ? escapeHidden(line) : '';
    if (verdict === 'ask' && (line.length > DISPLAY_MAX || display.length > DISPLAY_MAX)) {
      verdict = 'deny';
      tooLong = true;
    }

    let decision: PermissionDecision;
    let askedHuman = false;
    let answer: ApprovalAnswer | undefined;
    const toAllow =
      policy.suggestedRules && !policy.escalation
        ? this.rulesThatAllow(request, policy.suggestedRules)
        : policy.suggestedRules;
    const suggestion = decisive.rule.startsWith('pinned:')
      ? `Review ${decisive.rule.slice(7)}: the rule was granted on what it held then. Approving the command (always) grants it on what is there now, as does restarting conch with the rule.`
      : toAllow
        ? `Add ${toAllow.map((r) => `"${r.text}"`).join(', ')} to rules.allow to ${policy.escalation ? 'let it run outside the sandbox' : 'allow it'}.`
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
    } else if (tooLong) {
      decision = {
        outcome: 'deny',
        reason: `The command is too long to show a human whole (${Math.max(line.length, display.length)} characters; at most ${DISPLAY_MAX} are shown), and a prompt that hides part of a command is refused: ${decisive.reason}.`,
        rule: 'failClosed:display',
        suggestion: 'Split it into shorter commands, or write a script file the human can read and run that.',
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
          reason: `${subject(decisive)} needs approval: ${decisive.reason}. No approver is configured, so asking means no.${
            this.sandboxOffReason
              ? ` The sandbox is off on this machine, so only commands proven read-only run without a human: ${this.sandboxOffReason}.`
              : ''
          }`,
          rule: decisive.rule,
          ...(suggestion
            ? { suggestion }
            : policy.suggestedRules
              ? {
                  // Rules were possible but none would let it run as written (checked above).
                  suggestion: `No rule in rules.allow lets it run as written (${decisive.reason}); only a human's approval can (configure an approver)${this.sandboxOffReason ? ', or run conch where the sandbox works' : ''}.`,
                }
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
          ...(toAllow ? { suggestedRule: toAllow.map((r) => r.text).join('; ') } : {}),
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
          if (answer === 'always' && toAllow)
            this.remember(toAllow, analysis, policy.escalation !== undefined);
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
      command: shown,
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
    this.appendAudit(entry);
    const level = decision.outcome === 'deny' ? 'warn' : 'info';
    this.logger?.[level](
      {
        tool: request.tool,
        command: shown,
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
      ...(request.kind === 'command' ? { command: shown } : {}),
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
    let decision: PermissionDecision;
    let askedHuman = false;
    const deniedName = this.network.deny.find((p) => p.test(host, port));
    if (deniedName) {
      decision = {
        outcome: 'deny',
        reason: `the network deny-list names ${deniedName.text}`,
        rule: `network.deny:${deniedName.text}`,
      };
    } else {
      const allowed = this.network.allow.find((p) => p.test(host, port));
      const credential = allowed ? undefined : this.credentialHosts.find((p) => p.test(host, port));
      const once = this.networkOnce.get(host);
      // `localhost:<port>` names the host's loopback service the bridge reaches as 127.0.0.1 / ::1.
      const loopback =
        (host === '127.0.0.1' || host === '::1') && this.hostPorts.includes(port)
          ? this.network.allow.find((p) => ['localhost', '127.0.0.1', '::1'].some((h) => p.test(h, port)))
          : undefined;
      if (loopback && !allowed) {
        decision = {
          outcome: 'allow',
          reason: `the network allow-list names ${loopback.text}`,
          rule: `network.allow:${loopback.text}`,
        };
      } else if (allowed) {
        decision = {
          outcome: 'allow',
          reason: `the network allow-list names ${allowed.text}`,
          rule: `network.allow:${allowed.text}`,
        };
      } else if (credential) {
        decision = {
          outcome: 'allow',
          reason: `a credential is configured for ${credential.text}`,
          rule: `credentials:${credential.text}`,
        };
      } else if (this.networkSession.has(host) || (once !== undefined && once > performance.now())) {
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
      // Only an allowed name is looked up. The deny-list covers every address it resolves to; a
      // name that resolves to this machine or its network (loopback, link-local: cloud metadata,
      // private ranges) is reached only when the allow-list names that address itself (no DNS
      // rebinding onto them).
      if (decision.outcome === 'allow') {
        const addresses = request.resolve ? await request.resolve() : (request.addresses ?? []);
        const deniedAddress = this.network.deny.find((p) => addresses.some((a) => p.test(a, port)));
        if (deniedAddress) {
          decision = {
            outcome: 'deny',
            reason: `${host} resolves to ${addresses.join(', ')}, which the network deny-list names (${deniedAddress.text})`,
            rule: `network.deny:${deniedAddress.text}`,
          };
        } else {
          // A loopback forward the list names (`localhost:<port>`) is the host's service by design,
          // and an address a human allowed was named by that human (a name a human allowed may
          // still resolve onto this machine: the human saw the name, not where it leads).
          const human = askedHuman || decision.rule === `network.approved:${host}`;
          const named = loopback !== undefined || (human && isIP(host) !== 0);
          const internal = named ? undefined : internalRefusal(host, port, addresses, this.network.allow);
          if (internal) decision = { outcome: 'deny', reason: internal, rule: 'network:internalAddress' };
        }
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
    this.appendAudit(entry);
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
    if (answer === 'once') this.networkOnce.set(host, performance.now() + 5 * 60_000);
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
   * - Either way, a rule lets a command run with the user's rights only while it vouches for the
   *   files the command executes (`pinned()`, rule-grants.ts): otherwise it asks, naming the file.
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
      const exact = escalationRule(request, this.workspaceRoot);
      // A rule that is the whole line lets it out too, while it vouches for what the line executes.
      const lines = exact ? this.lineRules(exact) : [];
      // A remote target's files are not this machine's: its rules stand on the command line.
      const line = request.target ? lines[0] && { rule: lines[0] } : this.grants.vouch(lines, analysis.parts);
      const lineRule = line && !line.change ? line.rule : undefined;
      const byRule = analysis.parts.every((p) => p.rule.startsWith('allow:')) || lineRule !== undefined;
      const escalation = { justification: request.escalation.justification, reaches: OUTSIDE_REACHES };
      if (byRule) {
        return {
          verdict: 'allow',
          decisive: analysis.decisive,
          reason: lineRule
            ? `allowed outside the sandbox: the rule "${lineRule.text}" allows it`
            : `allowed outside the sandbox: ${analysis.parts.map((p) => p.reason).join('; ')}`,
          rule: lineRule ? `allow:${lineRule.text}` : analysis.decisive.rule,
          sandbox: 'outside',
        };
      }
      // A rule would have let it out, but what it executes changed since the rule was granted.
      const pinnedPart = analysis.parts.every(
        (p) => p.rule.startsWith('allow:') || p.rule.startsWith('pinned:'),
      )
        ? analysis.parts.find((p) => p.rule.startsWith('pinned:'))
        : undefined;
      const pin = line?.change
        ? { reason: line.change.reason, rule: pinRule(line.change) }
        : pinnedPart && { reason: pinnedPart.reason, rule: pinnedPart.rule };
      const outside = `it asks to run outside the sandbox ("${oneLineText(request.escalation.justification)}")`;
      return {
        verdict: 'ask',
        decisive: {
          command: pinnedPart?.command ?? analysis.decisive.command,
          verdict: 'ask',
          reason: pin ? `${pin.reason}; ${outside}` : outside,
          rule: pin?.rule ?? 'sandbox:escalation',
        },
        reason: '',
        rule: pin?.rule ?? 'sandbox:escalation',
        sandbox: 'outside',
        escalation,
        ...(exact ? { suggestedRules: [exact] } : {}),
      };
    }
    // A host ask rule, or a command the host's deny rules cannot be checked against (its name is
    // only known at run time): asked even inside the sandbox.
    const hostAsk = analysis.parts.find(
      (p) => p.rule.startsWith('ask:') || p.rule === 'failClosed:hostRules',
    );
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

  /**
   * The paths a remote target's commands are judged against: its home and workspace (exec-server
   * targets always say their home; one that does not is judged with `/` as its home, the
   * strictest reading: every path is then under it).
   */
  private targetPaths(target: { workspace: string; home?: string }): PathContext {
    return { ...this.paths, workspaceRoot: target.workspace, home: target.home ?? '/' };
  }

  /**
   * The request's analysis, the text a human would be shown for it (before escapeHidden) and the
   * directory it runs in.
   */
  private analyzeRequest(request: PermissionRequest): { analysis: Analysis; line: string; cwd?: string } {
    if (request.kind === 'command') {
      const plan = request.plan;
      // In a remote target, `~`, the workspace and protected paths are the target's.
      const paths = request.target ? this.targetPaths(request.target) : undefined;
      if (plan && isParsedCommand(plan.parsed)) {
        // The call's one plan: judged with the parse, shell dialect and cwd the runner will use.
        const analysis = readWhole(
          this.analyzer.analyze(plan.line, plan.cwd, {
            dialect: plan.dialect,
            parsed: plan.parsed,
            ...(paths ? { paths } : {}),
          }),
        );
        return { analysis, line: plan.line, cwd: plan.cwd };
      }
      const line = requestLine(request);
      const cwd = posix.resolve(paths?.workspaceRoot ?? this.workspaceRoot, request.cwd || '.');
      const judge = (text: string) =>
        readWhole(
          this.analyzer.analyze(text, cwd, {
            ...(request.dialect ? { dialect: request.dialect } : {}),
            ...(paths ? { paths } : {}),
          }),
        );
      const analysis = judge(line);
      const env = Object.keys(request.env ?? {});
      if (env.length > 0 && envExports(request.env, Number.POSITIVE_INFINITY).length === 0) {
        // Variables too many to parse with the command (requestLine left them out): each piece of
        // their `export` line is judged on its own, as strictly as it would be with the command,
        // and the strictest answer of all counts (summarize, as for one line).
        const pieces = envExports(request.env).map(judge);
        const shownEnv = `export ${env.length} variables (${env.slice(0, 20).join(', ')}${env.length > 20 ? ', …' : ''})`;
        return {
          analysis: summarize([...pieces, analysis].flatMap((a) => a.parts)),
          line: `${shownEnv}\n${line}`,
          cwd,
        };
      }
      return { analysis, line, cwd };
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
      line: request.summary,
    };
  }

  /**
   * The allow rules that would let this asked command run, when rules can (not for fail-closed
   * asks): for each asked part the exact command (`suggestRule`), with the directory it runs in.
   */
  private suggestedRules(analysis: Analysis): Suggestion[] | undefined {
    if (analysis.verdict !== 'ask') return undefined;
    const asks = analysis.parts.filter((p) => p.verdict === 'ask');
    if (asks.some((p) => !p.suggestedRule)) return undefined;
    const out = new Map<string, Suggestion>();
    for (const p of asks) {
      const cwd = p.cwds?.length === 1 ? p.cwds[0] : undefined;
      const prior = out.get(p.suggestedRule!);
      // One rule for two parts that run in different directories holds in neither: not remembered.
      if (prior && prior.cwd !== cwd) out.set(p.suggestedRule!, { text: p.suggestedRule! });
      else out.set(p.suggestedRule!, { text: p.suggestedRule!, ...(cwd ? { cwd } : {}) });
    }
    return [...out.values()];
  }

  /**
   * The suggested rules, if with them in rules.allow the request would be allowed; else undefined:
   * a suggestion that would not let the command run (a redirection's write is judged on its own,
   * `echo x > f.txt` with "echo x" allowed still writes f.txt) is not made. Judged by analysing the
   * request again with the rules added for this one synchronous call.
   */
  private rulesThatAllow(request: PermissionRequest, rules: Suggestion[]): Suggestion[] | undefined {
    const added: CompiledRule[] = [];
    for (const rule of rules) {
      const compiled = compileRule('allow', this.session.length + added.length, rule.text);
      if (typeof compiled === 'string') return undefined;
      if (rule.cwd !== undefined) compiled.cwd = rule.cwd;
      added.push(compiled);
    }
    this.session.push(...added);
    try {
      return this.analyzeRequest(request).analysis.verdict === 'allow' ? rules : undefined;
    } finally {
      this.session.splice(this.session.length - added.length, added.length);
    }
  }

  /**
   * Stores `always` answers as session rules: each the exact command approved, for the directory it
   * ran in only (a rule whose directory is not known is not kept: the answer holds this once). The
   * rule is granted on what the approved command executes now (the whole line's for an escalation,
   * the part's otherwise): a later change asks again; approving again grants it anew.
   */
  private remember(rules: readonly Suggestion[], analysis: Analysis, wholeLine: boolean): void {
    for (const rule of rules) {
      if (rule.cwd === undefined) continue;
      const compiled = compileRule('allow', this.session.length, rule.text);
      if (typeof compiled === 'string' || !compiled.exact) continue;
      compiled.cwd = rule.cwd;
      let kept = this.session.find((r) => r.text === compiled.text && r.cwd === compiled.cwd);
      if (!kept) this.session.push((kept = compiled));
      this.grants.grantApproved(
        kept,
        wholeLine ? analysis.parts : analysis.parts.filter((p) => p.suggestedRule === rule.text),
      );
    }
  }

  /**
   * The rules that let an escalated command line run outside as a whole: host allow rules without a
   * wildcard that are exactly the line, and the line a human approved with `always` for this
   * directory. Lines with runs of spaces or line breaks never match (rules hold single spaces).
   */
  private lineRules(exact: Suggestion): CompiledRule[] {
    const hostRules = this.config.mode === 'readOnly' ? [] : this.rules.allow;
    return [...hostRules, ...this.session].filter(
      (r) => r.exact && r.text === exact.text && (r.cwd === undefined || r.cwd === exact.cwd),
    );
  }

  /**
   * Where a rule lets a command run with the user's rights — leaving the sandbox, or any command
   * with the sandbox off — each part an allow rule allowed is checked against what the rule was
   * granted on: a part that would execute a file changed, new or unreadable since asks instead,
   * naming the file. Commands inside the sandbox are contained and not checked; nor are a remote
   * target's (its files are not this machine's).
   */
  private pinned(request: PermissionRequest, analysis: Analysis): Analysis {
    if (request.kind !== 'command' || request.target) return analysis;
    if (this.sandboxFor(request) !== 'off' && !request.escalation) return analysis;
    let changed = false;
    const parts = analysis.parts.map((p): Part => {
      if (p.verdict !== 'allow' || !p.grants?.length) return p;
      const vouched = this.grants.vouch(p.grants, [p]);
      if (!vouched?.change) return p;
      changed = true;
      return { ...p, verdict: 'ask', reason: vouched.change.reason, rule: pinRule(vouched.change) };
    });
    return changed ? summarize(parts) : analysis;
  }

  /**
   * Records a decision a tool made itself before asking the gate (a file tool refusing a path
   * outside the workspace or a protected one): audited, logged and emitted like the gate's own, so
   * every refusal of every tool is in one place.
   */
  recordToolDecision(entry: {
    tool: string;
    callId: string;
    /** What the tool was asked to do, one line. */
    summary: string;
    outcome: 'allow' | 'deny';
    reason: string;
    /** The tool's rule, e.g. `files:OUTSIDE_WORKING_DIR`. */
    rule: string;
    cwd?: string;
  }): void {
    const shown = clipDisplay(entry.summary);
    const audit: AuditEntry = {
      time: Date.now(),
      callId: entry.callId,
      tool: entry.tool,
      command: shown,
      ...(entry.cwd ? { cwd: entry.cwd } : {}),
      outcome: entry.outcome,
      verdict: entry.outcome,
      askedHuman: false,
      rule: entry.rule,
      reason: entry.reason,
      parts: [{ command: shown, verdict: entry.outcome, reason: entry.reason, rule: entry.rule }],
      durationMs: 0,
    };
    this.appendAudit(audit);
    this.logger?.[entry.outcome === 'deny' ? 'warn' : 'info'](
      { tool: entry.tool, command: shown, outcome: entry.outcome, rule: entry.rule, callId: entry.callId },
      `permission: ${entry.outcome} (by the tool)`,
    );
    this.events?.emit('permission.decision', {
      tool: entry.tool,
      outcome: entry.outcome,
      askedHuman: false,
      rule: entry.rule,
      reason: entry.reason,
    });
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
  /** Rules that would let it run without asking (each with the directory an `always` answer holds in). */
  suggestedRules?: Suggestion[];
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

/** A rule an asked command could be allowed by, and the directory an `always` answer holds in. */
interface Suggestion {
  text: string;
  cwd?: string;
}

/**
 * The narrowest rule an approved escalation stores: exactly this command line, in this directory
 * (`lineRule` matches it against the whole line, not per simple command).
 */
function escalationRule(
  request: Extract<PermissionRequest, { kind: 'command' }>,
  workspaceRoot: string,
): Suggestion | undefined {
  const line = (request.plan?.line ?? request.command).trim();
  // Prefix syntax reads a `*` as a wildcard and cannot hold line breaks or runs of spaces.
  if (/[\n\r*]|\s\s/.test(line) || line === '') return undefined;
  return { text: line, cwd: request.plan?.cwd ?? resolve(workspaceRoot, request.cwd || '.') };
}

/**
 * What cannot be read whole is denied, in every mode: a line over the parse limit, one the parser
 * gave up on (syntax it cannot read, a timeout) or a command string nested deeper than the gate
 * reads. Asking a human about it would show them a command the gate never checked.
 */
function readWhole(analysis: Analysis): Analysis {
  if (!analysis.parts.some((p) => UNREAD.has(p.rule) && p.verdict === 'ask')) return analysis;
  return summarize(
    analysis.parts.map((p) =>
      UNREAD.has(p.rule) && p.verdict === 'ask'
        ? { ...p, verdict: 'deny', reason: `${p.reason}; what cannot be read whole is refused` }
        : p,
    ),
  );
}

const UNREAD = new Set(['failClosed:parse', 'failClosed:nesting']);

/**
 * The command as the audit log, the logs and events keep it: escaped (escapeHidden), at most
 * DISPLAY_MAX characters. Only the head that can be kept is escaped; the count of what is not
 * kept is the escaped head's overflow plus the characters past it as they are.
 */
function clipDisplay(line: string): string {
  const head = escapeHidden(line.slice(0, DISPLAY_MAX));
  const dropped = Math.max(0, head.length - DISPLAY_MAX) + Math.max(0, line.length - DISPLAY_MAX);
  return dropped > 0 ? `${head.slice(0, DISPLAY_MAX)}… (${dropped} more characters not kept)` : head;
}

/** The rule a decision names when a rule no longer vouches for a command: the file that changed. */
function pinRule(change: Change): string {
  return `pinned:${change.file ?? 'unknown files'}`;
}

function oneLineText(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}

/** Longest command shown to a human (a longer one is refused rather than cut) or kept in the audit log. */
const DISPLAY_MAX = MAX_DISPLAY_CHARS;

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
