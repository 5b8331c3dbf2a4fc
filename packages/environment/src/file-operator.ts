// The file operator is one implementation, shared with the exec server that runs it in remote
// targets: @conch/exec-server's TargetFileOperator, under the name this package has always used.
export {
  TargetFileOperator as FileOperator,
  DEFAULT_GLOB_IGNORE,
  looksBinary,
  type DirectoryEntry,
  type EditOptions,
  type EditResult,
  type EntryType,
  type FileOperatorOptions,
  type GlobOptions,
  type GlobResult,
  type ListResult,
  type ReadOptions,
  type ReadResult,
  type StatResult,
  type WriteOptions,
  type WriteResult,
} from '@conch/exec-server';
