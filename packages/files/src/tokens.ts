import { token } from '@conch/core';
import type { FileOperations } from './file-operations.js';

/**
 * File operations the `files` plugin's tools can be routed to: the operations, how a path is
 * shown to the model, and the write check made before the permission gate is asked (the path a
 * write would change, or a FileOperationError: OUTSIDE_WORKING_DIR, PROTECTED_PATH).
 * `FileOperator` is one; @conch/exec-server's `RemoteFileOperator` (a target's files) is another.
 */
export interface RoutedFileOperations extends FileOperations {
  display(abs: string): string;
  checkWrite(operation: string, path: string): Promise<string>;
}

/** Where file operations may go, in the terms of whoever runs them (roots are paths there). */
export interface FileOperationsPolicy {
  allowedRoots?: string[];
  allowOutside?: boolean;
  maxReadBytes?: number;
  maxReadLines?: number;
  maxResults?: number;
}

/** What a files plugin (or a host) asks a `FileOperationsTarget` for: its config, and the host's rule. */
export interface FileOperationsRequest {
  /** The files config's roots and limits. */
  readonly policy: FileOperationsPolicy;
  /**
   * The host's protected-path rule (the permission gate's), for a workspace root: the target
   * judges its own paths with its own workspace as the root, before any write is sent.
   */
  protectedReason(absolutePath: string, workspaceRoot: string): string | undefined;
}

/**
 * Where the file tools' operations go now, when not to this machine's files. Provided under
 * `FILE_OPERATIONS_TARGET` by the plugin that moves them (@conch/exec-server's `executor` plugin
 * for a remote target); consumers resolve it at each call, so exposure order does not matter.
 */
export interface FileOperationsTarget {
  /**
   * The file operations serving `request`, or undefined for this machine's (the consumer's own
   * `FileOperator`). Called at each operation: return the same object for the same request
   * (consumers keep their request object for their lifetime).
   */
  operationsFor(request: FileOperationsRequest): RoutedFileOperations | undefined;
}

/**
 * Where the `files` plugin's (and `createEnvironment`'s) file operations go. Absent: this machine,
 * through the plugin's own `FileOperator`. @conch/files declares it and never imports its
 * providers; they import it from here.
 */
export const FILE_OPERATIONS_TARGET = token<FileOperationsTarget>('conch.files.FileOperationsTarget');
