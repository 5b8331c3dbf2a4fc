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
}

/** The gate core calls before every tool run that declares a permission request. */
export interface PermissionGate {
  check(
    request: PermissionRequest,
    options: { signal?: AbortSignal; approve?: ApproveFn; callId: string },
  ): Promise<PermissionDecision>;
}
