import type { ValidationIssue } from '@conch/core';
import { argumentText, argumentVariable } from './arguments.js';
import { InvalidTemplateError } from './invalid-template-error.js';
import { findPlaceholders, type Placeholder } from './shell-context.js';
import { quoteForContext, variableForContext } from './shell-quote.js';
import type { CommandStep } from './template-schema.js';

/** The variable naming the per-call directory the script keeps step outputs in. */
export const TEMPLATE_DIR_VARIABLE = 'CONCH_TEMPLATE_DIR';

const OUTPUT_REFERENCE = /\$\{?CMD_(\d+)_OUTPUT\b\}?/g;

interface CompiledStep {
  command: string;
  placeholders: Placeholder[];
  shown: boolean;
}

export interface CompiledTemplate {
  /** The script that runs: arguments are `"${CONCH_ARG_<name>}"` references, never text. */
  script: string;
  /** Whether the script keeps step outputs in a per-call directory (`$CONCH_TEMPLATE_DIR`). */
  needsDir: boolean;
  /** Argument name -> environment variable carrying it. */
  variables: ReadonlyMap<string, string>;
  /** The steps with each argument written as a shell-quoted literal: what the gate and a human see. */
  display(args: Record<string, unknown>): string;
  /** The environment entries that carry the arguments. */
  argumentEnv(args: Record<string, unknown>): Record<string, string>;
}

/**
 * Compiles a template's steps into one POSIX shell script. Steps run in the same shell, one after
 * the other, so `cd` and variables carry over; each step's stdout is kept as `$CMD_<i>_OUTPUT`;
 * shown steps stream their stdout through `tee`; stderr always passes through. Unless
 * `continueOnError`, a step that exits non-zero ends the script with its status (its stdout is
 * shown even when it was hidden, so the failure can be understood).
 */
export function compileTemplate(
  toolName: string,
  steps: readonly CommandStep[],
  options: { continueOnError?: boolean; knownArguments?: readonly string[] } = {},
): CompiledTemplate {
  const issues: ValidationIssue[] = [];
  const compiled: CompiledStep[] = steps.map((step, index) => {
    for (const match of step.command.matchAll(OUTPUT_REFERENCE)) {
      const ref = Number(match[1]);
      if (ref >= index) {
        issues.push({
          path: `commands.${index}.command`,
          expected: `$CMD_<i>_OUTPUT with i < ${index} (only earlier steps have output)`,
          received: match[0],
        });
      }
    }
    const placeholders = findPlaceholders(step.command);
    if (options.knownArguments) {
      for (const p of placeholders) {
        if (!options.knownArguments.includes(p.name)) {
          issues.push({
            path: `commands.${index}.command`,
            expected: `placeholders naming an input property (${options.knownArguments.join(', ') || 'none declared'})`,
            received: `UTCP_ARG_${p.name}_UTCP_END`,
          });
        }
      }
    }
    const last = index === steps.length - 1;
    return { command: step.command, placeholders, shown: step.append_to_final_output ?? last };
  });

  const variables = new Map<string, string>();
  const owners = new Map<string, string>();
  for (const step of compiled) {
    for (const { name } of step.placeholders) {
      const variable = argumentVariable(name);
      const owner = owners.get(variable);
      if (owner !== undefined && owner !== name) {
        issues.push({
          path: 'commands',
          expected: `argument names that stay distinct as environment variables`,
          received: `'${owner}' and '${name}' (both ${variable})`,
        });
      }
      owners.set(variable, name);
      variables.set(name, variable);
    }
  }
  if (issues.length > 0) throw new InvalidTemplateError(toolName, issues);

  const bodies = compiled.map((step) =>
    substitute(step, (p) => variableForContext(variables.get(p.name)!, p.context)),
  );
  const single = compiled.length === 1 && compiled[0]!.shown;
  const script = single ? bodies[0]! : composeScript(compiled, bodies, options.continueOnError ?? false);

  return {
    script,
    needsDir: !single,
    variables,
    display(args) {
      return compiled
        .map((step) => substitute(step, (p) => quoteForContext(argumentText(args[p.name]), p.context)))
        .join('\n');
    },
    argumentEnv(args) {
      const env: Record<string, string> = {};
      for (const [name, variable] of variables) env[variable] = argumentText(args[name]);
      return env;
    },
  };
}

function substitute(step: CompiledStep, replace: (p: Placeholder) => string): string {
  let out = '';
  let at = 0;
  for (const p of step.placeholders) {
    out += step.command.slice(at, p.start) + replace(p);
    at = p.end;
  }
  return out + step.command.slice(at);
}

function composeScript(
  steps: readonly CompiledStep[],
  bodies: readonly string[],
  continueOnError: boolean,
): string {
  const lines = [`__conch_d="$${TEMPLATE_DIR_VARIABLE}"`, '__conch_rc=0'];
  steps.forEach((step, i) => {
    const file = `"$__conch_d/${i}"`;
    if (step.shown) {
      const fifo = `"$__conch_d/p${i}"`;
      lines.push(
        `mkfifo ${fifo} || exit 125`,
        `tee ${file} < ${fifo} &`,
        '__conch_tee=$!',
        '{',
        bodies[i]!,
        `} > ${fifo}`,
        '__conch_rc=$?',
        'wait "$__conch_tee"',
      );
    } else {
      lines.push('{', bodies[i]!, `} > ${file}`, '__conch_rc=$?');
    }
    lines.push(`CMD_${i}_OUTPUT=$(cat ${file})`);
    if (!continueOnError && i < steps.length - 1) {
      const showHidden = step.shown ? '' : `cat ${file}; `;
      lines.push(`if [ "$__conch_rc" -ne 0 ]; then ${showHidden}rm -rf "$__conch_d"; exit "$__conch_rc"; fi`);
    }
  });
  lines.push('rm -rf "$__conch_d"', 'exit "$__conch_rc"');
  return lines.join('\n');
}
