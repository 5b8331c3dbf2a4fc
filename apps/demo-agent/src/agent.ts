import type { LanguageModelV4 } from '@ai-sdk/provider';
import { ConchToolCallError, toAiSdkTools, type ToAiSdkToolsOptions } from '@conch/ai-sdk';
import type { PluginRegistry } from '@conch/core';
import { isStepCount, streamText, type ModelMessage } from 'ai';

/** What a UI hears while a turn runs. Every handler is optional. */
export interface AgentHandlers {
  onText?: (delta: string) => void;
  /** The model finished a text block (a tool call or the end follows). */
  onTextEnd?: () => void;
  onToolCall?: (call: { id: string; name: string; input: unknown }) => void;
  onToolResult?: (result: { id: string; name: string; output: unknown; isError: boolean }) => void;
  /** The call failed before producing a result (e.g. the model named an unknown tool). */
  onToolError?: (error: { id: string; name: string; message: string }) => void;
  /** A provider or stream error; the turn ends. */
  onError?: (message: string) => void;
}

export type TurnOutcome = 'done' | 'aborted' | 'error';

export interface AgentOptions {
  /** A model of the spec ai 7 calls natively (an older spec would run with a compatibility warning). */
  model: LanguageModelV4;
  registry: PluginRegistry;
  /** Extra system text before the plugins' own instructions. */
  system?: string;
  /** Most model steps (tool round trips) in one turn. Default 30. */
  maxSteps?: number;
  /** Per-call approver and progress, handed to @conch/ai-sdk. */
  toolOptions?: ToAiSdkToolsOptions;
}

export const BASE_SYSTEM_PROMPT =
  'You are a helpful assistant in a terminal. You run shell commands with the tools you are given; ' +
  'prefer short, non-interactive commands, explain briefly what you do, and report results faithfully.';

/**
 * The agent loop: one `streamText` per user turn with conch's tools (multi-step, streaming).
 * Keeps the conversation; an aborted or failed turn is recorded as such so the next turn starts
 * from a valid history.
 */
export class Agent {
  readonly messages: ModelMessage[] = [];
  private readonly options: AgentOptions;

  constructor(options: AgentOptions) {
    this.options = options;
  }

  /** One short line for a UI saying what a tool call does (`registry.describeCall`; never throws). */
  describeCall(toolName: string, input: unknown): string {
    return this.options.registry.describeCall(toolName, input);
  }

  get system(): string {
    return [this.options.system ?? BASE_SYSTEM_PROMPT, this.options.registry.systemInstructions()]
      .filter(Boolean)
      .join('\n\n');
  }

  /** Runs one user turn to its end. Never throws: the outcome says how it ended. */
  async run(userText: string, signal: AbortSignal, handlers: AgentHandlers = {}): Promise<TurnOutcome> {
    const userMessage: ModelMessage = { role: 'user', content: userText };
    let failure: string | undefined;
    let aborted = false;
    const result = streamText({
      model: this.options.model,
      instructions: this.system,
      messages: [...this.messages, userMessage],
      tools: toAiSdkTools(this.options.registry, this.options.toolOptions),
      stopWhen: isStepCount(this.options.maxSteps ?? 30),
      abortSignal: signal,
      onError: ({ error }) => {
        failure ??= describeError(error);
      },
      onAbort: () => {
        aborted = true;
      },
    });
    const names = new Map<string, string>();
    try {
      for await (const part of result.stream) {
        switch (part.type) {
          case 'text-delta':
            handlers.onText?.(part.text);
            break;
          case 'text-end':
            handlers.onTextEnd?.();
            break;
          case 'tool-call':
            names.set(part.toolCallId, part.toolName);
            handlers.onToolCall?.({ id: part.toolCallId, name: part.toolName, input: part.input });
            break;
          case 'tool-result':
            handlers.onToolResult?.({
              id: part.toolCallId,
              name: part.toolName,
              output: part.output,
              isError: false,
            });
            break;
          case 'tool-error':
            // A conch call that failed (denied, bad arguments, a command that could not run): the
            // adapter throws its whole result, shown like any result.
            if (ConchToolCallError.isInstance(part.error)) {
              const result = part.error.result as Record<string, unknown>;
              handlers.onToolResult?.({
                id: part.toolCallId,
                name: part.toolName ?? names.get(part.toolCallId) ?? '?',
                output: result,
                // A denial and a command that ran (a refused write) read as their results say;
                // a call that never ran (bad arguments, a plugin's bug) is an error.
                isError: result.permission_denied !== true && result.returncode === undefined,
              });
              break;
            }
            handlers.onToolError?.({
              id: part.toolCallId,
              name: part.toolName ?? names.get(part.toolCallId) ?? '?',
              message: describeError(part.error),
            });
            break;
          case 'error':
            failure ??= describeError(part.error);
            break;
          case 'abort':
            aborted = true;
            break;
          default:
            break;
        }
      }
    } catch (error) {
      if (signal.aborted) aborted = true;
      else failure ??= describeError(error);
    }

    if (aborted || signal.aborted) {
      this.messages.push(userMessage, {
        role: 'assistant',
        content: '(This request was cancelled by the user; its tool calls were stopped.)',
      });
      return 'aborted';
    }
    if (failure !== undefined) {
      handlers.onError?.(failure);
      this.messages.push(userMessage, { role: 'assistant', content: `(This request failed: ${failure})` });
      return 'error';
    }
    // Every step's assistant and tool messages (ai 7's `response.messages` holds the last step's
    // only): the tool calls with their `tool-result` parts, so the next turn sees what ran.
    this.messages.push(userMessage, ...(await result.responseMessages));
    return 'done';
  }
}

export function describeError(error: unknown): string {
  if (error instanceof Error) {
    const status = (error as { statusCode?: number }).statusCode;
    return status ? `${error.message} (HTTP ${status})` : error.message;
  }
  return String(error);
}
