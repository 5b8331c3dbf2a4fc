import { grammar, optionValue, parseArgs, type Grammar } from '../grammar.js';
import { literalArg, runtimeArg, type Arg } from '../words.js';
import { splitEnvString } from './env-split.js';

/** What a wrapper runs. */
export type Unwrapped =
  /** Another command: its argv, plus what the wrapper changes around it. */
  | {
      kind: 'inner';
      argv: Arg[];
      /** `env NAME=value cmd`: variables set for the inner command. */
      env?: Arg[];
      /** `env -C dir`: the inner command runs elsewhere ('unknown' when the directory is dynamic). */
      cwd?: Arg;
      /** Files the wrapper itself writes (`time -o f`, `flock f`). */
      writes?: Arg[];
      /** xargs: arguments appended at run time. */
      dynamicArgs?: boolean;
    }
  /** A command line given as one string (`env -S`, `watch`, `flock -c`). */
  | { kind: 'string'; script: Arg; writes?: Arg[] }
  /** No inner command: the wrapper alone (`env` prints, `command -v x` looks up) — judged as itself. */
  | { kind: 'none'; readOnly: boolean; writes?: Arg[]; reason?: string }
  | { kind: 'opaque'; reason: string };

interface WrapperSpec {
  grammar: Grammar;
  unwrap(parsed: {
    options: { key: string; value: Arg | string | undefined; word: Arg }[];
    operands: Arg[];
    /** The wrapper's arguments as given. */
    args: readonly Arg[];
  }): Unwrapped;
}

const g = grammar;

function val(v: Arg | string | undefined): Arg | undefined {
  if (v === undefined) return undefined;
  return typeof v === 'string' ? literalArg(v) : v;
}

function innerOf(operands: Arg[], extra: Partial<Extract<Unwrapped, { kind: 'inner' }>> = {}): Unwrapped {
  if (operands.length === 0) return { kind: 'none', readOnly: true };
  return { kind: 'inner', argv: operands, ...extra };
}

/**
 * Wrappers the gate looks through, each with the option grammar it accepts (non-permuting: the
 * first operand starts the inner command, as for getopt with `+` or the shell builtins).
 */
