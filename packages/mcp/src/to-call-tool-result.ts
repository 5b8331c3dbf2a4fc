import { toToolErrorResult, type ToolResult } from '@conch/core';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** The config file a denial tells the user to edit: the one conch-mcp serves, or the one to create. */
export interface DenialConfigFile {
  path: string;
  /** false: conch-mcp runs on its built-in default, and the file is the one to create. */
  exists: boolean;
}

export interface DenialAdviceOptions {
  /** Where this server's permission config lives. Default: `conch.config.json` (existing). */
  configFile?: DenialConfigFile;
  /** Replaces the sentence said when an allow rule would let the command run (host-API override). */
  configHint?: string;
}

const DOWNLOAD_RULES = new Set(['downloadToInterpreter', 'sourceDownloaded']);

/**
 * What the user of an MCP client can do about a denial, said where conch-mcp's rules live: over
 * MCP nobody can edit rules mid-call, so the advice names the config file and key and that
 * conch-mcp must be restarted — and for a built-in safety rule, that no allow rule overrides it.
 * `undefined` when there is nothing to configure (a human said no, a command too long to show).
 */
export function denialAdvice(result: ToolResult, options: DenialAdviceOptions = {}): string | undefined {
  if (result.permission_denied !== true) return undefined;
  const rule = typeof result.rule === 'string' ? result.rule : '';
  const suggestion = typeof result.suggestion === 'string' ? result.suggestion : undefined;
  const file = options.configFile ?? { path: 'conch.config.json', exists: true };
  const edit = (key: string, value: string) =>
    file.exists
      ? `set ${key} to ${value} in ${file.path} and restart conch-mcp`
      : `create ${file.path} with ${createWith(key, value)} and restart conch-mcp`;
  if (rule.startsWith('safety:')) {
    const id = rule.slice('safety:'.length);
    return [
      `This command is denied by conch's built-in safety rule "${id}": no rules.allow entry overrides it and no prompt can approve it.`,
      DOWNLOAD_RULES.has(id) ? 'Download the script to a file, read it, then run the file.' : '',
      `If the user means to run it, they can run it themselves outside conch-mcp, or switch the rule off for this server: ${edit(`plugins.permission.safety.${id}`, 'false')}.`,
    ]
      .filter(Boolean)
      .join(' ');
  }
  if (rule.startsWith('deny:')) {
    return `This command is denied by the rule "${rule.slice('deny:'.length)}" in plugins.permission.rules.deny${
      file.exists ? ` of ${file.path}` : ''
    }: to allow it, remove that rule there and restart conch-mcp.`;
  }
  if (rule === 'mode:readOnly') {
    return `conch-mcp runs in readOnly mode, which denies everything not known to be read-only and ignores rules.allow: to be asked (or to use allow rules), ${edit('plugins.permission.mode', '"default"')}.`;
  }
  if (suggestion && /rules\.allow/.test(suggestion)) {
    const where =
      options.configHint ??
      (file.exists
        ? `To allow it without asking, add that rule to plugins.permission.rules.allow in ${file.path} and restart conch-mcp.`
        : `To allow it without asking, create ${file.path} with ${createWith('plugins.permission.rules.allow', '["<rule>"]')} and restart conch-mcp.`);
    return `${suggestion}\n${where}`;
  }
  return undefined;
}

/** A conch.config.json that sets one permission key and exposes conch-mcp's default plugins. */
function createWith(key: string, value: string): string {
  // key: plugins.permission.<a>[.<b>]
  const path = key.split('.').slice(2);
  let inner = value;
  for (const part of path.reverse()) inner = `{"${part}":${inner}}`;
  return `{"plugins":{"permission":${inner},"cli":{},"background":{},"files":{}}}`;
}

/**
 * A tool's result as MCP content: the object as `structuredContent` and its JSON as text (for
 * clients that only read text). A result carrying an `error` (a denied call, a command that
 * could not run) is flagged `isError` so the client shows it as a failure the model can react to.
 * A denial the user can do something about gets a second text: what, in which config file
 * (`denialAdvice`).
 */
export function toCallToolResult(result: ToolResult, options: DenialAdviceOptions = {}): CallToolResult {
  const isError = typeof result.error === 'string' && result.error.length > 0;
  const content: CallToolResult['content'] = [{ type: 'text', text: JSON.stringify(result, null, 2) }];
  const advice = denialAdvice(result, options);
  if (advice) content.push({ type: 'text', text: advice });
  return { content, structuredContent: result, ...(isError ? { isError: true } : {}) };
}

/**
 * A thrown error (unknown tool, bad arguments, a crash) as an `isError` result: the same
 * `{ error, error_code, display }` the AI SDK adapter sends (core's `toToolErrorResult`).
 */
export function errorToCallToolResult(error: unknown): CallToolResult {
  const body = toToolErrorResult(error);
  return {
    content: [{ type: 'text', text: JSON.stringify(body, null, 2) }],
    structuredContent: body,
    isError: true,
  };
}
