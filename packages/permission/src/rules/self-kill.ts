import { procStatFields, PROC_STAT } from '@conch/process';
import type { Syntax } from '@conch/shell-syntax';
// eslint-disable-next-line no-restricted-imports -- reads /proc only (the kernel's files, not a file the agent wrote)
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import type { CommandFacts, Part } from '../facts.js';
import { grammar, optionValue, parseArgs } from '../grammar.js';
import { baseName, SHELLS } from '../program.js';
import { resolveCommand } from '../resolve.js';
import { evaluate, type Arg } from '../words.js';

/**
 * A process conch itself runs in — the host, its process supervisors (and bubblewrap around them),
 * another conch host on the machine — running now (with a pid) or not (`potential`: what such a
 * process's command line looks like, so a pattern is judged by what it can match, not by what
 * happens to run when the command is judged).
 */
export interface OwnProcess {
  pid?: number;
  /** Process group (a negative kill operand names it). */
  pgid?: number;
  /** Parent pid (`pkill -P <ppid>` selects its children). */
  ppid?: number;
  /** Session id (`pkill -s <sid>`). */
  sid?: number;
  /** `/proc/<pid>/comm` (what pkill, pgrep and killall match by default). */
  name: string;
  /** The full command line (what `pkill -f` matches). */
  cmdline: string;
  /** Not running now: the shape of such a process. */
  potential?: boolean;
}

/**
 * What conch's processes look like whether or not they run now: the host as it was started, a
 * process supervisor (`node …/supervisor-main.js <cookie> …`, inside `bwrap … --bind <workspace> …`),
 * and conch hosts in general (`conch`, `conch-mcp`, `…/@conch/…`).
 */
export function potentialOwnProcesses(workspaceRoot: string): OwnProcess[] {
  const node = process.execPath;
  const script = supervisorScript();
  const supervisor = `${node} ${script} conch-1-0-0- workspace-write 3`;
  return [
    { name: comm(baseName(node)), cmdline: [node, ...process.argv.slice(1)].join(' '), potential: true },
    { name: comm(baseName(node)), cmdline: supervisor, potential: true },
    {
      name: 'bwrap',
      cmdline: `bwrap --die-with-parent --unshare-pid --bind ${workspaceRoot} ${workspaceRoot} --chdir ${workspaceRoot} -- ${supervisor}`,
      potential: true,
    },
    { name: 'conch', cmdline: 'conch', potential: true },
    {
      name: 'conch-mcp',
      cmdline: `${node} /usr/local/lib/node_modules/@conch/mcp/dist/bin.js conch-mcp`,
      potential: true,
    },
    {
      name: 'node',
      cmdline: `node ${workspaceRoot}/node_modules/.bin/conch-mcp --cwd ${workspaceRoot}`,
      potential: true,
    },
  ];
}

let scriptPath: string | undefined;
/** Where the process supervisor's script is (the installed @conch/process), or its generic shape. */
function supervisorScript(): string {
  if (scriptPath !== undefined) return scriptPath;
  scriptPath = '/node_modules/@conch/process/dist/supervisor-main.js';
  try {
    const url = import.meta.resolve('@conch/process');
    if (url.startsWith('file://')) scriptPath = `${new URL('.', url).pathname}supervisor-main.js`;
  } catch {
    // the generic shape
  }
  return scriptPath;
}

/** A process name as the kernel keeps it (comm: at most 15 bytes). */
function comm(name: string): string {
  return name.slice(0, 15);
}

interface Me {
  user: string;
  uid: number;
  gid: number;
}
let me: Me | undefined;
function currentUser(): Me {
  if (!me) {
    try {
      const u = userInfo();
      me = { user: u.username, uid: u.uid, gid: u.gid };
    } catch {
      me = { user: '', uid: -1, gid: -1 };
    }
  }
  return me;
}

