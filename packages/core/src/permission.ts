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
      /**
       * Variables set for this command only (a terminal's `env`): judged as the `export` line the
       * shell runs before the command. When that line is too long to parse with the command (10,000
       * variables), the gate judges it in pieces that fit, and the command on its own.
       */
      env?: Readonly<Record<string, string>>;
      cwd: string;
      /** The call's plan: when present the gate judges it (its parse, dialect and cwd) instead of re-reading `command`. */
      plan?: CommandPlan;
      /** Without a plan: the shell that reads `command` (default bash), e.g. a zsh terminal session. */
      dialect?: CommandPlan['dialect'];
      /**
       * The model asked to run this command outside the sandbox (`sandbox: false`), saying why: the
       * gate asks a human (or a host allow rule answers) instead of confining it.
       */
      escalation?: { justification: string };
      /**
       * False when the command will run where the kernel sandbox cannot be set up (a remote target
       * without bubblewrap): the gate then judges it as with `sandbox: 'off'`. Default: the local
       * machine's answer.
       */
      sandboxAvailable?: boolean;
      /**
       * Where the command runs when that is not this machine (an ssh host, a container, a pod):
       * the gate judges its paths — `~`, the workspace, protected paths — against the target's
       * home and workspace, never this machine's.
       */
      target?: { name: string; workspace: string; home?: string };
    }
  | {
      kind: 'action';
      tool: string;
      /** One line a human can read: what the tool will do. */
      summary: string;
      readOnly?: boolean;
      /**
       * The tool performs the action inside the kernel sandbox the gate's policy describes (a file
       * write run by the sandbox's supervisor): a gate whose sandbox is on lets it run without a
       * prompt, as it does commands.
       */
      inSandbox?: boolean;
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
  /**
   * The command asks to run outside the sandbox: the model's justification, and what it will be
   * able to reach there (one line each), so the human sees what is at stake.
   */
  escalation?: { justification: string; reaches: readonly string[] };
  /** A sandboxed command wants to reach a destination not on the network allow-list. */
  network?: NetworkRequest;
}

export type ApproveFn = (
  request: ApprovalRequest,
  options: { signal?: AbortSignal },
) => Promise<ApprovalAnswer>;

/**
 * Where an allowed command runs: confined by the kernel sandbox ('workspace-write': the workspace
 * writable, nothing else; 'read-only': nothing writable), or 'outside' it (with the user's rights:
 * an escalation a human or a host rule approved, or every command when the gate's sandbox is off;
 * protected paths stay read-only where bubblewrap works).
 */
export type SandboxLevel = 'workspace-write' | 'read-only' | 'outside';

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
  /** Where an allowed command runs (set by a gate with a kernel policy; see KernelPolicy). */
  sandbox?: SandboxLevel;
}

/**
 * What the gate asks the kernel to enforce (see @conch/permission): the sandbox every command
 * runs in, and the paths that stay read-only in it and outside it.
 */
