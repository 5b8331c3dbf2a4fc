import { z } from 'zod';

/**
 * How every tool reads a `wait_for` argument (the terminal's, check_background_task's): a
 * JavaScript regular expression matched case-insensitively, `^`/`$` at line ends.
 */
export function compileWaitFor(source: string): RegExp {
  return new RegExp(source, 'im');
}

/**
 * The input schema of a `wait_for` argument: a non-empty string that {@link compileWaitFor} can
 * compile; a bad one is refused naming the field and the reason. Add `.optional().describe(…)`.
 */
export function waitForPatternSchema(): z.ZodType<string> {
  return z
    .string()
    .min(1)
    .superRefine((source, check) => {
      try {
        compileWaitFor(source);
      } catch (error) {
        // V8's message quotes the whole pattern: name it by a bounded prefix instead.
        const shown =
          source.length > 80
            ? `${JSON.stringify(source.slice(0, 77))}… (${source.length} characters)`
            : JSON.stringify(source);
        const why = (error as Error).message.replace(/^Invalid regular expression: \/[\s\S]*\/[a-z]*: /, '');
        check.addIssue({
          code: 'custom',
          message: `expected a JavaScript regular expression; ${shown} is not one (${why.slice(0, 200)})`,
        });
      }
    });
}