const deny = (shown: string, reason: string): Part => ({
  command: shown,
  verdict: 'deny',
  reason: `${reason}: it could kill conch itself (the agent's runtime, its process supervisors or another conch on this machine), which commands may not do`,
  rule: 'safety:selfKill',
});

/**
 * Rule `safety:selfKill`: a command may not kill conch itself — the host process, its process
 * supervisors, another conch host — by pid (`kill <pid>`, `kill $PPID`, `kill $$`), by process
 * group or everything (`kill -- -<pgid>`, `kill 0`, `kill -1`), by name (`pkill node`, `killall
 * node`, `/bin/kill node`), by a pattern that can match a conch command line (`pkill -f
 * supervisor-main`, `pkill -f <workspace>`, `pkill -f conch`), whether or not such a process runs
 * now, or by a selection that includes it (`pkill -v x`, `pkill -u $USER`, `pkill -P <conch pid>`).
 * Signal 0 (a liveness check) and listing (`kill -l`) kill nothing. Pids fed to kill from pgrep,
 * pidof or ps (`pgrep … | xargs kill`, `kill $(pgrep …)`) are judged by `selfKillTree`.
 */
export function selfKill(facts: CommandFacts, own: readonly OwnProcess[]): Part | undefined {
  const name = facts.name;
  if (!name) return undefined;
  if (name === 'kill') {
    const why = killCanHit(facts.args, own);
    return why ? deny(facts.shown, why) : undefined;
  }
  if (name === 'pkill' || name === 'killall') {
    const m = selection(name, facts.args, own);
    if (m && 'kills' in m && !m.kills) return undefined;
    if (m) return deny(facts.shown, m.why);
  }
  return undefined;
}

/**
 * Pids fed to a kill from a program that lists processes: `pgrep … | xargs kill`, `pidof node |
 * xargs kill -9`, `ps aux | grep x | awk '{print $2}' | xargs kill`, `pgrep x | while read p; do
 * kill $p; done`, `kill $(pgrep …)`, `for p in $(pidof node); do kill $p; done`. The listing is
 * judged like pkill's selection (a grep in between narrows it); and a line that kills and names
 * its own parent (`$PPID`, `$$`, `$BASHPID`) anywhere (`p=$PPID; kill $p`) is denied.
 */