export const WRAPPERS: Record<string, WrapperSpec> = {
  env: {
    grammar: g({
      flags: 'i0v',
      values: 'uCSPa',
      long: 'ignore-environment null unset= chdir= split-string= debug block-signal? default-signal? ignore-signal? list-signal-handling argv0= help version',
      permute: false,
    }),
    unwrap(p) {
      // BSD env -P ALTPATH looks the program up in ALTPATH: not the program the name means here.
      if (p.options.some((o) => o.key === '-P'))
        return { kind: 'opaque', reason: 'env -P looks the program up in another PATH' };
      // `env -S STRING`: env splits STRING with its own rules and reads the pieces in its place,
      // options included; the command line is then env's again (`commands/env-split.ts`).
      const split = p.options.find((o) => o.key === '-S' || o.key === '--split-string');
      if (split) {
        const script = val(split.value)!;
        if (script.value === undefined) return { kind: 'string', script };
        const pieces = splitEnvString(script.value);
        if (!pieces.ok) return { kind: 'opaque', reason: pieces.reason };
        const at = p.args.indexOf(split.word);
        // `-S STRING` is two words, `-SSTRING` / `--split-string=STRING` one.
        const width = typeof split.value === 'string' || split.value === split.word ? 1 : 2;
        // Flags bundled before it (`-iS …`) stay.
        const bundled = /^-([iv0]+)S/.exec(split.word.value ?? '');
        const argv = [
          ...p.args.slice(0, at),
          ...(bundled ? [literalArg(`-${bundled[1]}`)] : []),
          ...pieces.args,
          ...p.args.slice(at + width),
        ];
        return { kind: 'inner', argv: [literalArg('env'), ...argv] };
      }
      const chdir = p.options.find((o) => o.key === '-C' || o.key === '--chdir');
      const env: Arg[] = [];
      let i = 0;
      for (; i < p.operands.length; i++) {
        const a = p.operands[i]!;
        if (a.value !== undefined && /^[A-Za-z_][A-Za-z0-9_]*=/.test(a.value)) env.push(a);
        else if (a.value === undefined && /^[A-Za-z_][A-Za-z0-9_]*=/.test(a.raw)) env.push(a);
        else break;
      }
      const rest = p.operands.slice(i);
      if (rest.length === 0)
        return {
          kind: 'none',
          readOnly: false,
          reason: 'env without a command prints every environment variable, secrets included',
        };
      return { kind: 'inner', argv: rest, env, ...(chdir ? { cwd: val(chdir.value)! } : {}) };
    },
  },
  command: {
    grammar: g({ flags: 'pvV', permute: false }),
    unwrap(p) {
      if (p.options.some((o) => o.key === '-v' || o.key === '-V')) return { kind: 'none', readOnly: true };
      return innerOf(p.operands);
    },
  },
  builtin: { grammar: g({ permute: false }), unwrap: (p) => innerOf(p.operands) },
  exec: {
    grammar: g({ flags: 'cl', values: 'a', permute: false }),
    unwrap: (p) =>
      p.operands.length === 0
        ? {
            kind: 'none',
            readOnly: false,
            reason: 'exec without a command changes the shell’s own file descriptors',
          }
        : innerOf(p.operands),
  },
  nice: {
    grammar: g({ values: 'n', long: 'adjustment= help version', numeric: true, permute: false }),
    unwrap: (p) => innerOf(p.operands),
  },
  // nohup appends the command's output to ./nohup.out (or ~/nohup.out) whenever stdout is a
  // terminal, as it is in a terminal session: a write the gate cannot rule out from the text.
  nohup: {
    grammar: g({ long: 'help version', permute: false }),
    unwrap: (p) => innerOf(p.operands, { writes: [literalArg('nohup.out')] }),
  },
  setsid: {
    grammar: g({ flags: 'cfw', long: 'ctty fork wait help version', permute: false }),
    unwrap: (p) => innerOf(p.operands),
  },
  ionice: {
    grammar: g({
      flags: 'tu',
      values: 'cnpP',
      long: 'class= classdata= pid= pgid= uid= ignore help version',
      permute: false,
    }),
    unwrap: (p) =>
      p.options.some((o) => ['-p', '-P', '-u', '--pid', '--pgid', '--uid'].includes(o.key))
        ? { kind: 'opaque', reason: 'ionice -p/-P/-u changes other processes' }
        : innerOf(p.operands),
  },
  timeout: {
    grammar: g({
      flags: 'v',
      values: 'sk',
      long: 'signal= kill-after= preserve-status foreground verbose help version',
      permute: false,
    }),
    unwrap: (p) => innerOf(p.operands.slice(1)),
  },
  time: {
    grammar: g({
      flags: 'pvaq',
      values: 'fo',
      long: 'format= output= append portability verbose quiet help version',
      permute: false,
    }),
    unwrap(p) {
      const out = p.options.find((o) => o.key === '-o' || o.key === '--output');
      const writes = out ? [val(out.value)!] : [];
      if (p.operands.length === 0) return { kind: 'none', readOnly: writes.length === 0, writes };
      return { kind: 'inner', argv: p.operands, writes };
    },
  },
  stdbuf: {
    grammar: g({ values: 'ioe', long: 'input= output= error= help version', permute: false }),
    unwrap: (p) => innerOf(p.operands),
  },
  taskset: {
    grammar: g({ flags: 'acp', long: 'all-tasks cpu-list pid help version', permute: false }),
    unwrap: (p) =>
      p.options.some((o) => o.key === '-p' || o.key === '--pid')
        ? { kind: 'opaque', reason: 'taskset -p changes another process' }
        : innerOf(p.operands.slice(1)),
  },
  chronic: { grammar: g({ flags: 'ev', permute: false }), unwrap: (p) => innerOf(p.operands) },
  unbuffer: { grammar: g({ flags: 'p', permute: false }), unwrap: (p) => innerOf(p.operands) },
  xargs: {
    grammar: g({
      flags: '0oprtx',
      values: 'adEILnPs',
      long: 'null arg-file= delimiter= eof? replace? max-lines? max-args= open-tty interactive max-procs= no-run-if-empty max-chars= show-limits verbose exit process-slot-var= help version',
      permute: false,
    }),
    unwrap(p) {
      // -I REPL (or -i): every word containing REPL is replaced by an input line at run time.
      const replace = p.options.find((o) => o.key === '-I' || o.key === '--replace' || o.key === '-i');
      const repl = replace
        ? replace.value === undefined
          ? '{}'
          : (val(replace.value)!.value ?? '')
        : undefined;
      const argv = (p.operands.length > 0 ? p.operands : [literalArg('echo')]).map((w) =>
        repl && w.value?.includes(repl) ? runtimeArg(w.raw) : w,
      );
      // --process-slot-var=NAME (any unique prefix: --process-s=, --p=) sets NAME in the
      // environment of every command xargs runs (`BASH_ENV=0 bash …` sources ./0).
      const env = p.options
        .filter((o) => o.key === '--process-slot-var')
        .map((o) => {
          const name = typeof o.value === 'string' ? o.value : o.value?.value;
          return literalArg(`${name ?? '(a name only known at run time)'}=0`);
        });
      return { kind: 'inner', argv, dynamicArgs: true, env };
    },
  },
  watch: {
    grammar: g({
      flags: 'bcCegptwxr',
      values: 'nq',
      long: 'beep color no-color errexit chgexit precise no-title no-wrap exec no-rerun interval= differences? equexit= help version',
      permute: false,
    }),
    unwrap(p) {
      if (p.operands.length === 0) return { kind: 'none', readOnly: true };
      if (p.options.some((o) => o.key === '-x' || o.key === '--exec')) return innerOf(p.operands);
      if (!p.operands.every((w) => w.value !== undefined))
        return { kind: 'opaque', reason: 'watch runs a command string that is only known at run time' };
      return { kind: 'string', script: literalArg(p.operands.map((w) => w.value).join(' ')) };
    },
  },
  // Multi-call binaries: `busybox rm -rf ~` is `rm -rf ~` (and `busybox wget`, `busybox sh -c`).
  busybox: {
    grammar: g({ long: 'list list-full help', permute: false, abbreviations: false }),
    unwrap: (p) => innerOf(p.operands),
  },
  toybox: {
    grammar: g({ long: 'help version', permute: false, abbreviations: false }),
    unwrap: (p) => innerOf(p.operands),
  },
  flock: {
    grammar: g({
      flags: 'sxenuoFv',
      values: 'wEc',
      long: 'shared exclusive nonblock nb unlock close no-fork timeout= wait= conflict-exit-code= command= verbose help version',
      permute: false,
    }),
    unwrap(p) {
      const file = p.operands[0];
      if (!file) return { kind: 'none', readOnly: true };
      // `flock FD` locks an open descriptor; `flock FILE …` creates FILE if it does not exist.
      const writes = file.value !== undefined && /^\d+$/.test(file.value) ? [] : [file];
      const command = p.options.find((o) => o.key === '-c' || o.key === '--command');
      if (command) return { kind: 'string', script: val(command.value)!, writes };
      const rest = p.operands.slice(1);
      if (rest.length === 0) return { kind: 'none', readOnly: writes.length === 0, writes };
      return { kind: 'inner', argv: rest, writes };
    },
  },
};

/** Looks through a wrapper; undefined when `name` is not one. */
export function unwrap(name: string, args: readonly Arg[]): Unwrapped | undefined {
  const spec = Object.hasOwn(WRAPPERS, name) ? WRAPPERS[name] : undefined;
  if (!spec) return undefined;
  const parsed = parseArgs(spec.grammar, args, name);
  if (!parsed.ok) return { kind: 'opaque', reason: parsed.reason };
  return spec.unwrap({
    options: parsed.args.options.map((o) => ({ key: o.def.key, value: o.value, word: o.word })),
    operands: parsed.args.operands,
    args,
  });
}

export { optionValue };
