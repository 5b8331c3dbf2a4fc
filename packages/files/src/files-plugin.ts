import {
  ARGUMENT_BYTES,
  compactText,
  ConchError,
  definePlugin,
  defineTool,
  PERMISSION_GATE,
  type PermissionRequest,
  type PluginScope,
  type ToolCallContext,
  type ToolDefinition,
  type ToolResult,
} from '@conch/core';
import { PERMISSION_ENGINE, protectedPathReason } from '@conch/permission';
import { z } from 'zod';
import { isFileOperationError } from './errors/file-operation-error.js';
import { FileOperator } from './file-operator.js';
import type { FileSystemBackend } from './file-system-backend.js';
import { ensureProcessManager } from '@conch/process';
import { inKernelSandbox, kernelFileSystem } from './kernel-file-system.js';
import { filesConfigSchema, type FilesConfig } from './files-config.js';
import { FILE_OPERATIONS_TARGET, type FileOperationsRequest, type RoutedFileOperations } from './tokens.js';

/**
 * The protected-path verdict file writes share with the permission gate: the exposed gate's own
 * `protectedWriteReason` (so the host's permission config — extra globs, the rule turned off —
 * applies), found through its typed token `PERMISSION_ENGINE`, optionally and at each write; else
 * the same check without a gate (`protectedPathReason`). That gate-less check is why this package
 * depends on @conch/permission: the files plugin exposed alone still refuses `.env`, `.ssh`,
 * `.git/hooks` … with the gate's own rule, rather than a second copy of it or none.
 */
export function protectedReasonFor(
  scope: Pick<PluginScope, 'resolveOptional'>,
  root: string,
  extraProtected: readonly string[] = [],
): (abs: string) => string | undefined {
  return (abs) => {
    const engine = scope.resolveOptional(PERMISSION_ENGINE);
    if (engine) return engine.protectedWriteReason(abs, root);
    return protectedPathReason(abs, { workspaceRoot: root, protectedPaths: extraProtected });
  };
}

/**
 * A file operator for a working dir and a files config, through `backend` — by default the
 * kernel's view of the gate's sandbox (`kernelFileSystem`): writes happen inside it, so the kernel
 * resolves links and keeps protected paths read-only.
 */
export function createFileOperator(
  scope: Pick<PluginScope, 'resolveOptional'>,
  root: string,
  config: FilesConfig,
  backend: FileSystemBackend = kernelFileSystem(scope),
): FileOperator {
  return new FileOperator({
    backend,
    root,
    allowedRoots: config.allowedRoots,
    allowOutside: config.allowOutsideWorkingDir,
    protectedReason: protectedReasonFor(scope, root, config.protectedPaths),
    maxReadBytes: config.maxReadBytes,
    maxReadLines: config.maxReadLines,
    maxResults: config.maxResults,
  });
}

/**
 * What the file tools work on: the file operations (FileOperator on this machine, or what
 * `FILE_OPERATIONS_TARGET` routes to), how a path is shown, and the write check made before the
 * gate is asked.
 */
export type FileToolsBackend = Pick<
  RoutedFileOperations,
  'read' | 'write' | 'edit' | 'list' | 'stat' | 'glob' | 'display' | 'checkWrite'
> & {
  /** Writes run inside the gate's kernel sandbox now (so the gate need not ask for them). */
  inSandbox?(): boolean;
  /**
   * The absolute path a read of `path` would use, or a FileOperationError (OUTSIDE_WORKING_DIR):
   * the read check made before the gate is asked. Absent (or resolving `undefined`): the
   * operation itself checks, and a refusal is recorded when it throws.
   */
  checkRead?(operation: string, path: string): Promise<string | undefined>;
};

/**
 * What this scope asks a `FileOperationsTarget` for: the files config's roots and limits (in the
 * target's terms) and the protected-path rule of `protectedReasonFor`, rooted at the target's
 * workspace.
 */