export function selfKillTree(
  tree: Syntax.SyntaxTree,
  ownProcesses: () => readonly OwnProcess[],
  home: string,
): Part[] {
  const found: Part[] = [];
  let ownCache: readonly OwnProcess[] | undefined;
  const own = () => (ownCache ??= ownProcesses());
  let kills: string | undefined;
  let parentRef: string | undefined;
  const shell = { home, cwds: undefined, vars: new Map<string, string | null>() };
  const resolved = (st: Syntax.SimpleCommand) => {
    if (st.words.length === 0) return undefined;
    const args = st.words.map((w) => evaluate(w, shell));
    if (args[0]!.value === undefined) return undefined;
    const r = resolveCommand(args, undefined, false);
    return r.end.kind === 'command'
      ? { base: r.end.base, args: r.end.args, dynamicArgs: r.dynamicArgs }
      : undefined;
  };
  const isKiller = (base: string) => base === 'kill' || base === 'pkill' || base === 'killall';
  // Only commands whose words spell `kill` (however quoted), or a shell, are resolved: the rest of
  // the line costs nothing here.
  const mayKill = (st: Syntax.SimpleCommand) =>
    st.words.some((w) => wordText(w).includes('kill')) ||
    (st.words[0] !== undefined && SHELLS.has(baseName(wordText(st.words[0]))));
  const killer = (st: Syntax.SimpleCommand) => (mayKill(st) ? resolved(st) : undefined);

  /** Whether a statement kills pids it reads at run time (from stdin or variables). */
  const consumesPids = (st: Syntax.Statement): boolean => {
    let yes = false;
    visitStatement(st, (s) => {
      const r = killer(s);
      if (!r) return;
      if (
        r.base === 'kill' &&
        !killsNothing(r.base, r.args) &&
        (r.dynamicArgs || r.args.some((a) => a.value === undefined))
      )
        yes = true;
      if (
        SHELLS.has(r.base) &&
        !r.args.some((a) => a.value === '-c' || (a.value ?? '').startsWith('-c')) &&
        r.args.every((a) => (a.value ?? '-').startsWith('-'))
      )
        yes = true;
    });
    return yes;
  };
  const judgeSource = (stages: readonly Syntax.Statement[], shown: string) => {
    const why = listedProcesses(stages, own, resolved);
    if (why) found.push(deny(shown, why));
  };
  const visitWords = (words: readonly Syntax.Word[], shown: string, killing: boolean) => {
    for (const w of words)
      for (const part of w.parts) {
        if (part.kind === 'param' && /^(PPID|\$|BASHPID)$/.test(part.name)) parentRef ??= part.text;
        if ((part.kind === 'command-sub' || part.kind === 'process-sub') && killing) {
          const last = part.body.items[part.body.items.length - 1]?.statement;
          if (last) judgeSource(last.kind === 'pipeline' ? last.stages : [last], shown);
        }
      }
  };

  const visit = (st: Syntax.Statement): void => {
    switch (st.kind) {
      case 'simple': {
        const r = killer(st);
        const killing = r !== undefined && r.base === 'kill';
        if (r && isKiller(r.base) && !killsNothing(r.base, r.args)) kills ??= st.text;
        visitWords(st.words, st.text, killing);
        for (const a of st.assignments) if (a.value) visitWords([a.value], st.text, false);
        for (const w of st.words)
          for (const p of w.parts) if (p.kind === 'command-sub' || p.kind === 'process-sub') seq(p.body);
        return;
      }
      case 'pipeline':
        st.stages.forEach((stage, i) => {
          if (i > 0 && consumesPids(stage)) judgeSource(st.stages.slice(0, i), st.text);
          visit(stage);
        });
        return;
      case 'and-or':
        visit(st.left);
        visit(st.right);
        return;
      case 'subshell':
      case 'group':
        seq(st.body);
        return;
      case 'negated':
        visit(st.body);
        return;
      case 'function':
        visit(st.body);
        return;
      case 'if':
        for (const c of st.clauses) {
          seq(c.condition);
          seq(c.body);
        }
        if (st.otherwise) seq(st.otherwise);
        return;
      case 'while':
        seq(st.condition);
        seq(st.body);
        return;
      case 'for': {
        let killsInside = false;
        visitSequence(st.body, (s) => {
          const r = killer(s);
          if (r?.base === 'kill') killsInside = true;
        });
        visitWords(st.values ?? [], st.text, killsInside);
        for (const w of st.values ?? [])
          for (const p of w.parts) if (p.kind === 'command-sub' || p.kind === 'process-sub') seq(p.body);
        seq(st.body);
        return;
      }
      case 'case':
        for (const item of st.items) seq(item.body);
        return;
      case 'arithmetic':
        if (st.body) seq(st.body);
        return;
      default:
        return;
    }
  };
  const seq = (s: Syntax.Sequence) => {
    for (const item of s.items) visit(item.statement);
  };
  seq(tree.body);
  if (found.length === 0 && kills && parentRef)
    found.push(deny(kills, `the line kills a process and names its own parent or shell (${parentRef})`));
  return found.slice(0, 1);
}

/** The literal text of a word (quotes removed; expansions left out). */
function wordText(w: Syntax.Word): string {
  let out = '';
  for (const p of w.parts) if (p.kind === 'text') out += p.value;
  return out;
}

