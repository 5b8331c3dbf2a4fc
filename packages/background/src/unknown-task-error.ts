import { ConchError } from '@conch/core';
import type { EvictedTaskInfo } from './background-tasks.js';

/** A host API call named a task id the background service does not know. */
export class UnknownTaskError extends ConchError {
  readonly taskId: string;
  readonly knownTaskIds: readonly string[];

  /** Set when the task existed and was evicted from the history. */
  readonly evicted: EvictedTaskInfo | undefined;

  constructor(taskId: string, knownTaskIds: readonly string[], evicted?: EvictedTaskInfo) {
    super({
      code: evicted ? 'TASK_EVICTED' : 'UNKNOWN_TASK',
      message: evicted ? evictedTaskMessage(evicted) : unknownTaskMessage(taskId, knownTaskIds),
    });
    this.name = 'UnknownTaskError';
    this.taskId = taskId;
    this.knownTaskIds = knownTaskIds;
    this.evicted = evicted;
  }
}

/** The message a model or host gets for an unknown task id. */
export function unknownTaskMessage(taskId: string, known: readonly string[]): string {
  const list =
    known.length === 0 ? 'there are no tasks yet' : `known task ids: ${known.slice(-20).join(', ')}`;
  return `No background task '${taskId}' (${list}). Call list_background_tasks to see every task with its id; ids come from the background_task_id of a cli_based_tool result.`;
}

/** The message for a task that finished and was evicted from the history since. */
export function evictedTaskMessage(e: EvictedTaskInfo): string {
  const exit = typeof e.returncode === 'number' ? `, exit code ${e.returncode}` : '';
  const why = e.delivered
    ? 'after its result was returned (the background config historyLimit bounds how many returned results are kept)'
    : 'before its result was read: more unread results piled up than the background config unreadLimit keeps';
  const file = e.outputFile
    ? ` Its full output is still in ${e.outputFile}.`
    : ' Its output is no longer kept; run the command again if you need it.';
  return `Background task '${e.id}' (${e.command}) ${e.status}${exit} and was dropped from the task history ${why}.${file}`;
}
