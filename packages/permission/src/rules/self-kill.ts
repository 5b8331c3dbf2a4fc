import type { CommandFacts, Part } from '../facts.js';
import { grammar, parseArgs } from '../grammar.js';
import type { Arg } from '../words.js';

/** A process conch itself runs in: the host, its process supervisors. */
export interface OwnProcess {
  pid: number;
  /** Process group (a negative kill operand names it). */
  pgid?: number;
  /** `/proc/<pid>/comm` (what pkill and killall match by default). */
  name: string;
  /** The full command line (what `pkill -f` matches). */
  cmdline: string;
}

const PKILL = grammar({
  flags: 'cefilnvwxacrA',
  values: 'dgGPstuUFoO',
  long: 'signal= count full ignore-case list-name list-full newest oldest older= parent= pgroup= group= session= terminal= euid= uid= exact pidfile= logpidfile inverse lightweight echo ns= nslist= runstates= ignore-ancestors env= help version',
  numeric: true,
  abbreviations: true,
});

/**
 * Rule `safety:selfKill`: a command may not kill conch itself — the host process or its process
 * supervisors — by pid (`kill <pid>`, `kill -- -<pgid>`, `kill -1`), by name (`pkill node`,
 * `killall node` when the host is node) or by a `pkill -f` pattern that matches their command
 * lines. (A terminal session's shell replaced by `exec` is refused by the terminal tool itself.)
 */
export function selfKill(facts: CommandFacts, own: readonly OwnProcess[]): Part | undefined {
  const name = facts.name;
  if (!name || own.length === 0) return undefined;
  const deny = (reason: string): Part => ({
    command: facts.shown,
    verdict: 'deny',
    reason: `${reason}: it would kill conch itself (the agent's runtime), which commands may not do`,
    rule: 'safety:selfKill',
  });
  if (name === 'kill') {
    for (const a of pidOperands(facts.args)) {
      if (a === '-1') return deny('kill -1 signals every process the user owns');
      const n = Number(a);
      if (!Number.isInteger(n)) continue;
      const hit = own.find((p) => (n > 0 ? p.pid === n : p.pgid === -n));
      if (hit) return deny(`kill ${a} targets ${hit.name} (pid ${hit.pid})`);
    }
    return undefined;
  }
  if (name === 'pkill' || name === 'killall') {
    const parsed = parseArgs(PKILL, facts.args, name);
    if (!parsed.ok) return undefined;
    const has = (...keys: string[]) => parsed.args.options.some((o) => keys.includes(o.def.key));
    const full = has('-f', '--full');
    const exact = has('-x', '--exact') || (name === 'killall' && !has('-r'));
    const icase = has('-i', '--ignore-case');
    for (const operand of parsed.args.operands) {
      if (operand.value === undefined) continue;
      let re: RegExp;
      try {
        re = new RegExp(exact ? `^(?:${operand.value})$` : operand.value, icase ? 'i' : '');
      } catch {
        continue;
      }
      if (name === 'killall' && !has('-r')) re = new RegExp(`^${escape(operand.value)}$`, icase ? 'i' : '');
      const hit = own.find((p) => re.test(full ? p.cmdline : p.name));
      if (hit)
        return deny(`${name} ${operand.value} matches ${full ? hit.cmdline : hit.name} (pid ${hit.pid})`);
    }
  }
  return undefined;
}

/**
 * The operands of `kill` that name processes. The first `-SIG` / `-N` is the signal (`kill -9 …`);
 * after it (or after `--`) a negative number is a process group and `-1` every process.
 */
function pidOperands(args: readonly Arg[]): string[] {
  const out: string[] = [];
  let options = true;
  let sawSignal = false;
  for (let i = 0; i < args.length; i++) {
    const v = args[i]!.value;
    if (v === undefined) continue;
    if (options) {
      if (v === '--') {
        options = false;
        continue;
      }
      if (v === '-s' || v === '-n') {
        sawSignal = true;
        i++;
        continue;
      }
      if (v === '-l' || v === '-L') return [];
      if (!sawSignal && /^-([A-Za-z][A-Za-z0-9+-]*|\d+)$/.test(v)) {
        sawSignal = true;
        continue;
      }
    }
    out.push(v);
  }
  return out;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
