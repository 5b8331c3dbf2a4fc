import { FileOperationError, isFileOperationError } from './errors/file-operation-error.js';

/**
 * Turns a backend's errno error into a FileOperationError the model can act on: a stable code and
 * a message naming the operation, the path and what to do.
 */
export function fsError(
  operation: string,
  path: string,
  absolute: string,
  error: unknown,
): FileOperationError {
  if (isFileOperationError(error)) return error;
  const e = error as NodeJS.ErrnoException;
  const common = { operation, path, cause: error };
  const abs = shownPath(absolute);
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
    case 'EFTYPE':
      return new FileOperationError({
        ...common,
        code: 'NOT_A_FILE',
        message: `${abs} is not a regular file (a FIFO, a socket or a device): only regular files are read, and nothing was. A FIFO waits for a writer and a device may never end; read what writes to it instead.`,
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
        message: `${operation} ${abs} failed: ${reasonOf(e, error)}`,
      });
  }
}

/** A path as a message shows it: whole up to 1,024 characters, else its start and end. */
export function shownPath(path: string): string {
  if (path.length <= 1024) return path;
  return `${path.slice(0, 500)}…${path.slice(-500)} (a path of ${path.length} characters)`;
}

/**
 * Why a system call failed, without the path node's message repeats (`ENAMETOOLONG: name too
 * long, lstat '/…'` -> `ENAMETOOLONG: name too long (lstat)`).
 */
function reasonOf(e: NodeJS.ErrnoException | undefined, error: unknown): string {
  const message = typeof e?.message === 'string' ? e.message : String(error);
  if (typeof e?.code === 'string' && message.startsWith(`${e.code}: `)) {
    const what = message.split(', ')[0]!;
    return `${what.length > 200 ? `${what.slice(0, 199)}…` : what}${e.syscall ? ` (${e.syscall})` : ''}`;
  }
  return message.length > 500 ? `${message.slice(0, 499)}…` : message;
}
