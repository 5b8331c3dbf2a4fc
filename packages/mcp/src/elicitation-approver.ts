import type { ApprovalAnswer, ApprovalRequest, ApproveFn, Logger } from '@conch/core';
import { approvalDisplay, MAX_DISPLAY_CHARS } from '@conch/permission';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestId } from '@modelcontextprotocol/sdk/types.js';

/** The answers a human picks from in the elicitation form, with the label a client may show. */
const CHOICES: readonly { value: ApprovalAnswer; label: string }[] = [
  { value: 'once', label: 'Allow once' },
  { value: 'always', label: 'Always allow (this session)' },
  { value: 'deny', label: 'Deny' },
];

/** Whether the connected client declared form elicitation (`elicitation: {}` means form). */
export function clientSupportsElicitation(server: Server): boolean {
  return server.getClientCapabilities()?.elicitation?.form !== undefined;
}

/**
 * Why the human cannot be shown everything that will run, or undefined when they can: the display
 * must be the whole command (or action) of the request, hidden characters escaped, and short
 * enough to show whole. A prompt that hides part of a command is never made.
 */
export function incompleteDisplay(request: ApprovalRequest): string | undefined {
  if (request.display.length > MAX_DISPLAY_CHARS)
    return `the command is ${request.display.length} characters long, more than the ${MAX_DISPLAY_CHARS} a prompt shows`;
  if (request.display !== approvalDisplay(request.request))
    return 'the text to show is not the whole command that would run';
  return undefined;
}

/**
 * The message shown to the human: what will run, why conch asks, what a command run outside the
 * sandbox will reach there, and what "always" adds.
 */
export function elicitationMessage(request: ApprovalRequest): string {
  const lines = [
    `conch: allow ${request.tool} to run this?`,
    '',
    request.display,
    '',
    `Why asked: ${request.reason}`,
  ];
  const reaches = request.escalation?.reaches ?? [];
  if (reaches.length > 0) {
    lines.push('', 'Outside the sandbox it will reach:');
    for (const line of reaches) lines.push(`  - ${line}`);
  }
  if (request.parts && request.parts.length > 1) {
    lines.push('', 'Parts:');
    for (const part of request.parts) lines.push(`  [${part.verdict}] ${part.command} — ${part.reason}`);
  }
  if (request.suggestedRule) lines.push('', `"Always" adds the rule: ${request.suggestedRule}`);
  return lines.join('\n');
}

/**
 * An approver that asks the human through MCP elicitation (a one-field form: once / always /
 * deny). Declining, cancelling, a timeout or a broken answer all mean deny: never run on doubt.
 * A request whose display is not the whole command (`incompleteDisplay`) is denied without asking.
 */
export function elicitationApprover(
  server: Server,
  options: { relatedRequestId: RequestId; timeoutMs: number; logger: Logger },
): ApproveFn {
  return async (request, { signal }) => {
    const incomplete = incompleteDisplay(request);
    if (incomplete) {
      options.logger.warn(
        { tool: request.tool, reason: incomplete },
        'elicitation refused: the human cannot be shown the whole command; denying the call',
      );
      return 'deny';
    }
    try {
      const result = await server.elicitInput(
        {
          mode: 'form',
          message: elicitationMessage(request),
          requestedSchema: {
            type: 'object',
            properties: {
              decision: {
                type: 'string',
                title: 'Decision',
                description:
                  'once: run this call; always: also allow the suggested rule for this session; deny: refuse',
                enum: CHOICES.map((c) => c.value),
                enumNames: CHOICES.map((c) => c.label),
                default: 'once',
              },
            },
            required: ['decision'],
          },
        },
        {
          relatedRequestId: options.relatedRequestId,
          timeout: options.timeoutMs,
          ...(signal ? { signal } : {}),
        },
      );
      if (result.action !== 'accept') return 'deny';
      const decision = result.content?.decision;
      return decision === 'once' || decision === 'always' ? decision : 'deny';
    } catch (error) {
      if (signal?.aborted) throw error;
      options.logger.warn(
        { err: error instanceof Error ? error.message : String(error) },
        'elicitation failed; denying the call',
      );
      return 'deny';
    }
  };
}
