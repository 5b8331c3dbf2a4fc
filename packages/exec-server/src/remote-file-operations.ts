import type { FileOperationsRequest, FileOperationsTarget } from '@conch/files';
import type { ExecClient } from './client/exec-client.js';
import { RemoteFileOperator } from './client/remote-file-operator.js';

/** One RemoteFileOperator per (connection, request): a request is one consumer's files config for its lifetime. */
const operators = new WeakMap<ExecClient, WeakMap<FileOperationsRequest, RemoteFileOperator>>();

/**
 * File operations in a remote target for a files config (@conch/files' `FileOperationsRequest`):
 * the config's roots and limits sent with every call, and the host's protected-path rule judged
 * on the target's paths, its workspace standing for the workspace root (a first refusal: the
 * target itself keeps writes inside the workspace and off its protected names, with its own
 * home). The same object for the same connection and request.
 */
export function remoteFileOperator(client: ExecClient, request: FileOperationsRequest): RemoteFileOperator {
  let byRequest = operators.get(client);
  if (!byRequest) operators.set(client, (byRequest = new WeakMap()));
  let files = byRequest.get(request);
  if (!files) {
    files = new RemoteFileOperator({
      client,
      policy: { ...request.policy },
      protectedReason: (abs) => request.protectedReason(abs, client.lastConnection?.init.cwd ?? '/'),
    });
    byRequest.set(request, files);
  }
  return files;
}

/**
 * What the executor plugin provides under @conch/files' `FILE_OPERATIONS_TARGET` for a remote
 * target: the files plugin's operations run in the target, through its connection.
 */
export function remoteFileOperationsTarget(client: ExecClient): FileOperationsTarget {
  return { operationsFor: (request) => remoteFileOperator(client, request) };
}
