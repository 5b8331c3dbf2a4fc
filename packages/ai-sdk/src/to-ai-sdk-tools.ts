import {
  AbortedError,
  ConchError,
  toToolErrorResult,
  type ApproveFn,
  type JsonSchema,
  type PluginRegistry,
  type ToolErrorResult,
  type ToolProgress,
  type ToolResult,
} from '@conch/core';
import { jsonSchema, tool, type Tool, type ToolCallOptions } from 'ai';

/**
 * What the model sees when a tool call threw (unknown tool, bad arguments, a plugin bug): core's
 * `toToolErrorResult`, the same body conch-mcp sends.
 */
export type ConchToolError = ToolErrorResult;

export interface ToAiSdkToolsOptions {
  /** Only these tools (default: every exposed tool). Unknown names throw. */
  include?: readonly string[];
  /** Leave these tools out. */
  exclude?: readonly string[];
  /**
   * Per-call approver for permission asks (e.g. an inline prompt in a chat UI); preferred over the
   * permission plugin's configured `approve`. Receives the AI SDK tool call id.
   */
  approve?: (...args: [...Parameters<ApproveFn>, toolCallId: string]) => ReturnType<ApproveFn>;
  /** Progress of long tools, by AI SDK tool call id. */
  onProgress?: (toolCallId: string, progress: ToolProgress) => void;
}

export type ConchAiSdkTool = Tool<Record<string, unknown>, ToolResult>;

const thrownResults = new WeakSet<object>();

/** Whether a tool output is a thrown error turned into a result by this adapter. */
export function isConchToolError(output: unknown): output is ConchToolError {
  return typeof output === 'object' && output !== null && thrownResults.has(output);
}

/**
 * The registry's exposed tools as Vercel AI SDK 5 tools, ready for `streamText({ tools })`.
 *
 * - The input schema is the registry's JSON Schema (arguments are validated by the registry).
 * - The AI SDK's `abortSignal` reaches `registry.execute`, so aborting a stream kills the tool's
 *   processes; an aborted call rethrows so the SDK ends the step.
 * - A thrown `ConchError` (bad arguments, unknown tool, ...) becomes `{ error, error_code, display }`, sent to the
 *   model as an error result (`error-json`) it can correct itself from. Denials and recoverable
 *   failures are ordinary results already.
 * - The AI SDK tool call id is the registry call id, so `registry.events` correlate with the stream.
 */
export function toAiSdkTools(
  registry: PluginRegistry,
  options: ToAiSdkToolsOptions = {},
): Record<string, ConchAiSdkTool> {
  const exposed = registry.tools();
  const names = new Set(exposed.map((t) => t.name));
  for (const name of [...(options.include ?? []), ...(options.exclude ?? [])]) {
    if (!names.has(name)) {
      throw new ConchError({
        code: 'NO_SUCH_TOOL',
        message: `toAiSdkTools: include/exclude names tool '${name}', which is not exposed; exposed tools: ${[...names].sort().join(', ') || '(none)'}`,
      });
    }
  }
  const tools: Record<string, ConchAiSdkTool> = {};
  for (const info of exposed) {
    if (options.include && !options.include.includes(info.name)) continue;
    if (options.exclude?.includes(info.name)) continue;
    tools[info.name] = tool<Record<string, unknown>, ToolResult>({
      description: info.description,
      inputSchema: jsonSchema<Record<string, unknown>>(info.inputSchema as JsonSchema & object),
      execute: (input, call) => runTool(registry, info.name, input, call, options),
      toModelOutput: (output: ToolResult) =>
        isConchToolError(output)
          ? {
              type: 'error-json',
              value: { error: output.error, error_code: output.error_code, display: output.display },
            }
          : { type: 'json', value: toJsonValue(output) },
    });
  }
  return tools;
}

async function runTool(
  registry: PluginRegistry,
  name: string,
  input: Record<string, unknown>,
  call: ToolCallOptions,
  options: ToAiSdkToolsOptions,
): Promise<ToolResult> {
  const { approve, onProgress } = options;
  try {
    return await registry.execute(name, input, {
      callId: call.toolCallId,
      ...(call.abortSignal ? { signal: call.abortSignal } : {}),
      ...(approve ? { approve: (request, opts) => approve(request, opts, call.toolCallId) } : {}),
      ...(onProgress ? { onProgress: (progress) => onProgress(call.toolCallId, progress) } : {}),
    });
  } catch (error) {
    if (call.abortSignal?.aborted || (ConchError.isInstance(error) && error.code === 'ABORTED')) {
      throw ConchError.isInstance(error) ? error : new AbortedError(`Tool call '${name}'`, error);
    }
    // The registry wraps plugin crashes in a ConchError already; anything else is named here.
    const result = toToolErrorResult(
      ConchError.isInstance(error)
        ? error
        : new ConchError({
            code: 'TOOL_FAILED',
            message: `Tool '${name}' failed: ${(error as Error)?.message ?? String(error)}`,
            cause: error,
          }),
    );
    thrownResults.add(result);
    return result;
  }
}

type JsonValue = null | string | number | boolean | JsonValue[] | { [key: string]: JsonValue };

/** Tool results are plain data, but drop what JSON cannot carry (undefined, functions, cycles). */
function toJsonValue(value: unknown): JsonValue {
  try {
    return JSON.parse(JSON.stringify(value ?? null)) as JsonValue;
  } catch (error) {
    return { error: `tool result is not JSON-serialisable: ${(error as Error).message}` };
  }
}
