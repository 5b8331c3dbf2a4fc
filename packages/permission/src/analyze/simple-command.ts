// Owns simple commands and the resolver glue: a simple command's assignments, words and redirects
// evaluated; the resolver (`resolve.ts`) looking through its wrappers once (env, nice, xargs,
// find -exec, busybox …); the judge of the innermost command (a program by path, downloaders,
// shells and interpreters and where their code comes from, eval and source, builtins, read-only
// commands, version queries); nested command strings (`bash -c`, `eval`, a here-document fed to a
// shell, PROMPT_COMMAND) walked as lines of their own; and argument lists handed to programs the
// gate does not know (`strace -f rm -rf ~`), which the deny rules judge too.
import type { Syntax } from '@conch/shell-syntax';
import { posix } from 'node:path';
import { judgeBuiltin } from '../builtins.js';
import { writeFacts } from '../commands/writers.js';
import type { CommandFacts, Part, RunFacts, Verdict } from '../facts.js';
import { fileSource, interpreterSource, shellInvocation, splitFields } from '../interpreters.js';
import { classifyName } from '../names.js';
import { namesEnviron } from '../needs/listing.js';
import {
  isReadOnlyCommand,
  onlyPrintsVersion,
  readOnly,
  readOnlySpec,
  writesOutside,
} from '../needs/read-only.js';
import { baseName, DOWNLOADERS, isInterpreter, SHELLS, SYSTEM_DIRS } from '../program.js';
import { resolveCommand } from '../resolve.js';
import { commandRules, dynamicNameRules, dynamicScriptRules, handedOverDeny } from '../rules/apply.js';
import { suggestRule } from '../suggest-rule.js';
import { clip, evaluate, literalArg, type Arg } from '../words.js';
import type { Add, AnalysisContext, Ends, Io, State, Walk } from './context.js';
import { addWriteFacts, clone, emptyFacts, toShell } from './helpers.js';
import { hostRules, unresolvedNameRules } from './host-match.js';
import { assignedName, line, redirect, wordRisks } from './walk.js';