export function fileOperationsRequest(
  scope: Pick<PluginScope, 'resolveOptional'>,
  config: FilesConfig,
): FileOperationsRequest {
  return {
    policy: {
      allowedRoots: [...config.allowedRoots],
      allowOutside: config.allowOutsideWorkingDir,
      maxReadBytes: config.maxReadBytes,
      maxReadLines: config.maxReadLines,
      maxResults: config.maxResults,
    },
    protectedReason: (abs, workspaceRoot) =>
      protectedReasonFor(scope, workspaceRoot, config.protectedPaths)(abs),
  };
}

/**
 * The file tools' backend, chosen per call: what `FILE_OPERATIONS_TARGET` routes to when a
 * plugin provides it (the executor plugin's remote target: files there), else `local`. Exposure
 * order does not matter.
 */
export function routedFiles(
  scope: Pick<PluginScope, 'resolveOptional'>,
  local: FileOperator,
  config: FilesConfig,
): FileToolsBackend {
  const request = fileOperationsRequest(scope, config);
  const current = (): FileToolsBackend =>
    scope.resolveOptional(FILE_OPERATIONS_TARGET)?.operationsFor(request) ?? local;
  return {
    read: (path, options) => current().read(path, options),
    write: (path, content, options) => current().write(path, content, options),
    edit: (path, options) => current().edit(path, options),
    list: (path, options) => current().list(path, options),
    stat: (path) => current().stat(path),
    glob: (patterns, options) => current().glob(patterns, options),
    display: (abs) => current().display(abs),
    checkWrite: (operation, path) => current().checkWrite(operation, path),
    checkRead: async (operation, path) =>
      current() === local ? (await local.resolvePaths(operation, path)).abs : undefined,
    inSandbox: () => current() === local && local.backend.viaKernel === true && inKernelSandbox(scope),
  };
}

/** Codes of a file tool refusing a call by its own rules (the path policy, the protected paths). */
const REFUSAL_CODES = new Set(['OUTSIDE_WORKING_DIR', 'PROTECTED_PATH']);

/**
 * A refusal by the tool's own rules, recorded with the permission engine (when one is exposed) so
 * it is audited, logged and emitted as `permission.decision` like every decision of the gate.
 */
function recordRefusal(
  scope: Pick<PluginScope, 'resolveOptional'>,
  ctx: Pick<ToolCallContext, 'callId'>,
  tool: string,
  summary: string,
  error: unknown,
): void {
  if (!isFileOperationError(error) || !REFUSAL_CODES.has(error.code)) return;
  scope.resolveOptional(PERMISSION_ENGINE)?.recordToolDecision({
    tool,
    callId: ctx.callId,
    summary,
    outcome: 'deny',
    reason: error.message,
    rule: `files:${error.code}`,
  });
}

/** Codes of a routed target's link failing (the exec server's): results the model can act on (try again), not crashes. */
const LINK_CODES = new Set(['TRANSPORT_LOST', 'EXEC_SERVER_START_FAILED', 'EXECUTOR_DISPOSED']);

/** A recoverable failure as a result value: the seed's `error`, a stable `error_code`, one `display` line. */
function failureOf(error: unknown): ToolResult {
  if (isFileOperationError(error)) {
    return { error: error.message, error_code: error.code, display: error.display };
  }
  if (ConchError.isInstance(error) && LINK_CODES.has(error.code)) {
    return { error: error.message, error_code: error.code, display: `✗ ${error.code}` };
  }
  throw error;
}

async function attempt(
  fn: () => Promise<ToolResult>,
  /** Records a refusal the operation itself made (one its plan had not already recorded). */
  onRefusal?: (error: unknown) => void,
): Promise<ToolResult> {
  try {
    return await fn();
  } catch (error) {
    onRefusal?.(error);
    return failureOf(error);
  }
}

/**
 * A read-only tool's request: allowed and audited by the gate, unless the path check made before
 * (`plan`) refused the path — then the refusal is recorded and nothing is asked.
 */
