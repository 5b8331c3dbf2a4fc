import { toToolErrorResult, type ToolResult } from '@conch/core';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/**
 * A tool's result as MCP content: the object as `structuredContent` and its JSON as text (for
 * clients that only read text). A result carrying an `error` (a denied call, a command that
 * could not run) is flagged `isError` so the client shows it as a failure the model can react to.
 * When a denial suggests a rule, the text also says where that rule goes for conch-mcp.
 */
export function toCallToolResult(result: ToolResult, options: { configHint?: string } = {}): CallToolResult {
  const isError = typeof result.error === 'string' && result.error.length > 0;
  const content: CallToolResult['content'] = [{ type: 'text', text: JSON.stringify(result, null, 2) }];
  if (result.permission_denied === true && typeof result.suggestion === 'string' && options.configHint) {
    content.push({ type: 'text', text: `${result.suggestion}\n${options.configHint}` });
  }
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
