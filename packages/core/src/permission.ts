/**
 * One command call, planned once and handed to both the gate and the runner: what is judged is
 * exactly what runs. Built by `planCommand` in @conch/shell-syntax.
 */
export interface CommandPlan {
  /** The command line as it reaches the shell (extra `args` appended shell-quoted). */
  readonly line: string;
  /** 'direct': `argv` runs without a shell; 'shell': `line` runs as a script of `shell`. */
  readonly mode: 'direct' | 'shell';
  /** The argv of a direct command. */
  readonly argv?: readonly string[];
  /** The shell that runs the line in shell mode (absolute path). */
  readonly shell: string;
  /** How that shell reads the line; the gate reads it the same way. */
  readonly dialect: 'bash' | 'sh' | 'zsh';
  /** Where it runs (absolute). */
  readonly cwd: string;
  /** The parse of `line` (a `ParsedCommand` of @conch/shell-syntax), shared by the gate and the runner. */
  readonly parsed: object;
}

/** What a tool asks the permission gate about. Built by the tool's `permission` hook. */
export type PermissionRequest =
  | {
      kind: 'command';
      tool: string;
      /** The command line exactly as it will reach the shell (or argv[0] in direct mode). */
      command: string;
      /** Extra argv passed separately (direct mode with `args`). */
      args?: readonly string[];
      cwd: string;
      /** The call's plan: when present the gate judges it (its parse, dialect and cwd) instead of re-reading `command`. */
      plan?: CommandPlan;
      /** Without a plan: the shell that reads `command` (default bash), e.g. a zsh terminal session. */
      dialect?: CommandPlan['dialect'];
    }
  | {
      kind: 'action';
      tool: string;
      /** One line a human can read: what the tool will do. */
      summary: string;
      readOnly?: boolean;
    };

export type ApprovalAnswer = 'once' | 'always' | 'deny';

/** What a human is shown when the gate asks. */
export interface ApprovalRequest {
  tool: string;
  /** The command with hidden characters escaped so a human sees what will really run. */
  display: string;
  request: PermissionRequest;
  reason: string;
  /** The rule that `always` would add, in the host-rule syntax. */
  suggestedRule?: string;
  /** The parsed parts, for UIs that show them. */
  parts?: readonly { command: string; verdict: 'allow' | 'ask' | 'deny'; reason: string }[];
}

export type ApproveFn = (
  request: ApprovalRequest,
  options: { signal?: AbortSignal },
) => Promise<ApprovalAnswer>;

export interface PermissionDecision {
  outcome: 'allow' | 'deny';
  /** Why, in one sentence a model can act on. */
  reason: string;
  /** The rule that decided, if any (a host rule, a safety rule id, a mode). */
  rule?: string;
  /** True when a human was asked. */
  askedHuman?: boolean;
  /** For a deny: what to add to the rules to allow it. */
  suggestion?: string;
  /**
   * Allowed only because every part of the command only reads: a runner may (and conch's do,
   * where bubblewrap works) enforce that with a read-only sandbox, so a parser mistake becomes a
   * failed write instead of a breach.
   */
  readOnly?: boolean;
}

/**
 * What the gate asks the kernel to enforce (see @conch/permission): commands allowed as reads run
 * read-only, and every other command sees these paths read-only.
 */
export interface KernelPolicy {
  /** Existing paths every command must see read-only (protected files and directories); may be empty. */
  readOnlyPaths: readonly string[];
}

/** The gate core calls before every tool run that declares a permission request. */
export interface PermissionGate {
  check(
    request: PermissionRequest,
    options: { signal?: AbortSignal; approve?: ApproveFn; callId: string },
  ): Promise<PermissionDecision>;
  /** Paths the kernel must keep read-only for every command (undefined: no kernel wall wanted). */
  kernelPolicy?(): KernelPolicy | undefined;
}