function readOnly(
  scope: Pick<PluginScope, 'resolveOptional'>,
  ctx: Pick<ToolCallContext, 'callId'>,
  tool: string,
  summary: string,
  plan: PathPlan,
) {
  if (plan.refusal) {
    recordRefusal(scope, ctx, tool, summary, plan.refusal);
    return undefined;
  }
  // Nothing to decide without a gate; with one, reads are allowed and audited.
  if (!scope.resolveOptional(PERMISSION_GATE)) return undefined;
  return { kind: 'action', tool, summary, readOnly: true } satisfies PermissionRequest;
}

function editSummary(args: {
  path: string;
  old_string: string;
  new_string: string;
  replace_all?: boolean | undefined;
}): string {
  return `edit ${args.path}: replace ${preview(args.old_string)} with ${preview(args.new_string)}${args.replace_all ? ' (every occurrence)' : ''}`;
}

function preview(text: string, max = 60): string {
  const flat = JSON.stringify(text);
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…"`;
}

const pathField = z
  .string()
  .min(1)
  .describe('Path relative to the working directory (or absolute inside it)');

const readInput = z.strictObject({
  path: pathField,
  offset: z.number().int().min(1).optional().describe('First line to read, 1-based (default 1)'),
  limit: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('Lines to read at most (default and maximum: the host limit, 2000)'),
});
const writeInput = z.strictObject({
  path: pathField,
  content: z.string().describe('The whole new content of the file'),
});
const editInput = z.strictObject({
  path: pathField,
  old_string: z
    .string()
    .min(1)
    .describe(
      'Exact text to replace, whitespace and line endings included; must occur once unless replace_all',
    ),
  new_string: z.string().describe('The replacement text'),
  replace_all: z.boolean().optional().describe('Replace every occurrence of old_string'),
});
const listInput = z.strictObject({
  path: pathField.optional().describe('Directory to list (default the working directory)'),
});
const globInput = z.strictObject({
  pattern: z
    .string()
    .min(1)
    .refine(
      (p) => !p.startsWith('/') && !p.split('/').includes('..'),
      "a relative pattern without '..' (set cwd to search another directory)",
    )
    .describe(
      'Glob such as "src/**/*.ts" or "*.{md,txt}"; names starting with "." match only with dot: true or a pattern that spells the dot',
    ),
  cwd: z
    .string()
    .min(1)
    .optional()
    .describe('Directory the pattern is relative to (default the working directory)'),
  dot: z.boolean().optional().describe('Let * and ** match dotfiles'),
});
const statInput = z.strictObject({ path: pathField });

/** A path for a describeCall line: one line, long ones keep their end (the file name). */
function shortPath(path: string, max = 60): string {
  const flat = compactText(path, Number.MAX_SAFE_INTEGER);
  return flat.length > max ? `…${flat.slice(flat.length - (max - 1))}` : flat;
}

/** The default of the files config's `maxWriteBytes`: 4 MiB, eight times what a model writes in one answer. */
export const DEFAULT_MAX_WRITE_BYTES = 4 * 1024 * 1024;

/**
 * The byte limits of the file tools' string arguments, checked by the registry before any work:
 * a path or a cwd at most PATH_MAX (4096; a longer one names no file), a glob pattern 4096, a
 * file's content and an edit's strings `maxWriteBytes` each.
 */
export function fileArgumentLimits(maxWriteBytes = DEFAULT_MAX_WRITE_BYTES) {
  return {
    fields: {
      path: ARGUMENT_BYTES.path,
      cwd: ARGUMENT_BYTES.path,
      pattern: ARGUMENT_BYTES.pattern,
      content: maxWriteBytes,
      old_string: maxWriteBytes,
      new_string: maxWriteBytes,
    },
  };
}

/** The path check made before the gate is asked: the path, or the tool's refusal. */
interface PathPlan {
  abs?: string;
  refusal?: unknown;
}

