import { ConchError } from '@conch/core';

/** A host API call named a task id the background service does not know. */
export class UnknownTaskError extends ConchError {
  readonly taskId: string;
  readonly knownTaskIds: readonly string[];

  constructor(taskId: string, knownTaskIds: readonly string[]) {
    super({ code: 'UNKNOWN_TASK', message: unknownTaskMessage(taskId, knownTaskIds) });
    this.name = 'UnknownTaskError';
    this.taskId = taskId;
    this.knownTaskIds = knownTaskIds;
  }
}

/** The message a model or host gets for an unknown task id. */
export function unknownTaskMessage(taskId: string, known: readonly string[]): string {
  const list =
    known.length === 0 ? 'there are no tasks yet' : `known task ids: ${known.slice(-20).join(', ')}`;
  return `No background task '${taskId}' (${list}). Call list_background_tasks to see every task with its id; ids come from the background_task_id of a cli_based_tool result.`;
}
