import {
  ConchError,
  definePlugin,
  InvalidConfigError,
  PERMISSION_GATE,
  toValidationIssues,
  token,
  type PluginContext,
  type PluginDefinition,
  type PluginRegistry,
  type PluginSetup,
} from '@conch/core';
import { probeSandbox, probeSandboxSync } from '@conch/process';
import {
  compileHostPattern,
  CREDENTIAL_INJECTOR,
  CredentialInjector,
  InvalidCredentialConfigError,
  normalizeCredentials,
  type CredentialConfig,
} from '@conch/sandbox';
import { loadShellParser, type ShellParser } from '@conch/shell-syntax';
import { ZodError, type z } from 'zod';
import { permissionConfigSchema, type PermissionConfig } from './config.js';
import { compileRules, PermissionEngine } from './gate.js';

/**
 * The registry's process manager as far as the gate needs it (the token `@conch/process` provides;
 * named here so the gate does not depend on the process package).
 */
const SUPERVISED = token<{ supervisorPids?(): readonly number[] }>('conch.process.ProcessManager');

/**
 * The bash parser (tree-sitter WASM, about 15 ms of CPU and 11 MiB, once per process) loads when
 * the plugin is first exposed, not when this module is imported: importing costs nothing, and the
 * module has no top-level await, so it also bundles into CommonJS (conch-mcp's published server).
 * Until it is there, a setup is asynchronous (`await registry.exposeTool('permission')`); once it
 * is, setup and config validation are synchronous, as `exposeSync` needs.
 */
let parser: ShellParser | undefined;

/**
 * Loads the parser the gate judges commands with; resolves once exposing the permission plugin is
 * synchronous (for hosts and tests that call `registry.exposeSync('permission', …)`). Exposing the
 * plugin starts the same load. A failed load rejects and is retried by the next call.
 */
export function permissionReady(options: { probeSandbox?: boolean } = {}): Promise<void> {
  // `probeSandbox`: also start the sandbox probe (a bwrap run in a child, cached per process), so
  // the exposure that chooses the sandbox finds the answer instead of blocking for it (conch-mcp
  // starts both while it reads its config).
  if (options.probeSandbox) void probeSandbox();
  return loadParser().then(() => undefined);
}

/** The parser, kept for the synchronous paths once loaded. */
function loadParser(): Promise<ShellParser> {
  return loadShellParser().then((loaded) => (parser = loaded));
}

/** The engine itself (the same instance as the `PERMISSION_GATE` service), for hosts that read its audit. */
export const PERMISSION_ENGINE = token<PermissionEngine>('conch.permission.PermissionEngine');

/** Rules must compile and their examples must hold; problems name the rule. */
const configSchema = permissionConfigSchema.superRefine((config, ctx) => {
  const compiled = compileRules(config.rules);
  if ('problems' in compiled) {
    for (const p of compiled.problems) ctx.addIssue({ code: 'custom', path: p.path, message: p.message });
    return;
  }
  // Credentials: each field checked as the injector will (a fromEnv's value is read at expose).
  if (config.credentials.length)
    try {
      normalizeCredentials(config.credentials.map((c) => toCredential(c, c.value ?? UNREAD_VALUE)));
    } catch (error) {
      if (!(error instanceof InvalidCredentialConfigError)) throw error;
      for (const issue of error.issues)
        ctx.addIssue({
          code: 'custom',
          path: issue.path.split('.').map((k) => (/^\d+$/.test(k) ? Number(k) : k)),
          message: issue.expected,
        });
    }
  for (const list of ['allow', 'deny'] as const) {
    config.network[list].forEach((text, i) => {
      const compiled = compileHostPattern(text);
      if (typeof compiled === 'string')
        ctx.addIssue({ code: 'custom', path: ['network', list, i], message: compiled });
    });
  }
  // Without the parser yet, the examples are checked by setup once it has loaded (same issues).
  if (!parser) return;
  for (const p of exampleProblems(parser, config))
    ctx.addIssue({ code: 'custom', path: p.path, message: p.message });
}) as unknown as z.ZodType<PermissionConfig>;

