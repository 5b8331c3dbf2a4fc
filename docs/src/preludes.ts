// What a documentation fragment may rely on without showing it: the host's approver, a registry
// it continues, a plugin's context. A block names the ones it uses (`<!-- docs-check: with … -->`);
// a block without a directive must run as printed. Each prelude is TypeScript placed before the
// block; `after` runs once the block is done (the block may already have done it: both are safe to
// repeat).

export interface Prelude {
  /** Other preludes this one needs, placed before it. */
  needs?: string[];
  code: string;
  after?: string;
}

export function preludes(paths: { repoRoot: string }): Record<string, Prelude> {
  return {
    approve: { code: `const approve = async (_request: unknown) => 'deny' as const;` },
    askHuman: { code: `const askHuman = async (..._shown: unknown[]) => true;` },
    signal: { code: `const signal = new AbortController().signal;` },
    abortSignal: { code: `const abortSignal = new AbortController().signal;` },
    ui: { code: `const ui = { append: (..._shown: unknown[]) => {} };` },
    logger: {
      code: `const logger: any = { error: (...a: unknown[]) => console.error(...a), warn() {}, info() {}, debug() {}, trace() {}, fatal() {}, child: () => logger };`,
    },
    assert: { code: `import assert from 'node:assert/strict';` },
    PluginRegistry: { code: `import { PluginRegistry } from '@conch/core';` },
    cwd: { code: `const cwd = process.cwd();` },
    workspace: { code: `const workspace = process.cwd();` },
    cache: {
      // Under the block's throwaway HOME, which the runner removes (the system's temp dir would keep it).
      code: `import { mkdtempSync as __mkdtemp } from 'node:fs';\nimport { homedir as __homedir } from 'node:os';\nconst cache = __mkdtemp(__homedir() + '/docs-cache-');`,
    },
    repo: {
      code: `import { execFileSync as __git } from 'node:child_process';\nconst repo = process.cwd();\n__git('git', ['init', '-q'], { cwd: repo });`,
    },
    /** The plugin guide's example package. */
    here: { code: `const here = ${JSON.stringify(`${paths.repoRoot}/examples/plugin-template`)};` },
    /** A registry rooted at the throwaway workspace, plugins discovered, nothing exposed yet. */
    registry: {
      code: [
        `import { PluginRegistry as __Registry, definePlugin as __definePlugin } from '@conch/core';`,
        `let __hostCtx: any;`,
        `const registry = new __Registry({ cwd: process.cwd(), plugins: [__definePlugin({ name: 'docs-host', version: '0.0.0', setup(c: any) { __hostCtx = c; return { tools: [] }; } })] });`,
        `await registry.discover();`,
      ].join('\n'),
      after: `await registry.dispose();`,
    },
    /** The permission plugin exposed in acceptAll mode (the sandbox still applies). */
    gate: {
      needs: ['registry'],
      code: `await registry.expose('permission', { approve: async () => 'deny' });`,
    },
    cli: { needs: ['gate'], code: `await registry.expose('cli');` },
    terminal: { needs: ['gate'], code: `await registry.expose('terminal');` },
    /** The trash plugin exposed, and a file to put in it. */
    trash: {
      needs: ['gate'],
      code: `import { writeFileSync as __write } from 'node:fs';\nawait registry.expose('trash');\n__write('notes.txt', 'a note\\n');`,
    },
    /** A plugin's setup context (with a signal, as a tool's execute context has). */
    ctx: {
      needs: ['registry'],
      code: `await registry.expose('docs-host');\nconst ctx = { ...__hostCtx, signal: new AbortController().signal };`,
    },
    processes: {
      needs: ['ctx'],
      code: `import { ensureProcessManager as __ensure } from '@conch/process';\nconst processes = __ensure(ctx);`,
    },
    /** An environment on this machine, no browser. */
    env: {
      code: `import { createEnvironment as __createEnvironment } from '@conch/environment';\nconst env = await __createEnvironment({ workingDir: process.cwd(), cdpUrl: 'auto', plugins: { permission: { mode: 'acceptAll' } } });`,
      after: `await env.close();`,
    },
    /** Checks that a DevTools endpoint answers (what a CDP client would connect to). */
    connectMyCdpClient: {
      code: `const connectMyCdpClient = async (url: string) => { const u = new URL(url); const r = await fetch('http://' + u.host + '/json/version'); if (!r.ok) throw new Error('no DevTools endpoint at ' + url); };`,
    },
    /** A scripted model (the only stand-in): it asks cli_based_tool for `du -sh .`, then answers. */
    model: {
      code: [
        `import { MockLanguageModelV2 as __Mock, convertArrayToReadableStream as __stream } from 'ai/test';`,
        `const __usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };`,
        `let __step = 0;`,
        `const model = new __Mock({ doStream: async () => ({ stream: __stream((__step++ === 0`,
        `  ? [{ type: 'stream-start', warnings: [] }, { type: 'tool-call', toolCallId: 'c1', toolName: 'cli_based_tool', input: JSON.stringify({ command: 'du -sh .' }) }, { type: 'finish', finishReason: 'tool-calls', usage: __usage }]`,
        `  : [{ type: 'stream-start', warnings: [] }, { type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'It is small.' }, { type: 'text-end', id: 't' }, { type: 'finish', finishReason: 'stop', usage: __usage }]) as any) }) });`,
      ].join('\n'),
    },
  };
}

/** The preludes a block asked for, dependencies first, each once. */
export function resolvePreludes(
  names: readonly string[],
  all: Record<string, Prelude>,
  where: string,
): { before: string; after: string } {
  const order: string[] = [];
  const visit = (name: string) => {
    if (order.includes(name)) return;
    const prelude = all[name];
    if (!prelude)
      throw new Error(
        `${where}: unknown prelude '${name}' in its docs-check directive; known: ${Object.keys(all).join(', ')}`,
      );
    for (const need of prelude.needs ?? []) visit(need);
    order.push(name);
  };
  for (const name of names) visit(name);
  return {
    before: order.map((n) => all[n]!.code).join('\n'),
    after: order
      .map((n) => all[n]!.after)
      .filter(Boolean)
      .reverse()
      .join('\n'),
  };
}