/** Every simple command of a statement, at any depth (loops and branches included). */
function visitStatement(st: Syntax.Statement, fn: (s: Syntax.SimpleCommand) => void): void {
  switch (st.kind) {
    case 'simple':
      fn(st);
      return;
    case 'pipeline':
      st.stages.forEach((s) => visitStatement(s, fn));
      return;
    case 'and-or':
      visitStatement(st.left, fn);
      visitStatement(st.right, fn);
      return;
    case 'negated':
    case 'function':
      visitStatement(st.body, fn);
      return;
    case 'subshell':
    case 'group':
      visitSequence(st.body, fn);
      return;
    case 'if':
      for (const c of st.clauses) {
        visitSequence(c.condition, fn);
        visitSequence(c.body, fn);
      }
      if (st.otherwise) visitSequence(st.otherwise, fn);
      return;
    case 'while':
      visitSequence(st.condition, fn);
      visitSequence(st.body, fn);
      return;
    case 'for':
      visitSequence(st.body, fn);
      return;
    case 'case':
      for (const item of st.items) visitSequence(item.body, fn);
      return;
    default:
      return;
  }
}

function visitSequence(s: Syntax.Sequence, fn: (s: Syntax.SimpleCommand) => void): void {
  for (const item of s.items) visitStatement(item.statement, fn);
}

/**
 * The conch processes the output of a listing pipeline can name (pgrep, pidof, ps, narrowed by
 * grep), as a reason, or undefined when none or when no stage lists processes.
 */
function listedProcesses(
  stages: readonly Syntax.Statement[],
  ownProcesses: () => readonly OwnProcess[],
  resolved: (st: Syntax.SimpleCommand) => { base: string; args: Arg[] } | undefined,
): string | undefined {
  let listed: OwnProcess[] | undefined;
  let via = '';
  for (const stage of stages) {
    if (stage.kind !== 'simple') continue;
    const r = resolved(stage);
    if (!r) continue;
    if (r.base === 'pgrep' || r.base === 'pidof') {
      const own = ownProcesses();
      const m = selection(r.base, r.args, own);
      listed = m && 'hits' in m ? m.hits : m ? [...own] : [];
      via = `${r.base} ${r.args.map((a) => a.raw).join(' ')}`.trim();
    } else if (r.base === 'ps') {
      listed = [...ownProcesses()];
      via = 'ps';
    } else if (listed && /^(grep|egrep|fgrep)$/.test(r.base)) {
      listed = grepFilter(r.base, r.args, listed);
    }
  }
  if (!listed || listed.length === 0) return undefined;
  return `${via} lists ${describe(listed[0]!)}, and its output is killed`;
}

function describe(p: OwnProcess): string {
  return p.potential ? `processes like \`${clipText(p.cmdline)}\`` : `${p.name} (pid ${p.pid})`;
}

function clipText(text: string, max = 100): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** What a grep between the listing and the kill lets through (all of it when the grep cannot be read). */
function grepFilter(base: string, args: readonly Arg[], listed: OwnProcess[]): OwnProcess[] {
  const parsed = parseArgs(GREP, args, base);
  if (!parsed.ok) return listed;
  const has = (...keys: string[]) => parsed.args.options.some((o) => keys.includes(o.def.key));
  const patterns = parsed.args.options
    .filter((o) => o.def.key === '-e')
    .map((o) => (typeof o.value === 'string' ? literal(o.value) : o.value!));
  if (patterns.length === 0 && parsed.args.operands[0]) patterns.push(parsed.args.operands[0]);
  if (patterns.length === 0 || has('-f')) return listed;
  const invert = has('-v');
  const fixed = has('-F') || base === 'fgrep';
  const flags = has('-i', '-y') ? 'i' : '';
  const res: RegExp[] = [];
  for (const p of patterns) {
    const source = fixed && p.value !== undefined ? escapeRe(p.value) : regexSource(p);
    let src = source;
    if (has('-x')) src = `^(?:${src})$`;
    else if (has('-w')) src = `(?<![\\w])(?:${src})(?![\\w])`;
    const re = compile(src, flags);
    if (!re) return listed;
    res.push(re);
  }
  const { user } = currentUser();
  return listed.filter((p) => {
    const line = `${user} ${p.pid ?? 0} ${p.cmdline}`;
    const hit = res.some((re) => re.test(line));
    return invert ? !hit : hit;
  });
}