/** What stands for a fromEnv credential's value while the config is checked (before it is read). */
const UNREAD_VALUE = 'conch-unread-fromEnv-value';

/** A config entry as the injector takes it, with its value. */
function toCredential(entry: PermissionConfig['credentials'][number], value: string): CredentialConfig {
  const { fromEnv: _fromEnv, value: _value, ...rest } = entry;
  return { ...rest, value } as CredentialConfig;
}

/**
 * The credential injector of the config's `credentials` (undefined with none): each value read
 * from the entry or from conch's own environment (`fromEnv`); an entry whose variable is unset is
 * left out, said in the log and in status (`credentials.missing`), and the rest work. Making the
 * session CA takes ~0.3–0.5 s, off the main thread.
 */
async function startCredentials(
  ctx: PluginContext<PermissionConfig>,
): Promise<{ injector?: CredentialInjector; missing: string[] }> {
  const missing: string[] = [];
  const list: CredentialConfig[] = [];
  for (const entry of ctx.config.credentials) {
    const value = entry.value ?? process.env[entry.fromEnv!];
    if (value) list.push(toCredential(entry, value));
    else missing.push(entry.fromEnv!);
  }
  if (missing.length)
    ctx.logger.warn(
      { missing },
      "permission: credentials whose variable is not set in conch's environment are left out",
    );
  if (!list.length) return { missing };
  const injector = await CredentialInjector.create(list, { logger: ctx.logger });
  return { injector, missing };
}

/** Rule examples that their rule does not match (or matches when it should not). */
function exampleProblems(shellParser: ShellParser, config: PermissionConfig) {
  return new PermissionEngine({ parser: shellParser, config, cwd: process.cwd() }).checkExamples();
}

/**
 * A config's rule examples, checked once the parser has loaded: the same issues the config schema
 * adds, shaped into INVALID_CONFIG by the registry's own toValidationIssues.
 */
function assertExamples(shellParser: ShellParser, config: PermissionConfig): void {
  const problems = exampleProblems(shellParser, config);
  if (problems.length === 0) return;
  const error = new ZodError(
    problems.map((p) => ({ code: 'custom' as const, path: p.path, message: p.message })),
  );
  throw new InvalidConfigError('permission', toValidationIssues(error, config));
}

function instructions(
  config: PermissionConfig,
  sandbox: PermissionEngine['sandbox'],
  offReason?: string,
): string {
  const lines = [
    'Every command passes a permission check before it runs, on the command as the shell will read it.',
    'Always refused: sudo/su/doas/pkexec anywhere; piping or substituting a download (curl, wget) into a shell or interpreter (download to a file, read it, then run it); writing to .env files, .ssh/, .git/hooks/, .git/config, editor and agent settings (.vscode/, .claude/, .mcp.json, ...) or shell rc files; rm -r of /, ~ or the workspace root; fork bombs; killing the agent runtime itself (kill/pkill/killall of its processes).',
  ];
  if (sandbox !== 'off') {
    lines.push(
      sandbox === 'read-only'
        ? 'Commands run without asking in a read-only sandbox: nothing can be written, /tmp is private, there is no network.'
        : 'Commands run without asking in a sandbox: the workspace is writable, the rest of the filesystem and protected files (.git/hooks, .git/config, .env*) are read-only, /tmp is private, caches (npm, pip, go) are private to the sandbox, there is no network, and other processes on the machine are invisible.',
      'A write the sandbox refused comes back with error_code SANDBOX_REFUSED_WRITE. If the task really needs to write outside the workspace or to reach the network, call again with sandbox: false and a justification (one sentence a human will read): a human decides. Do not retry the same command inside the sandbox.',
    );
    if (config.mode === 'readOnly') lines.push('This session is read-only: commands that write are refused.');
  } else if (config.mode === 'readOnly')
    lines.push(
      'This session is read-only: only commands that just read (ls, cat, grep, git status/log/diff, ...) run; anything else is refused.',
    );
  else if (config.mode === 'acceptAll')
    lines.push('Commands other than the refused ones run without asking.');
  else
    lines.push(
      'Read-only commands (ls, cat, head, grep, rg, git status/log/diff/show, find without -delete, ...) run at once, in a read-only sandbox without network where the machine supports it; other commands need approval. eval, ${x@P}, arithmetic on variables, assignments to special variables (PATH, PAGER, PROMPT_COMMAND, ...) and bash -c "$var" always need approval, so prefer plain commands and run steps separately.',
    );
  if (sandbox === 'off' && offReason && config.sandbox !== 'off')
    lines.push(
      `There is no sandbox on this machine (${offReason}), so every command that is not provably read-only needs a human's approval: prefer reading commands, and tell the user why work is blocked if it is.`,
    );
  if (config.rules.deny.length)
    lines.push(
      `Also refused by the host: ${config.rules.deny.map((r) => (typeof r === 'string' ? r : 'pattern' in r ? r.pattern : `/${r.regex}/`)).join(', ')}.`,
    );
  lines.push(
    'A refused call returns permission_denied with the reason; do not retry the same command in another form.',
  );
  return lines.join('\n');
}