export interface KernelPolicy {
  /**
   * 'workspace-write' / 'read-only': commands run in that sandbox unless a decision says 'outside';
   * 'off': no sandbox is relied on (reads run read-only and everything else sees `readOnlyPaths`
   * read-only where bubblewrap works, as a safety net behind the parser).
   */
  mode: 'workspace-write' | 'read-only' | 'off';
  /** Directories sandboxed commands may write (the workspace, host extras, sandbox-private caches). */
  writableRoots: readonly string[];
  /** Existing paths every command must see read-only (protected files and directories); may be empty. */
  readOnlyPaths: readonly string[];
  /** Writable directories bound over themselves so they cannot be renamed away from the protections inside (`.git`). */
  pinnedPaths: readonly string[];
  /** 'proxy': sandboxed commands reach the network only through the proxy (`checkNetwork` decides); 'none': no network. */
  network?: 'none' | 'proxy';
  /** Secrets hidden inside the sandbox (directories empty, files unreadable). */
  maskedPaths?: readonly string[];
  /**
   * Directories that read as empty inside the sandbox (the user's home, other users' homes, the
   * shared output directory): closed by default, opened by need through `readablePaths`.
   */
  closedPaths?: readonly string[];
  /** Paths under `closedPaths` bound back read-only (toolchains, the host's readableRoots). */
  readablePaths?: readonly string[];
  /**
   * Files shown in place of others inside the sandbox, read-only: `source` (a host file outside
   * every writable root) at `path` — a config with its credential lines removed, a snapshot.
   */
  substitutes?: readonly { path: string; source: string }[];
  /**
   * Host loopback ports sandboxed commands reach at their own address (`127.0.0.1:<port>`,
   * `localhost:<port>`): those the network allow-list names with a port.
   */
  hostPorts?: readonly number[];
  /**
   * The container engine through conch's policy socket (@conch/sandbox engine/): present, the
   * sandbox gets a Docker-API socket that forwards what this policy allows to the host's engine.
   */
  engine?: Readonly<Record<string, unknown>>;
  /**
   * Environment variables sandboxed commands (and the sandbox itself) never get: glob patterns of
   * names (`*_TOKEN`, `AWS_*`), except names matching `keptEnv`.
   */
  hiddenEnv?: readonly string[];
  keptEnv?: readonly string[];
  /** Variables sandboxed commands get (cache locations inside the writable roots, TMPDIR). */
  env: Readonly<Record<string, string>>;
  /**
   * Where protected names apply to paths that appear while the sandbox lives (a new `.envrc`, a
   * repository's hook): the workspace and the host's writable roots, not the sandbox's caches.
   */
  nameRoots?: readonly string[];
  /**
   * Homes inside a writable root (a workspace that is the home) whose configuration stays
   * read-only: every top-level `.*` entry and `bin`, existing or created later.
   */
  configHomes?: readonly string[];
  /** `.env*` files under `nameRoots` are secrets (masked) unless the sandbox made them. */
  dotEnvSecrets?: boolean;
  /**
   * false: the host turned the protected-paths rule off, so protected names are not kept from
   * being created or changed either (secrets stay masked). Default true.
   */
  protectedNames?: boolean;
  /**
   * What an isolated sandbox may take from the machine (@conch/sandbox `SandboxResources`): each
   * private tmpfs's size, the memory and process limits (0: none), and how long an idle sandbox
   * lives before it is closed and its tmpfs memory freed. Absent: @conch/sandbox's defaults.
   */
  resources?: { tmpfsBytes: number; memoryBytes: number; processes: number; idleMs: number };
}

/** A connection a sandboxed command asks the network proxy for. */
export interface NetworkRequest {
  /** Normalised: lowercase, no trailing dot, punycode, canonical IP literals. */
  host: string;
  port: number;
  /** What `host` resolves to (the proxy connects to the first), normalised like hosts. */
  addresses?: readonly string[];
  /**
   * Resolves `host` (outside the sandbox) to its addresses, normalised like hosts. The gate calls it
   * only once the name itself is allowed: a name nobody allowed is never looked up, so a DNS query
   * cannot carry data to a server nobody allowed.
   */
  resolve?: () => Promise<readonly string[]>;
}

/** The gate core calls before every tool run that declares a permission request. */
export interface PermissionGate {
  /**
   * Whether a sandboxed command may connect to `host:port` through the sandbox's proxy: the
   * network allow-list and deny-list, a host rule approved this session, else a human (with no
   * approver: refused). Every decision is audited like a command's.
   */
  checkNetwork?(request: NetworkRequest, options?: { signal?: AbortSignal }): Promise<PermissionDecision>;
  check(
    request: PermissionRequest,
    options: { signal?: AbortSignal; approve?: ApproveFn; callId: string },
  ): Promise<PermissionDecision>;
  /** Paths the kernel must keep read-only for every command (undefined: no kernel wall wanted). */
  kernelPolicy?(): KernelPolicy | undefined;
}
