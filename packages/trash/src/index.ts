export {
  trashPlugin,
  trashPlugin as default,
  trashConfigSchema,
  trashInputSchema,
  createTrashTool,
} from './plugin.js';
export type { TrashArgs, TrashConfig, TrashConfigInput } from './plugin.js';
export { TrashStore, type TrashStoreOptions } from './trash-store.js';
export { safeRmFunction } from './safe-rm.js';
export { dataHome, defaultTrashDir } from './trash-dir.js';
export { TrashError, type TrashErrorCode } from './errors/trash-error.js';