const GREP = grammar({
  flags: 'EFGPivwxyclLnhHobsqUzarRIZT',
  values: 'efmABCd',
  long: 'extended-regexp fixed-strings basic-regexp perl-regexp regexp=:e file=:f ignore-case no-ignore-case invert-match word-regexp line-regexp count color? colour? files-with-matches files-without-match max-count=:m only-matching quiet silent no-messages byte-offset with-filename no-filename label= line-number line-buffered text binary-files= null null-data after-context=:A before-context=:B context=:C recursive dereference-recursive include= exclude= exclude-dir= initial-tab',
});

const PGREP = grammar({
  flags: 'cefilnovwxaAHL',
  values: 'dgGPstuUFOrq',
  long: 'signal= count echo full ignore-case list-name list-full newest oldest older= parent= pgroup= group= session= terminal= euid= uid= exact pidfile= logpidfile inverse lightweight delimiter= runstates= ignore-ancestors cgroup= ns= nslist= require-handler queue= env= help version',
  numeric: true,
});

const KILLALL = grammar({
  flags: 'eIgiqrvwlVpY',
  values: 'suoynZ',
  long: 'exact ignore-case process-group interactive list quiet regexp signal= user= older-than= younger-than= verbose version wait ns= context= help',
  numeric: true,
});

const PIDOF = grammar({ flags: 'scnxzqSw', values: 'od', long: 'help version' });

/** Signal names kill, pkill and killall accept as `-NAME` (with or without `SIG`). */
const SIGNALS = new Set(
  'HUP INT QUIT ILL TRAP ABRT IOT BUS FPE KILL USR1 SEGV USR2 PIPE ALRM TERM STKFLT CHLD CLD CONT STOP TSTP TTIN TTOU URG XCPU XFSZ VTALRM PROF WINCH IO POLL PWR SYS EMT LOST INFO UNUSED RTMIN RTMAX'.split(
    ' ',
  ),
);

/** Whether `text` (after a leading `-`) names a signal: `9`, `KILL`, `SIGKILL`, `stop`, `RTMIN+3`. */
function isSignal(text: string): boolean {
  if (/^\d+$/.test(text)) return true;
  const name = text.toUpperCase().replace(/^SIG/, '');
  return SIGNALS.has(name) || /^RT(MIN|MAX)([+-]\d+)?$/.test(name);
}

/** Signal 0 kills nothing (a liveness check). */
function isZeroSignal(text: string | undefined): boolean {
  return text !== undefined && /^(0|SIG0)$/i.test(text);
}

/**
 * Whether `kill <args>` can hit conch: a pid, a process group, `0` (the caller's group), `-1`
 * (every process), `$PPID` / `$$` / `$BASHPID`, or a name (util-linux kill takes names: `/bin/kill
 * node`). Returns the reason, or undefined.
 */