/**
 * The sandbox the gate runs commands in: the config's, or by default 'workspace-write' where
 * bubblewrap works and 'off' where it does not (macOS, locked-down containers), said once in the
 * log and in `registry.status()`. A configured sandbox that cannot work here also falls back to
 * 'off' (the gate then asks for anything not provably read-only) rather than failing every call.
 */
function chooseSandbox(config: PermissionConfig): { mode: PermissionEngine['sandbox']; reason?: string } {
  if (config.sandbox === 'off') return { mode: 'off', reason: "the permission config sets sandbox: 'off'" };
  // Synchronous (cached: the first exposure probed while the parser loaded; else a few ms, once
  // per process): setup stays synchronous for exposeTool.
  const status = probeSandboxSync();
  if (status.available) return { mode: config.sandbox ?? 'workspace-write' };
  const why = `bubblewrap cannot make a sandbox here (${status.reason ?? 'unknown reason'})${status.fix ? `; to enable it: ${status.fix}` : ''}`;
  // A sandbox the host named is required: the exposure fails rather than run without it.
  if (config.sandbox !== undefined)
    throw new ConchError({
      code: 'SANDBOX_UNAVAILABLE',
      message: `permission: the config requires the sandbox (sandbox: '${config.sandbox}'), and ${why}. Leave sandbox unset to run without it (every command not provably read-only then asks).`,
    });
  return { mode: 'off', reason: why };
}

/** A command that walks the usual paths of a judgement (a pipeline, a redirect, a read). */
const WARM_UP_COMMAND = 'ls -la | grep -v x > /dev/null && cat README.md';
/** How long after expose the warm-up runs (the exposing host's own next steps go first). */
const WARM_UP_DELAY_MS = 200;

/** The permission plugin: registers the gate every command tool call passes through. */
export const permissionPlugin: PluginDefinition<PermissionConfig> = definePlugin<PermissionConfig>({
  name: 'permission',
  version: '0.0.0',
  description:
    'Decides allow / ask / deny for each command on its parse: safety rules, host rules, approvals, audit log',
  configSchema,
  setup(ctx) {
    if (parser) return setupWith(parser, ctx);
    // First exposure in this process: the parser loads (asynchronously), then the examples the
    // config validation could not check yet are checked. The sandbox probe (a real bwrap run, ~20
    // ms of wall clock on a slow machine) runs meanwhile, so chooseSandbox finds its answer cached
    // instead of blocking for it: conch-mcp's start pays for the longer of the two, not both.
    const probing = ctx.config.sandbox === 'off' ? undefined : probeSandbox();
    return Promise.all([loadParser(), probing]).then(([loaded]) => {
      assertExamples(loaded, ctx.config);
      return setupWith(loaded, ctx);
    });
  },
});