/** Judges one simple command of the walk (`AnalysisContext.simple`). */
export function simple(
  ctx: AnalysisContext,
  cmd: Syntax.SimpleCommand,
  state: State,
  walk: Walk,
  io: Io,
): Ends {
  const shown = clip(cmd.text, 200);
  const shell = toShell(state, ctx.options.paths.home);
  const parts: Part[] = [];
  const add = (verdict: Verdict, reason: string, rule: string, suggestedRule?: string) =>
    parts.push({ command: shown, verdict, reason, rule, ...(suggestedRule ? { suggestedRule } : {}) });
  const facts = emptyFacts(shown, state.cwds);
  let envRisk: string | undefined;

  // Assignments: prefix (`A=1 cmd`, for the command only) or bare (`A=1`, for the shell).
  const after = clone(state);
  // `IFS=: read a b`, `while IFS= read -r line`: a prefix IFS before the read builtin only tells
  // read how to split the line; it is gone when read returns.
  const readsWithIfs =
    cmd.words.length > 0 && /^(read|mapfile|readarray)$/.test(literalName(cmd.words[0]!) ?? '');
  for (const a of cmd.assignments) {
    facts.names.push({ name: a.name, how: 'an assignment' });
    const c = classifyName(a.name);
    const ifsForRead = readsWithIfs && a.name === 'IFS' && !a.array && a.subscript === undefined;
    if ((c.kind === 'special' || c.kind === 'invalid') && !ifsForRead)
      envRisk ??= `it sets ${a.name}: ${c.reason}`;
    if (a.subscript !== undefined && !/^\[\d+\]$/.test(a.subscript))
      add(
        'ask',
        `the array subscript ${a.subscript} of ${a.name} is evaluated as arithmetic, which can run commands`,
        'failClosed:arithmetic',
      );
    let value: string | null = null;
    if (a.value) {
      const v = evaluate(a.value, shell, { assignment: true });
      storedCode(ctx, a.name, v, shown, state, walk, parts);
      wordRisks(ctx, v, shown, state, walk);
      value = v.fields && v.fields.length <= 1 ? (v.fields[0] ?? '') : null;
      if (!v.fields && !v.opaque && v.glob) value = v.pattern.replace(/\\(.)/g, '$1');
    } else if (!a.array) value = '';
    arrayElements(ctx, a.array ?? [], false, shown, state, walk, parts);
    if (cmd.words.length === 0) after.vars.set(a.name, a.append || a.array || a.subscript ? null : value);
  }
  // `declare -a x=(a b)`, `local -A m=([k]=v)`: the elements of an array given to a declaration.
  const assoc =
    cmd.declaration !== undefined &&
    cmd.words.some((w) => /^-[A-Za-z]*A[A-Za-z]*$/.test(literalName(w) ?? ''));
  for (const a of cmd.argumentAssignments)
    if (a.array) arrayElements(ctx, a.array, assoc, shown, state, walk, parts);

  const evaluated = cmd.words.map((w) => evaluate(withoutArray(w), shell));
  for (const a of evaluated) wordRisks(ctx, a, shown, state, walk);
  const args = splitFields(evaluated);
  for (const r of cmd.redirects) redirect(ctx, r, state, walk, facts, shown);
  // `{name}>file`: bash opens the file on a new descriptor and assigns its number to name, in the
  // shell itself for a builtin (`true {PS1}>/dev/null` sets PS1). tree-sitter reads `{name}` as a
  // word, so a `{name}` word right before a redirect is judged as an assignment.
  for (const name of fdVariables(cmd)) {
    facts.names.push({ name, how: `a {${name}} redirection` });
    assignedName(name, `a {${name}} redirection`, shown, walk);
  }
  let stdinText = io.stdinText;
  for (const r of cmd.redirects) {
    if (r.operator === '<<<' && r.target) {
      const v = evaluate(r.target, shell).value;
      stdinText = v === undefined ? undefined : `${v}\n`;
    } else if (r.heredoc) {
      const h = r.heredoc;
      stdinText =
        h.quoted || (h.parts.length === 0 && !h.backtick && !h.body.includes('\\')) ? h.body : undefined;
    } else if (r.operator === '<') stdinText = undefined;
  }

  if (args.length === 0) {
    // Bare assignments (and redirect-only statements such as `> f`).
    parts.push(...commandRules(ctx, facts, false));
    if (envRisk) add('ask', envRisk, 'failClosed:environment');
    else if (facts.writes.length > 0)
      add('ask', `it writes ${facts.writes[0]!.target.raw} through a redirection`, 'unknown');
    else add('allow', 'it only sets shell variables', 'readOnly:assignment');
    walk.parts.push(...parts);
    return { ok: after, fail: after };
  }
  // Unreachable: the branch above already returned for an empty argument list (kept as it was).
  if (args.length === 0) {
    walk.parts.push({
      command: shown,
      verdict: 'ask',
      reason: 'the command expands to nothing known',
      rule: 'failClosed:dynamicName',
    });
    return { ok: state, fail: state };
  }
  const ends = command(ctx, {
    args,
    facts,
    envRisk,
    state,
    walk,
    parts,
    shown,
    cwds: state.cwds,
    dynamicArgs: false,
    ...(stdinText !== undefined ? { stdinText } : {}),
  });
  walk.parts.push(...parts);
  return ends;
}

/**
 * The resolver and the judge of one command whose words are evaluated: looks through wrappers
 * once, level by level, then decides on the innermost command and applies the safety rules.
 */