/**
 * The model's file tools over a FileOperator: read_file, list_directory, glob and stat_file are
 * read-only (allowed and audited by the gate); write_file and edit_file ask it, after the path
 * passed the working-dir and protected-path checks. A refused path is not asked about, but the
 * refusal is recorded with the permission engine: every decision of every tool is in its audit
 * log and emitted as `permission.decision`.
 */
export function fileTools(
  files: FileToolsBackend,
  scope: Pick<PluginScope, 'resolveOptional'>,
  limits: { maxWriteBytes?: number } = {},
): ToolDefinition[] {
  const argumentLimits = fileArgumentLimits(limits.maxWriteBytes);
  const planWrite = async (operation: string, path: string): Promise<PathPlan> => {
    try {
      return { abs: await files.checkWrite(operation, path) };
    } catch (error) {
      return { refusal: error };
    }
  };
  const planRead = async (operation: string, path: string): Promise<PathPlan> => {
    try {
      const abs = await files.checkRead?.(operation, path);
      return abs === undefined ? {} : { abs };
    } catch (error) {
      if (isFileOperationError(error) && REFUSAL_CODES.has(error.code)) return { refusal: error };
      // Anything else (bad arguments, a missing file) is the operation's to report.
      return {};
    }
  };
  /** Records a refusal the operation made at run time, unless its plan already recorded one. */
  const refusalOf = (ctx: Pick<ToolCallContext, 'callId'>, tool: string, summary: string, plan: PathPlan) =>
    plan.refusal ? undefined : (error: unknown) => recordRefusal(scope, ctx, tool, summary, error);
  return [
    defineTool<z.output<typeof readInput>, ToolResult, unknown, PathPlan>({
      name: 'read_file',
      describeCall: (args) =>
        `read_file(${shortPath(args.path)}${args.offset || args.limit ? `, lines ${args.offset ?? 1}${args.limit ? `-${(args.offset ?? 1) + args.limit - 1}` : '+'}` : ''})`,
      description:
        'Read a text file by lines (offset 1-based, limit lines). Returns { content, size_bytes, offset, lines, total_lines, truncated, next_offset }; ' +
        'binary files are refused with error_code BINARY_FILE.',
      inputSchema: readInput,
      argumentLimits,
      annotations: { readOnlyHint: true },
      prepare: (args) => planRead('read', args.path),
      permission: (args, ctx, plan) => readOnly(scope, ctx, 'read_file', `read ${args.path}`, plan),
      execute: (args, ctx, plan) =>
        attempt(
          async () => {
            if (plan.refusal) throw plan.refusal;
            const r = await files.read(args.path, {
              ...(args.offset ? { offset: args.offset } : {}),
              ...(args.limit ? { limit: args.limit } : {}),
            });
            return {
              path: files.display(r.path),
              content: r.content,
              size_bytes: r.sizeBytes,
              offset: r.offset,
              lines: r.lines,
              ...(r.totalLines === undefined ? {} : { total_lines: r.totalLines }),
              truncated: r.truncated,
              ...(r.nextOffset === undefined ? {} : { next_offset: r.nextOffset }),
              ...(r.lineCut ? { line_cut: true } : {}),
              display: `${files.display(r.path)}: lines ${r.offset}-${r.offset + Math.max(0, r.lines - 1)}${r.totalLines ? ` of ${r.totalLines}` : ''} (${r.sizeBytes} bytes)`,
            };
          },
          refusalOf(ctx, 'read_file', `read ${args.path}`, plan),
        ),
    }),
    defineTool<z.output<typeof writeInput>, ToolResult, unknown, PathPlan>({
      name: 'write_file',
      describeCall: (args) => `write_file(${shortPath(args.path)}, ${args.content.length} chars)`,
      description:
        'Create or overwrite a file with the given content (parent directories are created). Asks the user first.',
      inputSchema: writeInput,
      argumentLimits,
      annotations: { destructiveHint: true },
      prepare: (args) => planWrite('write', args.path),
      permission: (args, ctx, plan) => {
        const summary = `write ${Buffer.byteLength(args.content)} bytes to ${args.path}`;
        if (plan.refusal) {
          recordRefusal(scope, ctx, 'write_file', summary, plan.refusal);
          return undefined;
        }
        return {
          kind: 'action',
          tool: 'write_file',
          summary,
          ...(files.inSandbox?.() ? { inSandbox: true } : {}),
        };
      },
      execute: (args, ctx, plan) =>
        attempt(
          async () => {
            if (plan.refusal) throw plan.refusal;
            const r = await files.write(args.path, args.content);
            return {
              path: files.display(r.path),
              bytes_written: r.bytesWritten,
              created: r.created,
              display: `${r.created ? 'created' : 'wrote'} ${files.display(r.path)} (${r.bytesWritten} bytes)`,
            };
          },
          refusalOf(
            ctx,
            'write_file',
            `write ${Buffer.byteLength(args.content)} bytes to ${args.path}`,
            plan,
          ),
        ),
    }),
    defineTool<z.output<typeof editInput>, ToolResult, unknown, PathPlan>({
      name: 'edit_file',
      describeCall: (args) => `edit_file(${shortPath(args.path)}${args.replace_all ? ', all' : ''})`,
      description:
        'Replace old_string with new_string in a file. old_string must match exactly (copy it from read_file) and occur once, ' +
        'unless replace_all is true. Asks the user first.',
      inputSchema: editInput,
      argumentLimits,
      annotations: { destructiveHint: true },
      prepare: (args) => planWrite('edit', args.path),
      permission: (args, ctx, plan) => {
        const summary = editSummary(args);
        if (plan.refusal) {
          recordRefusal(scope, ctx, 'edit_file', summary, plan.refusal);
          return undefined;
        }
        return {
          kind: 'action',
          tool: 'edit_file',
          ...(files.inSandbox?.() ? { inSandbox: true } : {}),
          summary,
        };
      },
      execute: (args, ctx, plan) =>
        attempt(
          async () => {
            if (plan.refusal) throw plan.refusal;
            const r = await files.edit(args.path, {
              oldString: args.old_string,
              newString: args.new_string,
              ...(args.replace_all ? { replaceAll: true } : {}),
            });
            return {
              path: files.display(r.path),
              replacements: r.replacements,
              line: r.line,
              size_bytes: r.sizeBytes,
              display: `edited ${files.display(r.path)}: ${r.replacements} replacement${r.replacements === 1 ? '' : 's'} from line ${r.line}`,
            };
          },
          refusalOf(ctx, 'edit_file', editSummary(args), plan),
        ),
    }),
    defineTool<z.output<typeof listInput>, ToolResult, unknown, PathPlan>({
      name: 'list_directory',
      describeCall: (args) => `list_directory(${shortPath(args.path ?? '.')})`,
      description: 'List a directory: { entries: [{ name, type, size }], total, truncated }.',
      inputSchema: listInput,
      argumentLimits,
      annotations: { readOnlyHint: true },
      prepare: (args) => planRead('list', args.path ?? '.'),
      permission: (args, ctx, plan) =>
        readOnly(scope, ctx, 'list_directory', `list ${args.path ?? '.'}`, plan),
      execute: (args, ctx, plan) =>
        attempt(
          async () => {
            if (plan.refusal) throw plan.refusal;
            const r = await files.list(args.path ?? '.');
            return {
              path: files.display(r.path),
              entries: r.entries,
              total: r.total,
              truncated: r.truncated,
              display: `${files.display(r.path)}: ${r.total} entries`,
            };
          },
          refusalOf(ctx, 'list_directory', `list ${args.path ?? '.'}`, plan),
        ),
    }),
    defineTool<z.output<typeof globInput>, ToolResult, unknown, PathPlan>({
      name: 'glob',
      describeCall: (args) =>
        `glob(${compactText(args.pattern, 50)}${args.cwd ? ` in ${shortPath(args.cwd)}` : ''})`,
      description:
        'Find files by glob pattern (picomatch: *, **, ?, [..], {a,b}), relative to cwd; node_modules and .git are skipped. Returns { matches, total, truncated }.',
      inputSchema: globInput,
      argumentLimits,
      annotations: { readOnlyHint: true },
      prepare: (args) => planRead('glob', args.cwd ?? '.'),
      permission: (args, ctx, plan) =>
        readOnly(scope, ctx, 'glob', `find ${args.pattern}${args.cwd ? ` in ${args.cwd}` : ''}`, plan),
      execute: (args, ctx, plan) =>
        attempt(
          async () => {
            if (plan.refusal) throw plan.refusal;
            const r = await files.glob(args.pattern, {
              ...(args.cwd ? { cwd: args.cwd } : {}),
              ...(args.dot ? { dot: true } : {}),
            });
            return {
              cwd: files.display(r.cwd),
              matches: r.matches,
              total: r.total,
              truncated: r.truncated,
              display: `${args.pattern}: ${r.total} match${r.total === 1 ? '' : 'es'}`,
            };
          },
          refusalOf(ctx, 'glob', `find ${args.pattern}${args.cwd ? ` in ${args.cwd}` : ''}`, plan),
        ),
    }),
    defineTool<z.output<typeof statInput>, ToolResult, unknown, PathPlan>({
      name: 'stat_file',
      describeCall: (args) => `stat_file(${shortPath(args.path)})`,
      description: 'Type, size, modification time and mode of a path (and whether a file looks binary).',
      inputSchema: statInput,
      argumentLimits,
      annotations: { readOnlyHint: true },
      prepare: (args) => planRead('stat', args.path),
      permission: (args, ctx, plan) => readOnly(scope, ctx, 'stat_file', `stat ${args.path}`, plan),
      execute: (args, ctx, plan) =>
        attempt(
          async () => {
            if (plan.refusal) throw plan.refusal;
            const r = await files.stat(args.path);
            return {
              path: files.display(r.path),
              type: r.type,
              size_bytes: r.sizeBytes,
              modified_at: r.modifiedAt,
              mode: r.mode,
              ...(r.binary === undefined ? {} : { binary: r.binary }),
              ...(r.target === undefined ? {} : { target: r.target }),
              display: `${files.display(r.path)}: ${r.type}, ${r.sizeBytes} bytes`,
            };
          },
          refusalOf(ctx, 'stat_file', `stat ${args.path}`, plan),
        ),
    }),
  ];
}

