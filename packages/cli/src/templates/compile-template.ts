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
 * the other, so `cd` and variables carry over; the stdout of a step a later step references is
 * kept as `$CMD_<i>_OUTPUT` (through `tee` when it is also shown, so it still streams); shown steps
 * write straight to stdout; stderr always passes through. Unless
 * `continueOnError`, a step that exits non-zero ends the script with its status (its stdout is
 * shown even when it was hidden, so the failure can be understood).
 */
export function compileTemplate(
  toolName: string,
  steps: readonly CommandStep[],
  options: { continueOnError?: boolean; knownArguments?: readonly string[] } = {},
): CompiledTemplate {
  const issues: ValidationIssue[] = [];
  const referenced = new Set<number>();
  const compiled: CompiledStep[] = steps.map((step, index) => {
    for (const match of step.command.matchAll(OUTPUT_REFERENCE)) {
      const ref = Number(match[1]);
      referenced.add(ref);
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
  const { script, needsDir } = single
    ? { script: bodies[0]!, needsDir: false }
    : composeScript(compiled, bodies, referenced, options.continueOnError ?? false);

  return {
    script,
    needsDir,
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
  referenced: ReadonlySet<number>,
  continueOnError: boolean,
): { script: string; needsDir: boolean } {
  // The host makes the directory; where the script cannot write there (a sandbox sees the
  // registry's temp dir read-only) it makes its own in its /tmp and removes it on exit.
  const lines = [
    `__conch_d="$${TEMPLATE_DIR_VARIABLE}"; if ! [ -w "$__conch_d" ]; then __conch_d=$(mktemp -d) || exit 125; trap 'rm -rf "$__conch_d"' EXIT; fi`,
  ];
  let needsDir = false;
  steps.forEach((step, i) => {
    const file = `"$__conch_d/${i}"`;
    const keep = referenced.has(i);
    const checked = !continueOnError && i < steps.length - 1;
    if (step.shown && keep) {
      // stream the output and keep a copy for $CMD_i_OUTPUT (the step still runs in this shell)
      const fifo = `"$__conch_d/p${i}"`;
      lines.push(`mkfifo ${fifo} || exit 125`, `tee ${file} < ${fifo} &`, '__conch_tee=$!');
      lines.push('{', bodies[i]!, `} > ${fifo}`, '__conch_rc=$?', 'wait "$__conch_tee"');
      needsDir = true;
    } else if (step.shown) {
      lines.push('{', bodies[i]!, '}', '__conch_rc=$?');
    } else {
      // hidden: kept in a file, shown only if the step fails
      lines.push('{', bodies[i]!, `} > ${file}`, '__conch_rc=$?');
      needsDir = true;
    }
    if (keep) lines.push(`CMD_${i}_OUTPUT=$(cat ${file})`);
    if (checked) {
      lines.push(
        `if [ "$__conch_rc" -ne 0 ]; then ${step.shown ? '' : `cat ${file}; `}exit "$__conch_rc"; fi`,
      );
    }
  });
  lines.push('exit "$__conch_rc"');
  if (!needsDir) lines.shift();
  return { script: lines.join('\n'), needsDir };
}
