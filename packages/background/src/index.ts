export {
  BackgroundTasks,
  isFinal,
  type BackgroundTasksOptions,
  type OutputWaitResult,
} from './background-tasks.js';
export {
  backgroundPlugin,
  backgroundConfigSchema,
  TASK_ARGUMENT_LIMITS,
  type BackgroundConfig,
} from './plugin.js';
export { UnknownTaskError, unknownTaskMessage } from './unknown-task-error.js';
export type {} from './events.js';
