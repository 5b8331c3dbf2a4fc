// Template arguments reach the shell as data in every quoting context; steps share one shell; outputs are kept per step.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { compileTemplate, TEMPLATE_DIR_VARIABLE } from './compile-template.js';
import { InvalidTemplateError } from './invalid-template-error.js';
import { findPlaceholders } from './shell-context.js';
import type { CommandStep } from './template-schema.js';

const work = mkdtempSync(join(tmpdir(), 'conch-tpl-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const marker = join(work, 'pwned');

/** Runs a compiled template with real /bin/sh, as the cli runner would (shell mode, env added). */
function run(
  steps: CommandStep[],
  args: Record<string, unknown>,
  options: { cwd?: string; continueOnError?: boolean } = {},
) {
  const compiled = compileTemplate('t', steps, options);
  const dir = mkdtempSync(join(work, 'call-'));
  try {
    const stdout = execFileSync('/bin/sh', ['-c', compiled.script], {
      cwd: options.cwd ?? work,
      env: { ...process.env, ...compiled.argumentEnv(args), [TEMPLATE_DIR_VARIABLE]: dir },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return { stdout, code: 0 };
  } catch (error) {
    const e = error as { stdout: string; status: number };
    return { stdout: e.stdout, code: e.status };
  }
}

const ATTACKS = [
  `x; touch ${marker}`,
  `$(touch ${marker})`,
  `\`touch ${marker}\``,
  `a\ntouch ${marker}`,
  `'; touch ${marker}; '`,
  `"; touch ${marker}; "`,
  `\\"; touch ${marker}; #`,
  `*`,
  `  spaced  out  `,
  '',
];

describe('arguments are data, never code', () => {
  const contexts: [string, string][] = [
    ['unquoted', 'printf "%s|" UTCP_ARG_v_UTCP_END'],
    ['double quotes', 'printf "%s|" "<UTCP_ARG_v_UTCP_END>"'],
    ['single quotes', "printf '%s|' '<UTCP_ARG_v_UTCP_END>'"],
    ['${...} in double quotes', 'printf "%s|" "${NOPE:-UTCP_ARG_v_UTCP_END}"'],
    ['$(...)', 'printf "%s|" "$(printf %s UTCP_ARG_v_UTCP_END)"'],
  ];
  test.each(contexts)('%s: the value arrives literally, the marker is never created', (context, command) => {
    for (const value of ATTACKS) {
      const { stdout, code } = run([{ command }], { v: value });
      expect(code, `${context} ${JSON.stringify(value)}`).toBe(0);
      const wrapped = context.includes('quotes') && !context.includes('$') ? `<${value}>|` : `${value}|`;
      expect(stdout, `${context} ${JSON.stringify(value)}`).toBe(wrapped);
      expect(existsSync(marker), `${context} ${JSON.stringify(value)}`).toBe(false);
    }
  });

  test.each(contexts)('%s: the gate display is a shell literal meaning the same', (context, command) => {
    const compiled = compileTemplate('t', [{ command }]);
    for (const value of ATTACKS) {
      const display = compiled.display({ v: value });
      expect(display).not.toContain('UTCP_ARG_');
      const shown = execFileSync('/bin/sh', ['-c', display], { cwd: work, encoding: 'utf8' });
      const real = run([{ command }], { v: value }).stdout;
      expect(shown, `${context} ${JSON.stringify(value)}`).toBe(real);
      expect(existsSync(marker)).toBe(false);
    }
  });

  test('plain values are shown bare, others quoted', () => {
    const compiled = compileTemplate('t', [
      { command: 'git log -n UTCP_ARG_n_UTCP_END -- UTCP_ARG_path_UTCP_END' },
    ]);
    expect(compiled.display({ n: 5, path: 'src/a b.ts' })).toBe("git log -n 5 -- 'src/a b.ts'");
    expect(compiled.script).toBe('git log -n "${CONCH_ARG_n}" -- "${CONCH_ARG_path}"');
    expect(compiled.argumentEnv({ n: 5, path: 'x' })).toEqual({ CONCH_ARG_n: '5', CONCH_ARG_path: 'x' });
  });

  test('non-string arguments: numbers, booleans, objects as JSON, missing as empty', () => {
    const { stdout } = run(
      [
        {
          command:
            'printf "%s|" UTCP_ARG_a_UTCP_END UTCP_ARG_b_UTCP_END UTCP_ARG_c_UTCP_END UTCP_ARG_d_UTCP_END',
        },
      ],
      {
        a: 1.5,
        b: true,
        c: { k: ['v'] },
      },
    );
    expect(stdout).toBe('1.5|true|{"k":["v"]}||');
  });

  test('the scanner ignores quotes in comments and finds placeholders after them', () => {
    const found = findPlaceholders("# don't panic\necho UTCP_ARG_x_UTCP_END 'UTCP_ARG_y_UTCP_END'");
    expect(found.map((p) => [p.name, p.context])).toEqual([
      ['x', 'unquoted'],
      ['y', 'single'],
    ]);
  });
});

describe('steps share one shell', () => {
  test('cd carries over, only the last output by default', () => {
    mkdirSync(join(work, 'sub dir'), { recursive: true });
    const { stdout, code } = run(
      [
        { command: 'cd UTCP_ARG_target_UTCP_END' },
        { command: 'echo hidden' },
        { command: 'basename "$PWD"' },
      ],
      { target: 'sub dir' },
    );
    expect(code).toBe(0);
    expect(stdout).toBe('sub dir\n');
  });

  test('$CMD_<i>_OUTPUT holds each step’s stdout; append_to_final_output shows more steps', () => {
    const { stdout } = run(
      [
        { command: 'echo one; echo two', append_to_final_output: false },
        { command: 'printf "[%s]\\n" "$CMD_0_OUTPUT"', append_to_final_output: true },
        { command: 'echo "last saw ${CMD_1_OUTPUT}"' },
      ],
      {},
    );
    expect(stdout).toBe('[one\ntwo]\nlast saw [one\ntwo]\n');
  });

  test('steps that are shown and not referenced write straight to stdout (no temp files)', () => {
    const compiled = compileTemplate('t', [
      { command: 'echo a', append_to_final_output: true },
      { command: 'echo b' },
    ]);
    expect(compiled.needsDir).toBe(false);
    expect(compiled.script).not.toContain('CONCH_TEMPLATE_DIR');
    expect(run([{ command: 'echo a', append_to_final_output: true }, { command: 'echo b' }], {}).stdout).toBe(
      'a\nb\n',
    );
  });

  test('the last step can be hidden explicitly', () => {
    expect(
      run(
        [
          { command: 'echo a', append_to_final_output: true },
          { command: 'echo b', append_to_final_output: false },
        ],
        {},
      ).stdout,
    ).toBe('a\n');
  });

  test('a failing step stops the script with its status and shows its output', () => {
    const result = run(
      [{ command: 'echo why it failed; sh -c "exit 3"' }, { command: `touch ${marker}` }],
      {},
    );
    expect(result.code).toBe(3);
    expect(result.stdout).toBe('why it failed\n');
    expect(existsSync(marker)).toBe(false);
  });

  test('continue_on_error runs every step (UTCP behaviour)', () => {
    const result = run(
      [{ command: 'false' }, { command: 'echo after "$CMD_0_OUTPUT"' }],
      {},
      { continueOnError: true },
    );
    expect(result).toMatchObject({ code: 0, stdout: 'after \n' });
  });
});

describe('bad templates are refused with the field named', () => {
  test('a reference to a later step', () => {
    expect(() => compileTemplate('t', [{ command: 'echo $CMD_0_OUTPUT' }])).toThrow(
      /commands\.0\.command: \$CMD_<i>_OUTPUT with i < 0.*received \$CMD_0_OUTPUT/,
    );
  });
  test('a placeholder that names no input property', () => {
    const error = (() => {
      try {
        compileTemplate('t', [{ command: 'echo UTCP_ARG_nope_UTCP_END' }], { knownArguments: ['path'] });
      } catch (e) {
        return e;
      }
    })();
    expect(InvalidTemplateError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain("Invalid command template 't'");
    expect((error as Error).message).toContain(
      'placeholders naming an input property (path); received UTCP_ARG_nope_UTCP_END',
    );
  });
  test('argument names that collide as variables', () => {
    expect(() =>
      compileTemplate('t', [{ command: 'echo UTCP_ARG_a-b_UTCP_END UTCP_ARG_a_b_UTCP_END' }]),
    ).toThrow(/'a-b' and 'a_b' \(both CONCH_ARG_a_b\)/);
  });
});
