import {
  AbortedError,
  ConchError,
  toToolErrorResult,
  type ApproveFn,
  type JsonSchema,
  type PluginRegistry,
  type ToolProgress,
  type ToolResult,
} from '@conch/core';
import { jsonSchema } from 'ai';
import { ConchToolCallError, type ConchToolError } from './conch-tool-call-error.js';

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

/**
 * The second argument of a tool's `execute`: `ToolCallOptions` in ai 5, `ToolExecutionOptions` in
 * ai 6 and 7. Only the fields every supported major passes are read.
 */
export interface ConchToolCallOptions {
  toolCallId: string;
  abortSignal?: AbortSignal;
}

/**
 * One conch tool as an AI SDK tool (what `tool({ ... })` returns). Declared here rather than as
 * `ai`'s `Tool` so that it fits the `ToolSet` of ai 5, 6 and 7 alike, whichever copy of `ai`
 * TypeScript finds beside this package: each major's `Tool` and `Schema` types are distinct.
 */
export interface ConchAiSdkTool {
  description: string;
  /** `jsonSchema(...)` of the registry's JSON Schema, made with the `ai` this package imports. */
  inputSchema: any;
  execute: (input: Record<string, unknown>, options: ConchToolCallOptions) => Promise<ToolResult>;
}

/**
 * Whether a `tool-error` part's `error` is a failed conch call ({@link ConchToolCallError}): its
 * `result` is what the model read. Successful calls are `tool-result` parts.
 */
export function isConchToolError(error: unknown): error is ConchToolCallError {
  return ConchToolCallError.isInstance(error);
}

/**
 * The registry's exposed tools as Vercel AI SDK tools (ai 7, 6 and 5), ready for
 * `generateText` / `streamText({ tools })`.
 *
 * - The input schema is the registry's JSON Schema (arguments are validated by the registry).
 * - The AI SDK's `abortSignal` reaches `registry.execute`, so aborting a stream kills the tool's
 *   processes; an aborted call rethrows so the SDK ends the step.
 * - A successful result is the tool's output: the model reads it as JSON (`json` output).
 * - A failed call (a result with `error`: a denial, a command that could not run; or a thrown
 *   `ConchError`: bad arguments, unknown tool, a plugin bug) throws a {@link ConchToolCallError}:
 *   the SDK makes it a `tool-error` part and the model reads the whole result as an error
 *   (`error-text`), so it can correct itself and the loop goes on.
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
    // No toModelOutput: each major's default sends an object result as `json` (ai 5 passes the
    // output to toModelOutput, ai 6 and 7 `{ toolCallId, input, output }`), and the registry's
    // results are JSON-safe already. No `tool()` either: it returns its argument, typed with the
    // `Tool` of one major (the tests check that the result fits each major's ToolSet).
    tools[info.name] = {
      description: info.description,
      inputSchema: anyMajorSchema(info.inputSchema as JsonSchema & object),
      execute: (input, call) => runTool(registry, info.name, input, call, options),
    };
  }
  return tools;
}

/**
 * `jsonSchema()` of the `ai` this package resolves, marked as a validator too: ai 5 tells a schema
 * it made from a Standard Schema by that mark (`Symbol.for('vercel.ai.validator')`), which ai 6 and
 * 7 dropped, and without it ai 5 fails every call ("value is not a function"). So the tools work
 * with whichever major the host's SDK is, even when this package resolves another one (a
 * workspace, a hoisted install): the registry validates arguments itself, so no `validate`.
 */
function anyMajorSchema(schema: JsonSchema & object) {
  return Object.assign(jsonSchema<Record<string, unknown>>(schema), {
    [Symbol.for('vercel.ai.validator')]: true,
  });
}

async function runTool(
  registry: PluginRegistry,
  name: string,
  input: Record<string, unknown>,
  call: ConchToolCallOptions,
  options: ToAiSdkToolsOptions,
): Promise<ToolResult> {
  const { approve, onProgress } = options;
  let result: ToolResult;
  try {
    result = await registry.execute(name, input, {
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
    const cause = ConchError.isInstance(error)
      ? error
      : new ConchError({
          code: 'TOOL_FAILED',
          message: `Tool '${name}' failed: ${(error as Error)?.message ?? String(error)}`,
          cause: error,
        });
    throw new ConchToolCallError({
      toolName: name,
      toolCallId: call.toolCallId,
      result: toToolErrorResult(cause),
      cause,
    });
  }
  if (isFailure(result))
    throw new ConchToolCallError({ toolName: name, toolCallId: call.toolCallId, result });
  return result;
}

/** A result that carries an `error` (the registry adds its `error_code` and `display`). */
function isFailure(result: ToolResult): result is ConchToolError {
  return typeof result.error === 'string' && result.error.length > 0 && typeof result.error_code === 'string';
}