function command(
  ctx: AnalysisContext,
  c: {
    args: Arg[];
    facts: CommandFacts;
    envRisk: string | undefined;
    state: State;
    walk: Walk;
    parts: Part[];
    shown: string;
    cwds: string[] | undefined;
    dynamicArgs: boolean;
    /** What the command reads on stdin, when it is literal text (a here-string, `echo x |`). */
    stdinText?: string;
  },
): Ends {
  const { facts, state, walk, parts, shown } = c;
  const first = parts.length;
  let envRisk = c.envRisk;
  const add: Add = (verdict, reason, rule, suggestedRule, extra) =>
    parts.push({
      command: shown,
      verdict,
      reason,
      rule,
      ...(suggestedRule ? { suggestedRule, ...(facts.cwds ? { cwds: facts.cwds } : {}) } : {}),
      ...extra,
    });
  const r = resolveCommand(c.args, c.cwds, c.dynamicArgs);
  const { levels } = r;
  facts.programs.push(...r.programs);
  facts.writes.push(...r.writes);
  facts.cwds = r.cwds;
  for (const { name: n } of r.env) {
    facts.names.push({ name: n, how: `env ${n}=…` });
    const cls = classifyName(n);
    if (cls.kind === 'special' || cls.kind === 'invalid')
      envRisk ??= `it sets ${n} through env: ${cls.reason}`;
  }
  // A word naming a process's environment (`cat /proc/self/environ`, `xargs -0 -a /proc/1/environ
  // echo`, `env -C /proc/self cat environ`): whichever program reads it lists the environment.
  const innermost = r.levels[r.levels.length - 1]!;
  const environ =
    c.args.find((a) => namesEnviron(a, c.cwds)) ?? innermost.find((a) => namesEnviron(a, r.cwds));
  if (environ)
    add(
      'ask',
      `it names ${environ.raw}, a process's environment: reading it lists the environment like env`,
      'failClosed:environmentListing',
    );
  if (r.quotedName)
    add(
      'ask',
      `the command name is written with ANSI-C quoting (${r.quotedName.raw} is ${JSON.stringify(r.quotedName.value)})`,
      'failClosed:quotedName',
    );
  let ends: Ends = { ok: state, fail: state };
  const end = r.end;
  switch (end.kind) {
    case 'dynamicName': {
      const nameArg = end.arg;
      parts.push(...dynamicNameRules(ctx, nameArg, shown), ...unresolvedNameRules(ctx, nameArg, shown));
      add('ask', `the command name ${nameArg.raw} is only known at run time`, 'failClosed:dynamicName');
      break;
    }
    case 'privilege':
      facts.name = end.base;
      facts.args = end.args;
      if (!ctx.options.safety.privilegeEscalation)
        add('ask', `${end.base} runs commands with elevated privileges`, 'unknown', suggestRule(levels[0]!));
      break;
    case 'string':
      facts.name = end.via;
      facts.args = end.args;
      if (envRisk) add('ask', envRisk, 'failClosed:environment');
      nested(ctx, end.script, end.via, shown, r.cwds, state, walk, parts);
      break;
    case 'opaque':
      facts.name = end.via;
      facts.args = end.args;
      add(
        'ask',
        `cannot see what ${end.via} runs: ${end.reason}`,
        'failClosed:wrapper',
        suggestRule(levels[0]!),
      );
      break;
    case 'alone':
      facts.name = end.via;
      facts.args = end.args;
      if (end.readOnly && facts.writes.length === 0 && !envRisk) {
        if (!hostRules(ctx, levels, add, false))
          add('allow', `${end.via} alone only reads`, `readOnly:${end.via}`);
      } else if (!hostRules(ctx, levels, add, true, envRisk !== undefined, r.cwds)) {
        add('ask', end.reason ?? envRisk ?? `${end.via} writes a file`, 'unknown', suggestRule(levels[0]!));
      }
      break;
    case 'command': {
      facts.name = end.base;
      facts.args = end.args;
      const wf = writeFacts(end.base, end.args);
      if (wf) addWriteFacts(facts, wf);
      else if (!isReadOnlyCommand(end.base) && !isInterpreter(end.base) && !SHELLS.has(end.base)) {
        handedOver(ctx, end.base, end.args, facts, shown, state, walk, parts);
      }
      ends = judge(ctx, {
        name: end.name,
        base: end.base,
        args: end.args,
        levels,
        facts,
        envRisk,
        dynamicArgs: r.dynamicArgs,
        cwds: r.cwds,
        state,
        walk,
        parts,
        add,
        shown,
        ...(c.stdinText !== undefined ? { stdinText: c.stdinText } : {}),
      });
      break;
    }
  }
  const readOnlyPart = parts.some((p) => p.rule.startsWith('readOnly:'));
  parts.push(...commandRules(ctx, facts, readOnlyPart));
  // The command as it will run, on its parts (a command nested in it keeps its own).
  const run: RunFacts = {
    argv: innermost.map((a) => a.value),
    cwds: r.cwds,
    ...(r.dynamicArgs ? { dynamicArgs: true } : {}),
  };
  for (let i = first; i < parts.length; i++) parts[i]!.run ??= run;
  return ends;
}