const FILES_INSTRUCTIONS = [
  'File tools work inside the working directory: read_file (by lines: offset, limit; the true size is reported, binary files are refused), write_file, edit_file (exact replacement of old_string, which must occur once unless replace_all), list_directory, glob and stat_file.',
  'write_file and edit_file ask the user first; writes to protected paths (.env files, .ssh, .git/hooks, .git/config, shell start-up files) are always refused.',
].join('\n');

/** Plugin 'files': the file operator's tools for models, rooted at the registry's cwd. */
export const filesPlugin = definePlugin<FilesConfig>({
  name: 'files',
  version: '0.0.0',
  description:
    'Read, write, edit, list, stat and glob files in the working directory, with the permission gate’s protected paths',
  configSchema: filesConfigSchema,
  setup(ctx) {
    // The registry's process manager: its sandboxed supervisor performs the file operations when
    // the permission gate runs a sandbox (kernelFileSystem), so writes meet the kernel's wall.
    ensureProcessManager(ctx);
    const files = createFileOperator(ctx, ctx.env.cwd, ctx.config);
    // Where FILE_OPERATIONS_TARGET routes them when a plugin provides it (resolved per call).
    return {
      tools: fileTools(routedFiles(ctx, files, ctx.config), ctx, { maxWriteBytes: ctx.config.maxWriteBytes }),
      instructions: FILES_INSTRUCTIONS,
    };
  },
});

export default filesPlugin;
