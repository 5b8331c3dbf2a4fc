import type { BackgroundTaskInfo } from '@conch/core';

declare module '@conch/core' {
  interface ConchEvents {
    /** A task was queued (submit) or adopted (promotion). */
    'background.task.created': { task: BackgroundTaskInfo; adopted: boolean };
    /** A queued task got a worker and started. */
    'background.task.started': { task: BackgroundTaskInfo };
    /** A task ended: completed, failed or cancelled. */
    'background.task.finished': { task: BackgroundTaskInfo };
  }
}

export {};