/**
 * A program the gate does not know may run what it is handed (strace, chroot, xvfb-run, tmux
 * new, script -c, gdb -ex …): the deny rules also judge each argument list that starts with a
 * program they know (`strace -f rm -rf ~` is `rm -rf ~`) and each literal argument read as a
 * command line (`script -c 'echo x > ~/.bashrc'`). Only their denies count: the program itself
 * already asks.
 */
function handedOver(
  ctx: AnalysisContext,
  program: string,
  args: readonly Arg[],
  facts: CommandFacts,
  shown: string,
  state: State,
  walk: Walk,
  parts: Part[],
): void {
  for (let i = 0; i < args.length; i++) {
    const value = args[i]!.value;
    if (value === undefined) continue;
    const name = baseName(value);
    const wf = writeFacts(name, args.slice(i + 1));
    if (!wf) continue;
    const inner = emptyFacts(
      `${name} ${args
        .slice(i + 1)
        .map((a) => a.raw)
        .join(' ')}`,
      facts.cwds,
    );
    inner.name = name;
    inner.programs = [name];
    inner.args = args.slice(i + 1);
    addWriteFacts(inner, wf);
    const found = handedOverDeny(ctx, inner);
    if (found) {
      parts.push({
        ...found,
        command: shown,
        reason: `${program} may run ${inner.shown}: ${found.reason}`,
      });
      return;
    }
  }
  if (walk.depth >= ctx.options.maxNesting) return;
  for (const a of args) {
    const text = a.value;
    if (text === undefined || text.length > 4096 || !/[\s;&|<>]/.test(text.trim())) continue;
    const inner: Walk = {
      ...walk,
      parts: [],
      line: { downloads: [], interpreters: [] },
      depth: walk.depth + 1,
    };
    line(ctx, text, { cwds: facts.cwds ? [...facts.cwds] : undefined, vars: new Map(state.vars) }, inner);
    const denied = inner.parts.find((p) => p.verdict === 'deny');
    if (denied) {
      parts.push({
        ...denied,
        command: shown,
        reason: `${program} is handed the command line ${clip(text, 60)}, and ${denied.command}: ${denied.reason}`,
      });
      return;
    }
  }
}

/** A command string run by a shell (`bash -c`, `env -S`, `watch`, `eval`): parsed and judged like a line. */
function nested(
  ctx: AnalysisContext,
  script: Arg,
  via: string,
  shown: string,
  cwds: string[] | undefined,
  state: State,
  walk: Walk,
  parts: Part[],
): void {
  if (script.value === undefined) {
    parts.push({
      command: shown,
      verdict: 'ask',
      reason: `${via} runs a command string that is only known at run time (${clip(script.raw)})`,
      rule: 'failClosed:dynamicScript',
    });
    parts.push(...dynamicScriptRules(ctx, script, via, shown));
    return;
  }
  if (walk.depth >= ctx.options.maxNesting) {
    parts.push({
      command: shown,
      verdict: 'ask',
      reason: `${via} strings are nested deeper than ${ctx.options.maxNesting} levels`,
      rule: 'failClosed:nesting',
    });
    return;
  }
  const inner: Walk = {
    ...walk,
    parts: [],
    depth: walk.depth + 1,
    dialect:
      via === 'eval' || via === 'source' ? walk.dialect : SHELLS.has(via) && via !== 'bash' ? 'sh' : 'bash',
  };
  line(ctx, script.value, { cwds, vars: new Map(state.vars) }, inner);
  for (const p of inner.parts)
    parts.push({
      ...p,
      command: p.command === clip(script.value, 200) ? `${via} -c ${p.command}` : p.command,
    });
}

