import { FileOperationError, isFileOperationError } from './errors/file-operation-error.js';

/**
 * Turns a backend's errno error into a FileOperationError the model can act on: a stable code and
 * a message naming the operation, the path and what to do.
 */
export function fsError(operation: string, path: string, abs: string, error: unknown): FileOperationError {
  if (isFileOperationError(error)) return error;
  const e = error as NodeJS.ErrnoException;
  const common = { operation, path, cause: error };
  switch (e?.code) {
    case 'ENOENT':
      return new FileOperationError({
        ...common,
        code: 'FILE_NOT_FOUND',
        message: `No such file or directory: ${abs}. Check the path (list_directory or glob) first.`,
      });
    case 'EISDIR':
      return new FileOperationError({
        ...common,
        code: 'NOT_A_FILE',
        message: `${abs} is a directory, not a file. Use list_directory for directories.`,
      });
    case 'ENOTDIR':
      return new FileOperationError({
        ...common,
        code: 'NOT_A_DIRECTORY',
        message: `A component of ${abs} is not a directory.`,
      });
    case 'EROFS':
      return new FileOperationError({
        ...common,
        code: 'FILE_PERMISSION_DENIED',
        message: `Permission denied: ${operation} ${abs} (EROFS): the file system is read-only there (a read-only mount or the sandbox's wall). Nothing was changed; write inside the working directory.`,
        display: `${operation} refused: ${path} is on a read-only file system`,
      });
    case 'EACCES':
    case 'EPERM':
      return new FileOperationError({
        ...common,
        code: 'FILE_PERMISSION_DENIED',
        message: `Permission denied: ${operation} ${abs} (${e.code}).`,
      });
    default:
      return new FileOperationError({
        ...common,
        code: 'FILE_ERROR',
        message: `${operation} ${abs} failed: ${e?.message ?? String(error)}`,
      });
  }
}
