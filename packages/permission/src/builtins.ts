import type { CommandFacts, Verdict } from './facts.js';
import { grammar, parseArgs } from './grammar.js';
import { classifyName } from './names.js';
import { literalArg, type Arg } from './words.js';

/** `read`'s options (bash's builtin): `-a NAME` assigns an array. */
const READ = grammar({ flags: 'ers', values: 'adinNptu', permute: false });
/** `mapfile` / `readarray`'s options (`-C` is not among them: a callback runs code). */
const MAPFILE = grammar({ flags: 't', values: 'dnOsu', permute: false });
/** `wait`'s options: `-p NAME` assigns NAME. */
const WAIT = grammar({ flags: 'fn', values: 'p', permute: false });

/** A builtin's verdict, and code it keeps for later (a trap's action, an alias) to judge now. */
export interface BuiltinVerdict {
  verdict: Verdict;
  reason: string;
  rule?: string;
  code?: Arg | undefined;
}

/**
 * Shell builtins the allow-list covers by hand: what assigns (names must be inert), what only
 * prints, and what changes the shell (asks).
 */
export function judgeBuiltin(base: string, args: Arg[], facts: CommandFacts): BuiltinVerdict | undefined {
  const values = args.map((a) => a.value);
  const known = values.every((v) => v !== undefined);
  const names = (
    list: Arg[],
    how: string,
  ): { verdict: Verdict; reason: string; rule?: string } | undefined => {
    for (const a of list) {
      const text = a.value ?? a.raw;
      const n = text.split(/[=+[]/)[0]!;
      facts.names.push({ name: n, how });
      if (a.value === undefined && !/^[A-Za-z_][A-Za-z0-9_]*=/.test(a.raw))
        return {
          verdict: 'ask',
          reason: `${how} of a name only known at run time (${a.raw})`,
          rule: 'failClosed:environment',
        };
      if (/^[A-Za-z_][A-Za-z0-9_]*\[/.test(text))
        return {
          verdict: 'ask',
          reason: `${how} ${text}: the array subscript is evaluated as arithmetic`,
          rule: 'failClosed:arithmetic',
        };
      const c = classifyName(n);
      if (c.kind === 'protocol')
        return {
          verdict: 'deny',
          reason: `${how} ${n} changes conch's terminal protocol`,
          rule: 'protocol:terminal',
        };
      if (c.kind !== 'inert')
        return { verdict: 'ask', reason: `${how} ${n}: ${c.reason}`, rule: 'failClosed:environment' };
    }
    return undefined;
  };
  switch (base) {
    case 'export':
    case 'declare':
    case 'typeset':
    case 'local':
    case 'readonly': {
      let i = 0;
      let arrays = false;
      let assoc = false;
      let functionsOnly = true;
      let printOnly = false;
      let endOfOptions = false;
      for (; i < args.length; i++) {
        const v = args[i]!.value;
        // `declare -- x=1` (as `declare -p` prints a plain variable): `--` ends the options.
        if (v === '--') {
          endOfOptions = true;
          i++;
          break;
        }
        if (v === undefined || !/^[-+][A-Za-z]+$/.test(v)) break;
        const letters = v.slice(1);
        if (/[niItf]/.test(letters) && !(v === '-f' || v === '-F' || v === '-p')) {
          if (/f/.test(letters) && base === 'export')
            return {
              verdict: 'ask',
              reason: 'export -f exports a function to every child shell',
              rule: 'failClosed:environment',
            };
          if (/[nIi]/.test(letters))
            return {
              verdict: 'ask',
              reason: `${base} ${v}: namerefs and integer variables evaluate names and arithmetic`,
              rule: 'failClosed:environment',
            };
        }
        if (/[aA]/.test(letters) && v.startsWith('-')) arrays = true;
        if (/A/.test(letters) && v.startsWith('-')) assoc = true;
        if (!/^[fF]+$/.test(letters)) functionsOnly = false;
        if (/^-[pFf]+$/.test(v)) printOnly = true;
      }
      const rest = args.slice(i);
      // Without names every variable is printed, with its value: the environment included, like
      // `env` (`declare`, `declare -p`, `declare -x`, `export -p`, `typeset -x`, `readonly`).
      if (rest.length === 0 && !(i > 0 && functionsOnly && !endOfOptions))
        return {
          verdict: 'ask',
          reason: `${[base, ...args.map((a) => a.raw)].join(' ')} lists shell variables with their values, the environment included (like env)`,
          rule: 'failClosed:environmentListing',
        };
      if (printOnly && rest.every((a) => a.value !== undefined && !a.value.includes('='))) {
        for (const a of rest)
          if (a.value!.startsWith('__conch_')) facts.names.push({ name: a.value!, how: base });
        return { verdict: 'allow', reason: `${base} only prints` };
      }
      const bad = names(rest, base);
      if (bad) return bad;
      // bash reads a quoted value `NAME=(…)` given to declare, typeset or local (to export and
      // readonly with -a/-A) as a compound assignment when NAME is an array: it parses the text
      // again and expands each element and subscript (`declare -a 'x=($(cmd))'`). A known one is
      // judged as that assignment; one only known at run time asks.
      const reparses = base === 'declare' || base === 'typeset' || base === 'local' || arrays;
      if (reparses) {
        const compound: string[] = [];
        for (const a of rest) {
          const m = /^([A-Za-z_][A-Za-z0-9_]*)(\+?=)/.exec(a.value ?? a.raw);
          if (!m) continue;
          if (a.value === undefined) {
            if (a.word.parts.some((p) => p.kind === 'unknown' && p.nodeType === 'array')) continue;
            const head = a.pattern.slice(m[0].length);
            if (head === '' || /^[(*?[\\]/.test(head))
              return {
                verdict: 'ask',
                reason: `${base} ${a.raw}: a value only known at run time that starts with ( is parsed again as a compound array assignment, whose elements and subscripts can run commands`,
                rule: 'failClosed:compoundAssignment',
              };
            continue;
          }
          const value = a.value.slice(m[0].length);
          if (value.startsWith('(') && value.endsWith(')'))
            compound.push(`declare ${assoc ? '-A' : '-a'} ${m[1]}${m[2]}${value}`);
        }
        if (compound.length > 0)
          return {
            verdict: 'allow',
            reason: `${base} only sets inert shell variables`,
            code: literalArg(compound.join('\n')),
          };
      }
      return { verdict: 'allow', reason: `${base} only sets inert shell variables` };
    }
    case 'unset': {
      let i = 0;
      let functions = false;
      for (; i < args.length; i++) {
        const v = args[i]!.value;
        if (v === undefined || !/^-[fvn]+$/.test(v)) break;
        if (v.includes('f')) functions = true;
      }
      const rest = args.slice(i);
      if (functions) {
        for (const a of rest) facts.names.push({ name: a.value ?? a.raw, how: 'unset -f' });
        return {
          verdict: 'ask',
          reason: 'unset -f removes shell functions',
          rule: 'failClosed:environment',
        };
      }
      return names(rest, 'unset') ?? { verdict: 'allow', reason: 'unset of inert shell variables' };
    }
    case 'read': {
      const parsed = parseArgs(READ, args, 'read');
      if (!parsed.ok) return { verdict: 'ask', reason: parsed.reason };
      const targets = [
        ...parsed.args.operands,
        ...parsed.args.options
          .filter((o) => o.def.key === '-a')
          .map((o) => (typeof o.value === 'string' ? literalArg(o.value) : o.value!)),
      ];
      return names(targets, 'read') ?? { verdict: 'allow', reason: 'read into inert variables' };
    }
    case 'mapfile':
    case 'readarray': {
      const parsed = parseArgs(MAPFILE, args, base);
      if (!parsed.ok) return { verdict: 'ask', reason: `${parsed.reason} (-C runs a callback)` };
      return (
        names(parsed.args.operands.length ? parsed.args.operands : [literalArg('MAPFILE')], base) ?? {
          verdict: 'allow',
          reason: `${base} into inert variables`,
        }
      );
    }
    case 'getopts':
      return args.length >= 2
        ? (names([args[1]!], 'getopts') ?? { verdict: 'allow', reason: 'getopts into an inert variable' })
        : { verdict: 'ask', reason: 'getopts without a name' };
    case 'wait': {
      // `wait -n -p NAME` assigns NAME, however written (`-np NAME`, the last of several -p), and a
      // word only known at run time before the pids could be one (`wait -n -p x $y`).
      const parsed = parseArgs(WAIT, args, 'wait');
      if (!parsed.ok) return { verdict: 'ask', reason: parsed.reason, rule: 'failClosed:environment' };
      const targets = parsed.args.options
        .filter((o) => o.def.key === '-p')
        .map((o) => (typeof o.value === 'string' ? literalArg(o.value) : o.value!));
      const bad = names(targets, 'wait -p');
      if (bad) return bad;
      return parsed.args.operands.every((a) => a.value !== undefined)
        ? { verdict: 'allow', reason: 'wait only waits' }
        : { verdict: 'ask', reason: 'wait with arguments only known at run time' };
    }
    case 'let':
      return {
        verdict: 'ask',
        reason: 'let evaluates arithmetic, which can run commands through array subscripts',
        rule: 'failClosed:arithmetic',
      };
    case 'set':
      if (known && /^[-+]o$/.test(values[0] ?? '') && args.length === 1)
        return { verdict: 'allow', reason: 'set -o only prints options' };
      if (args.length === 0)
        return {
          verdict: 'ask',
          reason: 'set without arguments prints every shell variable, secrets included',
        };
      return { verdict: 'ask', reason: 'set changes shell options or positional parameters' };
    case 'shopt':
      if (known && !values.some((v) => /^-[A-Za-z]*[su]/.test(v!)))
        return { verdict: 'allow', reason: 'shopt only prints' };
      return { verdict: 'ask', reason: 'shopt -s/-u changes shell options' };
    case 'alias': {
      if (known && values.every((v) => !v!.includes('=')))
        return { verdict: 'allow', reason: 'alias only prints' };
      const defs = args.filter((a) => (a.value ?? '').includes('='));
      return {
        verdict: 'ask',
        reason: 'alias defines an alias, which can shadow any command',
        code:
          defs.length === 1 ? literalArg(defs[0]!.value!.slice(defs[0]!.value!.indexOf('=') + 1)) : undefined,
      };
    }
    case 'trap':
      if (args.length === 0 || (known && values.every((v) => v === '-p' || v === '-l')))
        return { verdict: 'allow', reason: 'trap only prints' };
      return {
        verdict: 'ask',
        reason: 'trap sets a command the shell runs on a signal or on every command',
        code: args.find((a) => a.value !== '--' && !/^-[lp]$/.test(a.value ?? '')),
      };
    case 'hash':
      if (
        args.length === 0 ||
        (known &&
          values.every((v) => v === '-l' || v === '-t' || !v!.startsWith('-')) &&
          !values.includes('-p'))
      )
        return { verdict: 'allow', reason: 'hash only prints or looks up' };
      return { verdict: 'ask', reason: 'hash -p/-r changes which program a name runs' };
    case 'enable':
      if (args.length === 0 || (known && values.every((v) => /^-[aps]+$/.test(v!))))
        return { verdict: 'allow', reason: 'enable only prints' };
      return { verdict: 'ask', reason: 'enable turns shell builtins on or off' };
    case 'ulimit':
    case 'umask':
      if (args.length === 0 || (known && values.every((v) => /^-[aSHp]+$/.test(v!))))
        return { verdict: 'allow', reason: `${base} only prints` };
      return { verdict: 'ask', reason: `${base} changes the shell's limits or file mode mask` };
    case 'history':
      if (args.length === 0 || (known && values.length === 1 && /^\d+$/.test(values[0]!)))
        return { verdict: 'allow', reason: 'history only prints' };
      return { verdict: 'ask', reason: 'history with options clears, writes or reads the history' };
    case 'fc':
      if (
        known &&
        values.some((v) => /^-[A-Za-z]*l/.test(v!)) &&
        !values.some((v) => /^-[A-Za-z]*[es]/.test(v!))
      )
        return { verdict: 'allow', reason: 'fc -l only prints' };
      return { verdict: 'ask', reason: 'fc edits and re-runs earlier commands' };
    case 'exit':
    case 'return':
    case 'break':
    case 'continue':
    case 'shift':
    case 'jobs':
    case 'times':
    case 'caller':
    case 'logout':
      return known
        ? { verdict: 'allow', reason: `${base} only ends or reports` }
        : { verdict: 'ask', reason: `${base} with arguments only known at run time` };
    case 'compgen':
      return {
        verdict: 'ask',
        reason:
          'compgen lists completions: -e, -v and -A variable list the variables, -C and -F run commands',
      };
    case 'bind':
    case 'complete':
    case 'compopt':
    case 'disown':
    case 'suspend':
    case 'bg':
    case 'fg':
    case 'coproc':
    case 'builtin':
      return { verdict: 'ask', reason: `${base} changes the shell's state or jobs` };
    default:
      return undefined;
  }
}