/** One innermost command, as the resolver left it, with what judging it needs. */
interface Judged {
  name: string;
  base: string;
  args: Arg[];
  levels: Arg[][];
  facts: CommandFacts;
  envRisk: string | undefined;
  dynamicArgs: boolean;
  cwds: string[] | undefined;
  state: State;
  walk: Walk;
  parts: Part[];
  add: Add;
  shown: string;
  stdinText?: string;
}

/**
 * Decides on the innermost command: a program by path asks; shells, eval, source and interpreters
 * note where their code comes from (and walk it when it is literal); builtins, read-only commands
 * and version queries are allowed when nothing else writes; everything else asks. Host rules are
 * consulted at each of these points.
 */
function judge(ctx: AnalysisContext, j: Judged): Ends {
  const { name, base, args, levels, facts, add, shown, walk, state } = j;
  const suggestion = suggestRule(levels[0]!);
  const same: Ends = { ok: state, fail: state };
  const byPath = name.includes('/');
  if (byPath && !SYSTEM_DIRS.has(posix.dirname(name))) {
    if (!hostRules(ctx, levels, add, true, true, j.cwds))
      add(
        'ask',
        `${name} runs a program by path, which may not be the system's ${base}`,
        'unknown',
        suggestion,
      );
    return same;
  }
  if (DOWNLOADERS.has(base) || (base === 'busybox' && args[0]?.value && DOWNLOADERS.has(args[0].value)))
    walk.line.downloads.push(shown);

  // Interpreters, shells, eval, source: where their code comes from decides the download rules.
  if (SHELLS.has(base) || (base === 'busybox' && args[0]?.value && SHELLS.has(args[0].value))) {
    const shArgs = base === 'busybox' ? args.slice(1) : args;
    const how = shellInvocation(shArgs, j.dynamicArgs);
    walk.line.interpreters.push({ shown, name: base, code: how.code, sourcing: false });
    if (j.envRisk) add('ask', j.envRisk, 'failClosed:environment');
    if (how.kind === 'string') nested(ctx, how.script, base, shown, j.cwds, state, walk, j.parts);
    else if (how.kind === 'file')
      add(
        'ask',
        `${base} runs the script ${how.file.raw}, which the gate cannot read`,
        'unknown',
        suggestion,
      );
    else if (how.kind === 'stdin' && j.stdinText !== undefined)
      nested(ctx, literalArg(j.stdinText), base, shown, j.cwds, state, walk, j.parts);
    else if (how.kind === 'stdin')
      add('ask', `${base} runs commands read from its input`, 'unknown', suggestion);
    else add('ask', `cannot see what ${base} runs: ${how.reason}`, 'failClosed:wrapper');
    hostRules(ctx, levels, add, false);
    return same;
  }
  if (base === 'eval') {
    const known = args.every((a) => a.value !== undefined);
    walk.line.interpreters.push({
      shown,
      name: 'eval',
      code: known ? 'literal' : 'dynamic',
      sourcing: true,
    });
    if (known && args.length > 0)
      nested(
        ctx,
        literalArg(args.map((a) => a.value).join(' ')),
        'eval',
        shown,
        j.cwds,
        state,
        walk,
        j.parts,
      );
    add('ask', 'eval builds a command at run time', 'failClosed:eval');
    hostRules(ctx, levels, add, false);
    return same;
  }
  if (base === 'source' || base === '.') {
    const file = args[0];
    walk.line.interpreters.push({
      shown,
      name: base,
      code: file ? fileSource(file) : 'stdin',
      sourcing: true,
    });
    add(
      'ask',
      `${base} runs the script ${file?.raw ?? ''} in this shell, which the gate cannot read`,
      'unknown',
      suggestion,
    );
    hostRules(ctx, levels, add, false);
    return same;
  }
  if ((base === 'at' || base === 'batch') && j.stdinText !== undefined) {
    nested(ctx, literalArg(j.stdinText), base, shown, j.cwds, state, walk, j.parts);
  }
  if (isInterpreter(base)) {
    walk.line.interpreters.push({
      shown,
      name: base,
      code: interpreterSource(base, args, j.dynamicArgs),
      sourcing: false,
    });
  }

  // Shell builtins that assign, print or change the shell.
  const builtin = judgeBuiltin(base, args, facts);
  // Code kept for later (a trap's action, an alias) is judged now: deny rules apply to it.
  if (builtin?.code?.value !== undefined)
    nested(ctx, builtin.code, base, shown, j.cwds, state, walk, j.parts);
  if (builtin) {
    if (builtin.verdict === 'allow' && !j.envRisk && facts.writes.length === 0)
      add('allow', builtin.reason, `readOnly:${base}`);
    else if (builtin.verdict === 'allow')
      add(
        'ask',
        j.envRisk ?? `${base} writes ${facts.writes[0]!.target.raw} through a redirection`,
        j.envRisk ? 'failClosed:environment' : 'unknown',
        suggestion,
      );
    else if (!hostRules(ctx, levels, add, true, facts.writes.length > 0 || j.envRisk !== undefined, j.cwds))
      add(builtin.verdict, builtin.reason, builtin.rule ?? 'unknown', suggestion);
    return same;
  }

  // Known read-only commands, judged by the grammar of the options they accept.
  const ro = readOnlySpec(base);
  if (ro) {
    const verdict = readOnly(ctx, ro, base, args, j, (argv, via, roots) =>
      innerCommand(ctx, argv, via, roots, j),
    );
    if (verdict.ok) {
      const hostDecided = hostRules(ctx, levels, add, false);
      if (!hostDecided) {
        if (j.envRisk) add('ask', j.envRisk, 'failClosed:environment', suggestion);
        else if (facts.writes.length > 0)
          add(
            'ask',
            `${base} only reads, but the command writes ${facts.writes[0]!.target.raw} (${facts.writes[0]!.via})`,
            'unknown',
            suggestion,
          );
        else add('allow', `${base} only reads`, `readOnly:${base}`);
      }
      return verdict.ends ?? same;
    }
    if (
      !hostRules(
        ctx,
        levels,
        add,
        true,
        (facts.writes.length > 0 && writesOutside(ctx, facts)) || j.envRisk !== undefined,
        j.cwds,
      )
    )
      add('ask', verdict.reason, 'unknown', suggestion);
    return same;
  }
  if (onlyPrintsVersion(base, args) && !j.envRisk && facts.writes.length === 0) {
    if (!hostRules(ctx, levels, add, false))
      add('allow', `${base} ${args[0]!.value} only prints its version`, `readOnly:${base}`);
    return same;
  }
  if (!hostRules(ctx, levels, add, true, writesOutside(ctx, facts) || j.envRisk !== undefined, j.cwds)) {
    if (j.envRisk) add('ask', j.envRisk, 'failClosed:environment', suggestion);
    else add('ask', `${base} is not a known read-only command`, 'unknown', suggestion);
  }
  return same;
}

