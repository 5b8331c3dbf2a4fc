import { z } from 'zod';

/** Config of the file operator and of the `files` plugin (`createEnvironment({ files })`). */
export const filesConfigSchema = z.strictObject({
  allowOutsideWorkingDir: z
    .boolean()
    .default(false)
    .describe('allow paths anywhere on the machine (protected paths stay refused for writes)'),
  allowedRoots: z
    .array(z.string().min(1))
    .default([])
    .describe('more directories file operations may use (absolute, or relative to the working dir)'),
  maxReadBytes: z
    .number()
    .int()
    .min(1024)
    .default(256 * 1024)
    .describe('bytes of text one read returns at most'),
  maxReadLines: z.number().int().min(1).default(2000).describe('lines one read returns at most'),
  maxWriteBytes: z
    .number()
    .int()
    .min(1024)
    .default(4 * 1024 * 1024)
    .describe(
      "bytes (UTF-8) write_file's content and each of edit_file's old_string and new_string may hold (a longer one is refused before any work)",
    ),
  maxResults: z.number().int().min(1).default(1000).describe('entries a listing or glob returns at most'),
  protectedPaths: z
    .array(z.string().min(1))
    .default([])
    .describe(
      'extra protected globs, used only when no permission plugin is exposed (with one, its own protectedPaths config applies)',
    ),
});

export type FilesConfig = z.output<typeof filesConfigSchema>;
export type FilesConfigInput = z.input<typeof filesConfigSchema>;