function killCanHit(args: readonly Arg[], own: readonly OwnProcess[]): string | undefined {
  const parsed = parseKill(args);
  if (!parsed || isZeroSignal(parsed.signal)) return undefined;
  for (const a of parsed.operands) {
    const v = a.value;
    if (v === undefined) {
      if (/\$\{?(PPID|\$|BASHPID)\b|\$\{?\$\}?/.test(a.raw))
        return `kill ${a.raw} targets the command's own parent or shell (a conch supervisor or session)`;
      continue;
    }
    if (v === '-1') return 'kill -1 signals every process the user owns';
    if (v === '0' || v === '-0') return `kill ${v} signals every process in the caller's process group`;
    if (/^%/.test(v)) continue;
    const n = Number(v);
    if (Number.isInteger(n) && /^-?\d+$/.test(v)) {
      const hit = own.find((p) => !p.potential && (n > 0 ? p.pid === n : p.pgid === -n));
      if (hit) return `kill ${v} targets ${hit.name} (pid ${hit.pid})`;
      continue;
    }
    // util-linux kill signals every process of that name.
    const hit = own.find((p) => p.name === comm(v) || baseName(p.cmdline.split(' ')[0] ?? '') === v);
    if (hit) return `kill ${v} names ${describe(hit)} (kill signals every process of that name)`;
  }
  return undefined;
}

/**
 * `kill`'s arguments read the way bash's builtin and util-linux kill read them: the signal
 * (`-9`, `-KILL`, `-SIGKILL`, `-s KILL`, `-sKILL`, `-n 9`, `--signal KILL`) and the operands;
 * undefined for a listing (`-l`, `-L`).
 */
function parseKill(args: readonly Arg[]): { signal: string | undefined; operands: Arg[] } | undefined {
  let options = true;
  let signal: string | undefined;
  const operands: Arg[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const v = a.value;
    if (options && v !== undefined) {
      if (v === '--') {
        options = false;
        continue;
      }
      if (v === '-s' || v === '-n' || v === '--signal') {
        signal = args[++i]?.value ?? '?';
        continue;
      }
      if (v.startsWith('--signal=')) {
        signal = v.slice(9);
        continue;
      }
      if (v === '-l' || v === '-L' || v === '--list' || v === '--table' || v.startsWith('--list='))
        return undefined;
      if (v === '-q' || v === '--queue') {
        i++;
        continue;
      }
      if (v === '--timeout') {
        i += 2;
        continue;
      }
      if (v === '-a' || v === '--all' || v === '-p' || v === '--pid' || v === '--verbose') continue;
      if (signal === undefined && /^-./.test(v) && isSignal(v.slice(1))) {
        signal = v.slice(1);
        continue;
      }
      if (/^-s./.test(v) && signal === undefined) {
        signal = v.slice(2);
        continue;
      }
    }
    operands.push(a);
  }
  return { signal, operands };
}

/** Whether a kill, pkill or killall sends signal 0 (checks, kills nothing) or only lists signals. */
function killsNothing(base: string, args: readonly Arg[]): boolean {
  if (base === 'kill') {
    const parsed = parseKill(args);
    return !parsed || isZeroSignal(parsed.signal);
  }
  const first = args[0]?.value;
  if (first && /^-./.test(first) && isSignal(first.slice(1))) return isZeroSignal(first.slice(1));
  for (let i = 0; i < args.length; i++) {
    const v = args[i]!.value ?? '';
    if (v.startsWith('--signal=')) return isZeroSignal(v.slice(9));
    if (v === '--signal' || (base === 'killall' && v === '-s')) return isZeroSignal(args[i + 1]?.value);
  }
  return false;
}

type Selection =
  /** The selection can include these conch processes (each reason names one). */
  | { why: string; hits: OwnProcess[] }
  /** It kills nothing (signal 0, a listing): never a self-kill. */
  | { kills: false; why: string }
  /** It cannot be read: it may select anything. */
  | { why: string };

/**
 * What a pkill / pgrep / killall / pidof selection can include of conch: undefined when it cannot
 * include any conch process, otherwise why (and which).
 */
function selection(program: string, all: readonly Arg[], own: readonly OwnProcess[]): Selection | undefined {
  let args = all;
  let signal: string | undefined;
  const first = args[0]?.value;
  if (
    (program === 'pkill' || program === 'killall') &&
    first &&
    /^-./.test(first) &&
    isSignal(first.slice(1))
  ) {
    signal = first.slice(1);
    args = args.slice(1);
  }
  const g = program === 'killall' ? KILLALL : program === 'pidof' ? PIDOF : PGREP;
  const parsed = parseArgs(g, args, program);
  if (!parsed.ok)
    return { why: `${program} cannot be read (${parsed.reason}), so what it selects cannot be ruled out` };
  const p = parsed.args;
  const opt = (...keys: string[]) => p.options.filter((o) => keys.includes(o.def.key));
  const has = (...keys: string[]) => opt(...keys).length > 0;
  const sig = opt('--signal', ...(program === 'killall' ? ['-s'] : []))[0];
  if (sig) signal = optionValue(sig) ?? '?';
  if (isZeroSignal(signal)) return { kills: false, why: 'signal 0' };
  if (program === 'killall' && has('-l', '--list', '-V', '--version'))
    return { kills: false, why: 'a listing' };
  if (program !== 'killall' && has('--help', '--version')) return { kills: false, why: 'a listing' };

  if (program !== 'killall' && program !== 'pidof' && has('-v', '--inverse'))
    return {
      why: `${program} -v selects every process its pattern does not match, conch's among them`,
      hits: [...own],
    };

  // Selections other than the pattern: each must be able to include conch for the whole to.
  const me = currentUser();
  const values = (keys: string[]) =>
    opt(...keys).flatMap((o) => {
      const v = optionValue(o);
      return v === undefined ? [undefined] : v.split(',');
    });
  const numbers = (list: (string | undefined)[], ours: (number | undefined)[], zeroIsOurs: boolean) =>
    list.some(
      (v) => v === undefined || !/^\d+$/.test(v) || (zeroIsOurs && v === '0') || ours.includes(Number(v)),
    );
  const excluded: string[] = [];
  const narrowed: string[] = [];
  const user = (keys: string[], what: string) => {
    if (!has(...keys)) return;
    const list = values(keys);
    const ours = list.some((v) => v === undefined || v === me.user || v === String(me.uid));
    (ours ? narrowed : excluded).push(what);
  };
  if (program === 'killall') user(['-u', '--user'], '-u');
  else {
    user(['-u', '--euid'], '-u');
    user(['-U', '--uid'], '-U');
    if (has('-G', '--group')) {
      const list = values(['-G', '--group']);
      (list.some((v) => v === undefined || !/^\d+$/.test(v) || Number(v) === me.gid)
        ? narrowed
        : excluded
      ).push('-G');
    }
    const pids = own.filter((o) => !o.potential);
    if (has('-P', '--parent')) {
      const parents = [...pids.map((o) => o.ppid), ...pids.map((o) => o.pid)];
      (numbers(values(['-P', '--parent']), parents, true) ? narrowed : excluded).push('-P');
    }
    if (has('-g', '--pgroup'))
      (numbers(
        values(['-g', '--pgroup']),
        pids.map((o) => o.pgid),
        true,
      )
        ? narrowed
        : excluded
      ).push('-g');
    if (has('-s', '--session'))
      (numbers(
        values(['-s', '--session']),
        pids.map((o) => o.sid),
        true,
      )
        ? narrowed
        : excluded
      ).push('-s');
    if (has('-t', '--terminal')) narrowed.push('-t');
    if (has('-F', '--pidfile')) excluded.push('-F');
  }
  if (excluded.length > 0) return undefined;

  const patterns = p.operands;
  if (patterns.length === 0) {
    if (program === 'pidof') return undefined;
    if (narrowed.length === 0) return undefined; // no criteria: the program refuses to run
    return {
      why: `${program} ${narrowed.join(' ')} selects processes of the user, conch's among them`,
      hits: [...own],
    };
  }

  const full = program !== 'killall' && program !== 'pidof' && has('-f', '--full');
  const icase = program === 'killall' ? has('-I', '--ignore-case') : has('-i', '--ignore-case');
  const regexp = program === 'killall' ? has('-r', '--regexp') : program !== 'pidof';
  const exact = program === 'pidof' || (program === 'killall' ? !regexp : has('-x', '--exact'));
  const hits: OwnProcess[] = [];
  for (const pattern of patterns) {
    if (pattern.value !== undefined && /conch/i.test(pattern.value.replace(/[\\[\]()^$]/g, ''))) {
      return { why: `${program} ${pattern.raw} names conch`, hits: [...own] };
    }
    let source: string;
    if (regexp) source = regexSource(pattern);
    else if (pattern.value !== undefined) source = escapeRe(pattern.value);
    else source = regexSource(pattern);
    const re = compile(exact ? `^(?:${source})$` : source, icase ? 'i' : '');
    if (!re)
      return { why: `${program} ${pattern.raw} is a pattern the gate cannot read, so it may match conch` };
    for (const o of own) {
      const targets = full
        ? [o.cmdline]
        : program === 'pidof' || program === 'killall'
          ? [o.name, baseName(o.cmdline.split(' ')[0] ?? '')]
          : [o.name];
      if (targets.some((t) => re.test(t))) hits.push(o);
    }
  }
  if (hits.length === 0) return undefined;
  const h = hits.find((x) => !x.potential) ?? hits[0]!;
  const target = full ? h.cmdline : h.name;
  return {
    why: `${program} ${patterns.map((x) => x.raw).join(' ')} matches ${h.potential ? `conch's \`${clipText(target)}\`` : `${clipText(target)} (pid ${h.pid})`}`,
    hits,
  };
}

/**
 * A regular expression (POSIX extended, as pgrep and grep -E read it) as JavaScript source. A part
 * only known at run time stands for any text (`.*`).
 */
function regexSource(arg: Arg): string {
  if (arg.value !== undefined) return ere(arg.value);
  // The glob the word can be: `\X` is X as written (a regex character), `*` an unknown part.
  const pieces: string[] = [];
  let text = '';
  const p = arg.pattern;
  for (let i = 0; i < p.length; i++) {
    const ch = p[i]!;
    if (ch === '\\' && i + 1 < p.length) text += p[++i]!;
    else if (ch === '*') {
      pieces.push(ere(text), '.*');
      text = '';
    } else text += ch;
  }
  pieces.push(ere(text));
  return pieces.join('');
}

const POSIX_CLASSES: Record<string, string> = {
  alpha: 'A-Za-z',
  digit: '0-9',
  alnum: 'A-Za-z0-9',
  upper: 'A-Z',
  lower: 'a-z',
  space: '\\s',
  blank: ' \\t',
  punct: '!-\\/:-@\\[-`{-~',
  print: ' -~',
  graph: '!-~',
  cntrl: '\\x00-\\x1f\\x7f',
  xdigit: '0-9A-Fa-f',
  word: '\\w',
};

/** POSIX ERE to JavaScript: character classes, `\<` `\>` word edges. */
function ere(source: string): string {
  return source
    .replace(/\[:([a-z]+):\]/g, (m, name: string) => POSIX_CLASSES[name] ?? m)
    .replace(/\\[<>]/g, '\\b');
}

function compile(source: string, flags: string): RegExp | undefined {
  try {
    return new RegExp(source, flags);
  } catch {
    return undefined;
  }
}

function escapeRe(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

function literal(value: string): Arg {
  return { value, raw: value, pattern: value } as Arg;
}

/** The host process and the given supervisors as /proc describes them (Linux; the host alone elsewhere). */
export function runningOwnProcesses(supervisors: readonly number[]): OwnProcess[] {
  const out: OwnProcess[] = [];
  for (const pid of [process.pid, ...supervisors]) {
    const self = pid === process.pid;
    let name = self ? process.title : '';
    let cmdline = self ? process.argv.join(' ') : '';
    let fields: string[] | undefined;
    try {
      name = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').filter(Boolean).join(' ');
      fields = procStatFields(pid);
    } catch {
      // a supervisor gone meanwhile, or no /proc
    }
    if (fields) {
      out.push({
        pid,
        name,
        cmdline,
        ppid: Number(fields[PROC_STAT.ppid]),
        pgid: Number(fields[PROC_STAT.pgrp]),
        sid: Number(fields[PROC_STAT.session]),
      });
    } else if (self) {
      out.push({ pid, name, cmdline, ppid: process.ppid });
    }
  }
  return out;
}