/**
 * A command run by find -exec / -execdir: judged like any command (its `{}` is a path supplied
 * at run time). A recursive delete of `{}` removes what find starts from.
 */
function innerCommand(ctx: AnalysisContext, argv: Arg[], via: string, roots: Arg[], j: Judged): void {
  if (argv.length === 0) return;
  const shown = `${j.shown} → ${clip(argv.map((a) => a.raw).join(' '), 120)}`;
  const facts = emptyFacts(shown, undefined);
  const parts: Part[] = [];
  const cwds = /dir$/.test(via) ? undefined : j.cwds;
  command(ctx, {
    args: argv,
    facts,
    envRisk: undefined,
    state: j.state,
    walk: j.walk,
    parts,
    shown,
    cwds,
    dynamicArgs: false,
  });
  j.parts.push(...parts);
  if (facts.trees.some((t) => t.target.opaque)) {
    for (const r of roots)
      j.facts.trees.push({ target: r, via: `${via} ${facts.name ?? ''} -r`.replace(/\s+/g, ' ') });
  }
}

/**
 * Variables whose value the shell later runs as code: PROMPT_COMMAND, and prompt strings whose
 * command substitutions run at every prompt. Their (known) values are judged as commands now.
 */
function storedCode(
  ctx: AnalysisContext,
  name: string,
  value: Arg,
  shown: string,
  state: State,
  walk: Walk,
  parts: Part[],
): void {
  if (value.value === undefined) return;
  if (name === 'PROMPT_COMMAND') nested(ctx, value, name, shown, state.cwds, state, walk, parts);
  else if (/^PS[0-4]$/.test(name))
    nested(ctx, literalArg(`: ${value.value}`), name, shown, state.cwds, state, walk, parts);
}

