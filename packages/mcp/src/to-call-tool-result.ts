import { toToolErrorResult, type ToolResult } from '@conch/core';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { DEFAULT_MAX_ANSWER_BYTES, MAX_ERROR_ANSWER_BYTES } from './stdio-transport.js';

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
export function toCallToolResult(
  result: ToolResult,
  options: DenialAdviceOptions & { maxAnswerBytes?: number } = {},
): CallToolResult {
  const build = (body: ToolResult): CallToolResult => {
    const isError = typeof body.error === 'string' && body.error.length > 0;
    const content: CallToolResult['content'] = [{ type: 'text', text: JSON.stringify(body, null, 2) }];
    const advice = denialAdvice(body, options);
    if (advice) content.push({ type: 'text', text: advice });
    return { content, structuredContent: body, ...(isError ? { isError: true } : {}) };
  };
  // Room for the JSON-RPC envelope around it.
  return fitAnswer(result, build, (options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES) - 1024);
}

/**
 * A thrown error (unknown tool, bad arguments, a crash) as an `isError` result: the same
 * `{ error, error_code, display }` the AI SDK adapter sends (core's `toToolErrorResult`), at most
 * MAX_ERROR_ANSWER_BYTES (64 KiB) as an answer.
 */
export function errorToCallToolResult(error: unknown): CallToolResult {
  const build = (body: ToolResult): CallToolResult => ({
    content: [{ type: 'text', text: JSON.stringify(body, null, 2) }],
    structuredContent: body,
    isError: true,
  });
  // Room for the JSON-RPC envelope around it.
  return fitAnswer(toToolErrorResult(error), build, MAX_ERROR_ANSWER_BYTES - 1024);
}

/**
 * `build(result)`, or, when that answer is more than `maxBytes` of JSON, `build` of the result
 * with its longest strings cut in the middle (start and end kept, the cut said in place) and
 * `answer_cut` saying so: an answer an MCP client cannot read (the SDK client closes the connection
 * on a message over 10 MB) is never sent. Results of the tools' default limits are far below it.
 */
function fitAnswer(
  result: ToolResult,
  build: (body: ToolResult) => CallToolResult,
  maxBytes: number,
): CallToolResult {
  const answer = build(result);
  const size = jsonBytes(answer);
  if (size <= maxBytes) return answer;
  const strings = stringLengths(result);
  // The answer holds each string about twice (text and structuredContent) and escaped: cut each
  // to at most `cap` characters, lowering the cap until it fits.
  let cap = strings.reduce((max, length) => Math.max(max, length), 0);
  for (let i = 0; i < 40 && cap > 64; i++) {
    cap = Math.floor(cap * (i === 0 ? Math.min(0.9, maxBytes / size) : 0.7));
    const body: ToolResult = {
      ...(cutStrings(result, cap) as ToolResult),
      answer_cut: `this answer was ${size} bytes, more than the ${maxBytes} conch-mcp sends; strings longer than ${cap} characters keep their start and end`,
    };
    const fitted = build(body);
    if (jsonBytes(fitted) <= maxBytes) return fitted;
  }
  const display = typeof result.display === 'string' ? result.display.slice(0, 200) : undefined;
  return build({
    error: `The answer was ${size} bytes, more than the ${maxBytes} conch-mcp sends, and could not be shortened to fit.`,
    error_code: 'ANSWER_TOO_LARGE',
    display: `✗ ANSWER_TOO_LARGE${display ? `: ${display}` : ''}`,
  });
}

function jsonBytes(value: unknown): number {
  const json = JSON.stringify(value);
  return json.length * 3 <= 1024 ? json.length : Buffer.byteLength(json);
}

/** The lengths of every string in `value` (iterative; results are JSON-safe and bounded in depth). */
function stringLengths(value: unknown): number[] {
  const out: number[] = [];
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') out.push(v.length);
    else if (Array.isArray(v)) for (const item of v) stack.push(item);
    else if (typeof v === 'object' && v !== null) for (const item of Object.values(v)) stack.push(item);
  }
  return out;
}

/** `value` with every string longer than `cap` cut to its first and last cap/2 characters. */
function cutStrings(value: unknown, cap: number, depth = 0): unknown {
  if (typeof value === 'string') {
    if (value.length <= cap) return value;
    const half = Math.floor(cap / 2);
    return `${value.slice(0, half)}\n… [${value.length - 2 * half} characters cut to fit the answer] …\n${value.slice(value.length - half)}`;
  }
  if (depth > 600 || typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((v) => cutStrings(v, cap, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) out[key] = cutStrings(v, cap, depth + 1);
  return out;
}