function setupWith(
  shellParser: ShellParser,
  ctx: PluginContext<PermissionConfig>,
): PluginSetup | Promise<PluginSetup> {
  const setup = setupGate(shellParser, ctx);
  if (!ctx.config.credentials.length) return setup;
  // Credentials make the setup asynchronous (the session CA): `await registry.exposeTool(…)`.
  return startCredentials(ctx).then(({ injector, missing }) => {
    if (injector) ctx.provide(CREDENTIAL_INJECTOR, injector);
    ctx.reportStatus('credentials', () => ({
      destinations: injector?.destinations().map((d) => `${d.host}:${d.port}`) ?? [],
      variables: Object.keys(injector?.placeholderEnv() ?? {}),
      ...(missing.length ? { missing } : {}),
    }));
    return {
      ...setup,
      dispose: async () => {
        injector?.close();
        await setup.dispose?.();
      },
    };
  });
}

function setupGate(shellParser: ShellParser, ctx: PluginContext<PermissionConfig>): PluginSetup {
  const sandbox = chooseSandbox(ctx.config);
  const engine = new PermissionEngine({
    parser: shellParser,
    config: ctx.config,
    cwd: ctx.env.cwd,
    logger: ctx.logger,
    events: ctx.events,
    // The registry's process supervisors, read when a kill is judged (the manager is created lazily).
    supervisorPids: () => ctx.resolveOptional(SUPERVISED)?.supervisorPids?.() ?? [],
    sandbox: sandbox.mode,
    // Said in refusals only when the machine, not the config, turned the sandbox off.
    ...(sandbox.reason && ctx.config.sandbox !== 'off' ? { sandboxOffReason: sandbox.reason } : {}),
  });
  ctx.provide(PERMISSION_GATE, engine);
  ctx.provide(PERMISSION_ENGINE, engine);
  if (sandbox.mode === 'off' && ctx.config.sandbox !== 'off')
    ctx.logger.warn(
      { reason: sandbox.reason },
      "permission: no sandbox (sandbox: 'off'): commands that are not provably read-only ask for approval",
    );
  // The warm-up judgement below: 'pending' until it ran, then 'done' (or 'failed': logged, and the
  // first real check pays what it would have).
  let warmUp: 'pending' | 'done' | 'failed' = 'pending';
  ctx.reportStatus('permission', () => ({
    sandbox: sandbox.mode,
    ...(sandbox.reason ? { sandboxReason: sandbox.reason } : {}),
    mode: ctx.config.mode,
    warmUp,
  }));
  if (ctx.config.mode === 'acceptAll')
    ctx.logger.warn(
      'permission: acceptAll mode — every command the safety rules do not deny runs without asking',
    );
  // Warm at expose (the parser has loaded by now): one throwaway judgement shortly
  // after expose compiles the analyzer's code paths, so the first real check costs about what
  // the tenth does. Never fails the exposure, never keeps the host alive, skipped once disposed.
  let disposed = false;
  const warm = setTimeout(() => {
    if (disposed) return;
    try {
      engine.evaluate(WARM_UP_COMMAND);
      warmUp = 'done';
    } catch (error) {
      warmUp = 'failed';
      ctx.logger.debug({ err: error }, 'permission: warm-up judgement failed');
    }
  }, WARM_UP_DELAY_MS);
  warm.unref();
  return {
    instructions: instructions(ctx.config, sandbox.mode, sandbox.reason),
    dispose: () => {
      disposed = true;
      clearTimeout(warm);
      return engine.dispose();
    },
  };
}

/** The permission engine of a registry (exposed with `exposeTool('permission')`), or undefined. */
export function getPermissionEngine(
  registry: Pick<PluginRegistry, 'resolveOptional'>,
): PermissionEngine | undefined {
  return registry.resolveOptional(PERMISSION_ENGINE);
}

export default permissionPlugin;
