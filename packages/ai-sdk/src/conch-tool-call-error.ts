import { ConchError, type ToolErrorResult, type ToolResult } from '@conch/core';

const BRAND = Symbol.for('conch.ai-sdk.ConchToolCallError');

/**
 * What the model reads when a conch tool call failed: the whole result (`error`, `error_code`,
 * `display` and whatever else the tool reported: `output_file`, `permission_denied`, `rule`, …).
 */
export type ConchToolError = ToolErrorResult & ToolResult;

/**
 * A conch tool call that failed, thrown from the AI SDK tool's `execute` so the SDK records a
 * `tool-error` part and the model reads it as an error result (`error-text`; Anthropic's
 * `is_error`). Thrown for a result that carries an `error` (a denied call, a command that could not
 * run: the same results conch-mcp flags `isError`) and for a thrown `ConchError` or plugin bug
 * (core's `toToolErrorResult`). `code` is the result's `error_code`; `result` is the whole result.
 *
 * The message is the result as JSON, so every field reaches the model: the AI SDK sends
 * `error.message` (ai 5, 6) or `error.toString()` (ai 7) as the error text, and `toString()`
 * returns the message alone so both read the same.
 */
export class ConchToolCallError extends ConchError {
  readonly toolName: string;
  readonly toolCallId: string;
  readonly result: ConchToolError;
  private readonly [BRAND] = true;

  constructor(options: { toolName: string; toolCallId: string; result: ConchToolError; cause?: unknown }) {
    super({ code: options.result.error_code, message: JSON.stringify(options.result), cause: options.cause });
    this.name = 'ConchToolCallError';
    this.toolName = options.toolName;
    this.toolCallId = options.toolCallId;
    this.result = options.result;
  }

  override toString(): string {
    return this.message;
  }

  static override isInstance(error: unknown): error is ConchToolCallError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[BRAND] === true;
  }

  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), toolName: this.toolName, toolCallId: this.toolCallId, result: this.result };
  }
}