/** A word's value when it is one plain unquoted text (a command name as written). */
function literalName(w: Syntax.Word): string | undefined {
  return w.parts.length === 1 && w.parts[0]!.kind === 'text' ? w.parts[0]!.value : undefined;
}

/**
 * A declaration's `x=(…)` argument without its array (the elements are judged on their own by
 * `arrayElements`): the builtin sees `x=`, the name it assigns.
 */
function withoutArray(w: Syntax.Word): Syntax.Word {
  const last = w.parts[w.parts.length - 1];
  if (last?.kind !== 'unknown' || last.nodeType !== 'array') return w;
  return { ...w, parts: w.parts.slice(0, -1) };
}

/**
 * The elements of a compound array assignment (`a=(x [2]=y)`): each is a word (its substitutions
 * judged as commands); a subscript of an indexed array (`[i]=v`) is evaluated as arithmetic, which
 * runs command substitutions hidden in a variable's value (`z='b[$(cmd)]'; a=([z]=1)`), so only a
 * literal number is known to be harmless. An associative array's subscript is a word like any other.
 */
function arrayElements(
  ctx: AnalysisContext,
  elements: readonly Syntax.Word[],
  assoc: boolean,
  shown: string,
  state: State,
  walk: Walk,
  parts: Part[],
): void {
  const shell = toShell(state, ctx.options.paths.home);
  for (const el of elements) {
    wordRisks(ctx, evaluate(el, shell), shown, state, walk);
    if (assoc) continue;
    const subscript = elementSubscript(el);
    if (subscript !== undefined && !/^\s*\d+\s*$/.test(subscript))
      parts.push({
        command: shown,
        verdict: 'ask',
        reason: `the array subscript [${subscript}] is evaluated as arithmetic, which can run commands`,
        rule: 'failClosed:arithmetic',
      });
  }
}

/**
 * The subscript of an element written `[sub]=value`, as source text (anything but plain text
 * counts as unknown: `[$i]`), or undefined for a plain element.
 */
function elementSubscript(el: Syntax.Word): string | undefined {
  const first = el.parts[0];
  if (first?.kind !== 'text' || first.quoting !== 'none' || !first.value.startsWith('[')) return undefined;
  let text = '';
  for (const p of el.parts) {
    if (p.kind !== 'text' || p.quoting !== 'none') {
      text += '\u0000';
      continue;
    }
    text += p.value;
    const end = text.indexOf(']=');
    if (end >= 0) return text.slice(1, end).replaceAll('\u0000', '…');
    if (text.indexOf(']+=') >= 0) return text.slice(1, text.indexOf(']+=')).replaceAll('\u0000', '…');
  }
  return undefined;
}

/** Names a `{name}>file` redirection assigns: a `{name}` word ending where a redirect starts. */
function fdVariables(cmd: Syntax.SimpleCommand): string[] {
  const names: string[] = [];
  for (const r of cmd.redirects) {
    if (r.fdVariable) names.push(r.fdVariable);
    const w = cmd.words.find((word) => word.end === r.start);
    if (!w || !w.parts.every((p) => p.kind === 'text' && p.quoting === 'none')) continue;
    const m = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(w.text);
    if (m) names.push(m[1]!);
  }
  return names;
}
