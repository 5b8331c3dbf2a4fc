import type { ParsedCommand, ShellParser, Syntax } from '@conch/shell-syntax';
import { posix } from 'node:path';
import { READ_ONLY, VERSION_ONLY, type ReadOnlyEffects } from './commands/read-only.js';
import { unwrap } from './commands/wrappers.js';
import { judgeBuiltin } from './builtins.js';
import { dialectRisk } from './dialect.js';
import {
  fileSource,
  interpreterSource,
  literalOutput,
  shellInvocation,
  splitFields,
} from './interpreters.js';
import { suggestRule } from './suggest-rule.js';
export { suggestRule } from './suggest-rule.js';
import { resolveCommand, resolveCwds } from './resolve.js';
import { writeFacts, type WriteFacts } from './commands/writers.js';
import type { SafetyRuleId } from './config.js';
import { hasHidden } from './display.js';
import type { CommandFacts, LineFacts, Part, RuleContext, Verdict, WriteTarget } from './facts.js';
import { gitConfigRisk } from './git-config.js';
import { parseArgs } from './grammar.js';
import { matchHostRules, type HostRules, type CompiledRule } from './host-rules.js';
import { classifyName } from './names.js';
import { HARMLESS_TARGET, shellGlob, type PathContext } from './paths.js';
import { baseName, DOWNLOADERS, isInterpreter, SHELLS, SYSTEM_DIRS } from './program.js';
import { downloadToInterpreter } from './rules/download-to-interpreter.js';
import { forkBomb } from './rules/fork-bomb.js';
import { privilegeEscalation, PRIVILEGE, PRIVILEGE_WORD } from './rules/privilege-escalation.js';
import { protectedPaths, targetCheck } from './rules/protected-paths.js';
import { recursiveDeleteRoot } from './rules/recursive-delete-root.js';
import { sourceDownloaded } from './rules/source-downloaded.js';
import { selfKill, type OwnProcess } from './rules/self-kill.js';
import { terminalProtocol } from './rules/terminal-protocol.js';
import { clip, evaluate, literalArg, runtimeArg, type Arg, type ShellState } from './words.js';

export type { Part, Verdict } from './facts.js';

const RANK: Record<Verdict, number> = { allow: 0, ask: 1, deny: 2 };

import type { Dialect } from './dialect.js';
export type { Dialect } from './dialect.js';

export interface Analysis {
  verdict: Verdict;
  /** The strictest part. */
  decisive: Part;
  parts: Part[];
  /** Allowed only because every part only reads: a runner may enforce that with a read-only sandbox. */
  readOnly: boolean;
}

export interface AnalyzerOptions {
  parser: ShellParser;
  safety: Record<SafetyRuleId, boolean>;
  rules: HostRules;
  /** `always` answers of this session, in the host-rule syntax. */
  sessionAllow: () => readonly CompiledRule[];
  /** Whether host allow rules count (false in readOnly mode). */
  useAllowRules: boolean;
  paths: PathContext;
  maxBytes: number;
  timeoutMs: number;
  maxNesting: number;
  /** conch's own processes (the host, its supervisors), read when a command is judged. */
  ownProcesses?: () => readonly OwnProcess[];
}

interface State {
  cwds: string[] | undefined;
  vars: Map<string, string | null>;
}

interface Ends {
  ok: State;
  fail: State;
}

interface Walk {
  parts: Part[];
  line: LineFacts;
  depth: number;
  dialect: Dialect;
}

/** How a command's standard input is fed (for interpreters that read code from it). */
interface Io {
  stdinPiped: boolean;
  /** The previous pipeline stage's output when it is literal (`echo 'x' |`). */
  stdinText?: string;
}

const NO_IO: Io = { stdinPiped: false };

/**
 * Decides on a command line by reading it the way the shell will, by allow-lists at every level:
 * every node of the syntax tree is known or the line asks; every simple command is unwrapped once
 * by the resolver (wrappers, `bash -c`, `eval`, `find -exec`, `xargs`), its arguments parsed by the
 * grammar of the options it accepts, and allowed only when it only reads. The safety rules (one
 * file each in `rules/`) deny what must never run; host rules (`host-rules.ts`) deny, ask or allow
 * by prefix or regex. Deny beats ask beats allow.
 */
export class Analyzer {
  private readonly ruleCtx: RuleContext;

  constructor(private readonly o: AnalyzerOptions) {
    this.ruleCtx = { paths: o.paths };
  }

  analyze(line: string, cwd: string, options: { dialect?: Dialect; parsed?: ParsedCommand } = {}): Analysis {
    const walk: Walk = {
      parts: [],
      line: { downloads: [], interpreters: [] },
      depth: 0,
      dialect: options.dialect ?? 'bash',
    };
    try {
      this.line(line, { cwds: [cwd], vars: new Map() }, walk, options.parsed);
      if (this.o.safety.downloadToInterpreter) walk.parts.push(...downloadToInterpreter(walk.line));
      if (this.o.safety.sourceDownloaded) walk.parts.push(...sourceDownloaded(walk.line));
    } catch (error) {
      // A defect in the analysis must not let a command through, in any mode: without a finished
      // analysis no deny rule can be ruled out, so the command is denied (acceptAll turns asks
      // into allows) and the reason says why.
      const part: Part = {
        command: line,
        verdict: 'deny',
        reason: `could not be analyzed (${error instanceof Error ? error.message : String(error)}); please report this as a conch bug`,
        rule: 'failClosed:internal',
      };
      return summarize([part]);
    }
    return summarize(walk.parts);
  }

  /** Whether a compiled host rule matches `line` the way the gate uses it (for rule examples). */
  ruleMatches(rule: CompiledRule, line: string): boolean {
    const parsed = this.o.parser.parse(line, { maxBytes: this.o.maxBytes, timeoutMs: this.o.timeoutMs });
    if (!parsed.ok || !parsed.syntax) return false;
    const texts: string[][] = [];
    const state: State = { cwds: undefined, vars: new Map() };
    const collect = (seq: Syntax.Sequence) => {
      for (const item of seq.items)
        visitSimple(item.statement, (cmd) => {
          if (cmd.words.length === 0) return;
          const args = cmd.words.map((w) => evaluate(w, toShell(state, this.o.paths.home)));
          texts.push(this.levelsOf(args).map(levelText));
        });
    };
    collect(parsed.syntax.body);
    if (texts.length === 0) return false;
    if (rule.list === 'allow') return texts.every((levels) => levels.some((t) => rule.test(t)));
    return texts.some((levels) => levels.some((t) => rule.test(t)));
  }

  // -----------------------------------------------------------------------------------------------
  // a line

  private line(source: string, state: State, walk: Walk, given?: ParsedCommand): Ends {
    const shown = clip(source, 200);
    const add = (verdict: Verdict, reason: string, rule: string) =>
      walk.parts.push({ command: shown, verdict, reason, rule });
    const parsed =
      given ?? this.o.parser.parse(source, { maxBytes: this.o.maxBytes, timeoutMs: this.o.timeoutMs });
    if (!parsed.ok || !parsed.syntax) {
      if (this.o.safety.privilegeEscalation && PRIVILEGE_WORD.test(source.slice(0, 1 << 20)))
        add(
          'deny',
          'it names a privilege-escalation program (sudo, su, doas, pkexec) and cannot be parsed to prove it is not run',
          'safety:privilegeEscalation',
        );
      if (this.o.safety.forkBomb) walk.parts.push(...forkBomb(undefined, source));
      add('ask', `the command cannot be checked: ${parsed.error ?? 'parse error'}`, 'failClosed:parse');
      return { ok: state, fail: state };
    }
    const tree = parsed.syntax;
    if (hasHidden(parsed.source))
      add('ask', 'the command contains invisible or lookalike characters', 'failClosed:hiddenCharacters');
    if (parsed.normalizedSource !== undefined && continuationInsideWord(parsed.source))
      add(
        'ask',
        'a backslash-newline splits a word, which hides what really runs',
        'failClosed:lineContinuation',
      );
    if (tree.unknowns.length > 0) {
      const u = tree.unknowns[0]!;
      add(
        'ask',
        `the gate does not know the construct ${JSON.stringify(u.text)} (${u.nodeType})`,
        'failClosed:syntax',
      );
    }
    const dialect = dialectRisk(tree, walk.dialect);
    if (dialect) add('ask', dialect, 'failClosed:dialect');
    if (this.o.safety.forkBomb) walk.parts.push(...forkBomb(tree, parsed.normalizedSource ?? source));
    return this.sequence(tree.body, state, walk);
  }

  private sequence(seq: Syntax.Sequence, state: State, walk: Walk): Ends {
    let current = state;
    let ends: Ends = { ok: state, fail: state };
    for (const item of seq.items) {
      if (item.background) {
        this.statement(item.statement, clone(current), walk, NO_IO);
        ends = { ok: current, fail: current };
        continue;
      }
      ends = this.statement(item.statement, current, walk, NO_IO);
      current = union(ends.ok, ends.fail);
    }
    return ends;
  }

  private statement(st: Syntax.Statement, state: State, walk: Walk, io: Io): Ends {
    if (st.kind !== 'simple' && st.redirects.length > 0) this.compoundRedirects(st, state, walk);
    const same: Ends = { ok: state, fail: state };
    const ask = (reason: string, rule: string) =>
      walk.parts.push({ command: clip(st.text, 200), verdict: 'ask', reason, rule });
    switch (st.kind) {
      case 'simple':
        return this.simple(st, state, walk, io);
      case 'pipeline':
        st.stages.forEach((stage, i) => {
          const text =
            i > 0 ? literalOutput(st.stages[i - 1]!, toShell(state, this.o.paths.home)) : io.stdinText;
          this.statement(stage, clone(state), walk, {
            stdinPiped: i > 0 || io.stdinPiped,
            ...(text !== undefined ? { stdinText: text } : {}),
          });
        });
        return same;
      case 'and-or': {
        const left = this.statement(st.left, state, walk, io);
        if (st.operator === '&&') {
          const right = this.statement(st.right, left.ok, walk, io);
          return { ok: right.ok, fail: union(left.fail, right.fail) };
        }
        const right = this.statement(st.right, left.fail, walk, io);
        return { ok: union(left.ok, right.ok), fail: right.fail };
      }
      case 'subshell':
        this.sequence(st.body, clone(state), walk);
        return same;
      case 'group':
        return this.sequence(st.body, state, walk);
      case 'negated': {
        const e = this.statement(st.body, state, walk, io);
        return { ok: e.fail, fail: e.ok };
      }
      case 'if': {
        const all: State[] = [];
        let current = state;
        for (const clause of st.clauses) {
          const cond = this.sequence(clause.condition, current, walk);
          const body = this.sequence(clause.body, cond.ok, walk);
          all.push(body.ok, body.fail);
          current = cond.fail;
        }
        if (st.otherwise) {
          const e = this.sequence(st.otherwise, current, walk);
          all.push(e.ok, e.fail);
        } else all.push(current);
        const end = all.reduce(union);
        return { ok: end, fail: end };
      }
      case 'for': {
        this.assignedName(
          st.variable,
          `a ${st.select ? 'select' : 'for'} loop variable`,
          clip(st.text, 200),
          walk,
        );
        for (const w of st.values ?? [])
          this.wordRisks(evaluate(w, toShell(state, this.o.paths.home)), clip(st.text, 200), state, walk);
        const inner = clone(state);
        inner.vars.set(st.variable, null);
        const body = this.sequence(st.body, inner, walk);
        const end = [state, body.ok, body.fail].reduce(union);
        return { ok: end, fail: end };
      }
      case 'while': {
        const cond = this.sequence(st.condition, state, walk);
        const body = this.sequence(st.body, cond.ok, walk);
        const end = [state, cond.fail, body.ok, body.fail].reduce(union);
        return { ok: end, fail: end };
      }
      case 'case': {
        const shown = clip(st.text, 200);
        this.wordRisks(evaluate(st.value, toShell(state, this.o.paths.home)), shown, state, walk);
        const all: State[] = [state];
        for (const item of st.items) {
          for (const p of item.patterns)
            this.wordRisks(evaluate(p, toShell(state, this.o.paths.home)), shown, state, walk);
          const e = this.sequence(item.body, state, walk);
          all.push(e.ok, e.fail);
        }
        const end = all.reduce(union);
        return { ok: end, fail: end };
      }
      case 'function': {
        const shown = clip(st.text, 200);
        if (st.name.startsWith('__conch_'))
          walk.parts.push({
            command: shown,
            verdict: 'deny',
            reason: `it redefines ${st.name}, a function of conch's terminal protocol`,
            rule: 'protocol:terminal',
          });
        ask(
          `it defines a shell function (${st.name}), which can shadow any command`,
          'failClosed:functionDefinition',
        );
        this.statement(st.body, clone(state), walk, NO_IO);
        return same;
      }
      case 'test':
        this.test(st, state, walk);
        return same;
      case 'arithmetic':
        ask(
          'arithmetic evaluation (( … )) can run commands through array subscripts',
          'failClosed:arithmetic',
        );
        if (st.body) this.sequence(st.body, clone(state), walk);
        return same;
      case 'unknown':
        ask(
          `the gate does not know the construct ${JSON.stringify(clip(st.text, 60))} (${st.nodeType})`,
          'failClosed:syntax',
        );
        return same;
    }
  }

  /** `[[ … ]]` and `[ … ]`: operands evaluated; arithmetic comparisons and `-v` only with plain operands. */
  private test(st: Syntax.Test, state: State, walk: Walk): void {
    const shown = clip(st.text, 200);
    const shell = toShell(state, this.o.paths.home);
    let risky: string | undefined;
    const visit = (e: Syntax.TestExpression | undefined) => {
      if (!e) return;
      switch (e.kind) {
        case 'word':
          this.wordRisks(evaluate(e.word, shell), shown, state, walk);
          return;
        case 'regex':
          return;
        case 'unknown':
          risky ??= `the gate does not know ${JSON.stringify(clip(e.text, 40))} in a test`;
          return;
        case 'unary':
          if ((e.operator === '-v' || e.operator === '-R') && !plainName(e.operand))
            risky ??= `${e.operator} evaluates an array subscript as arithmetic, which can run commands; only a plain variable name is known to be harmless`;
          visit(e.operand);
          return;
        case 'binary':
          if (
            st.bracket === '[[' &&
            /^-(eq|ne|lt|le|gt|ge)$/.test(e.operator) &&
            (!integer(e.left) || !integer(e.right))
          )
            risky ??= `[[ … ${e.operator} … ]] evaluates its operands as arithmetic, which can run commands through array subscripts; only integer literals are known to be harmless`;
          visit(e.left);
          visit(e.right);
          return;
      }
    };
    visit(st.expression);
    walk.parts.push(
      risky
        ? { command: shown, verdict: 'ask', reason: risky, rule: 'failClosed:arithmetic' }
        : { command: shown, verdict: 'allow', reason: 'a test only reads', rule: 'readOnly:test' },
    );
  }

  /** Redirects of a compound statement (`{ …; } > f`, `for … done > f`): a write wherever it attaches. */
  private compoundRedirects(st: Syntax.Statement, state: State, walk: Walk): void {
    const shown = clip(st.text, 200);
    const facts = emptyFacts(shown, state.cwds);
    for (const r of st.redirects) this.redirect(r, state, walk, facts, shown);
    if (facts.writes.length > 0) {
      walk.parts.push({
        command: shown,
        verdict: 'ask',
        reason: `it writes ${facts.writes.map((w) => w.target.raw).join(', ')} through a redirection`,
        rule: 'unknown',
      });
      if (this.o.safety.protectedPaths) walk.parts.push(...protectedPaths(facts, this.ruleCtx));
    }
  }

  /** One redirect: its write target (if it writes), its risks and substitutions. */
  private redirect(r: Syntax.Redirect, state: State, walk: Walk, facts: CommandFacts, shown: string): void {
    const shell = toShell(state, this.o.paths.home);
    if (r.heredoc) {
      const h = r.heredoc;
      if (!h.quoted) {
        // tree-sitter does not parse backticks in bodies, so no body substitution is judged: they ask.
        if (h.backtick || h.parts.some((p) => p.kind === 'command-sub' || p.kind === 'process-sub'))
          walk.parts.push({
            command: shown,
            verdict: 'ask',
            reason: 'the here-document body runs a command substitution ($(…) or `…`)',
            rule: 'failClosed:commandSubstitution',
          });
        const fake: Syntax.Word = { text: h.body, parts: h.parts, start: 0, end: 0 };
        this.wordRisks(evaluate(fake, shell), shown, state, walk);
      }
      return;
    }
    if (!r.target) return;
    const target = evaluate(r.target, shell);
    this.wordRisks(target, shown, state, walk);
    if (target.value !== undefined && /^\/dev\/(tcp|udp)\//.test(target.value))
      walk.line.downloads.push(shown);
    const op = r.operator;
    if (op === '<<<' || op === '<' || op === '<&' || op === '>&-' || op === '<&-') return;
    if (
      op === '>&' ||
      op === '&>' ||
      op === '&>>' ||
      op === '>' ||
      op === '>>' ||
      op === '>|' ||
      op === '<>'
    ) {
      // `>&2`, `2>&1`, `>&-`: descriptors, not files.
      if (op === '>&' && target.value !== undefined && /^(\d+|-)$/.test(target.value)) return;
      if (target.value !== undefined && HARMLESS_TARGET.test(target.value)) return;
      facts.writes.push({ target, via: `the redirection ${op}`, followFinal: true });
    }
  }

  /** Risks of an evaluated word become asks; its substitutions are analyzed as commands. */
  private wordRisks(arg: Arg, shown: string, state: State, walk: Walk): void {
    for (const risk of arg.risks)
      walk.parts.push({ command: shown, verdict: 'ask', reason: risk.reason, rule: risk.rule });
    for (const sub of arg.subs) this.sequence(sub.body, clone(state), walk);
    for (const name of arg.assigns) this.assignedName(name, '${name:=value}', shown, walk);
  }

  /**
   * Variables whose value the shell later runs as code: PROMPT_COMMAND, and prompt strings whose
   * command substitutions run at every prompt. Their (known) values are judged as commands now.
   */
  private storedCode(name: string, value: Arg, shown: string, state: State, walk: Walk, parts: Part[]): void {
    if (value.value === undefined) return;
    if (name === 'PROMPT_COMMAND') this.nested(value, name, shown, state.cwds, state, walk, parts);
    else if (/^PS[0-4]$/.test(name))
      this.nested(literalArg(`: ${value.value}`), name, shown, state.cwds, state, walk, parts);
  }

  /** A name assigned somehow: the protocol names are denied, special ones ask. */
  private assignedName(name: string, how: string, shown: string, walk: Walk): void {
    const c = classifyName(name);
    if (c.kind === 'protocol')
      walk.parts.push({
        command: shown,
        verdict: 'deny',
        reason: `it changes ${name} (${how}), a variable of conch's terminal protocol`,
        rule: 'protocol:terminal',
      });
    else if (c.kind !== 'inert')
      walk.parts.push({
        command: shown,
        verdict: 'ask',
        reason: `it assigns ${name} through ${how}: ${c.reason}`,
        rule: 'failClosed:environment',
      });
  }

  // -----------------------------------------------------------------------------------------------
  // a simple command

  private simple(cmd: Syntax.SimpleCommand, state: State, walk: Walk, io: Io): Ends {
    const shown = clip(cmd.text, 200);
    const shell = toShell(state, this.o.paths.home);
    const parts: Part[] = [];
    const add = (verdict: Verdict, reason: string, rule: string, suggestedRule?: string) =>
      parts.push({ command: shown, verdict, reason, rule, ...(suggestedRule ? { suggestedRule } : {}) });
    const facts = emptyFacts(shown, state.cwds);
    let envRisk: string | undefined;

    // Assignments: prefix (`A=1 cmd`, for the command only) or bare (`A=1`, for the shell).
    const after = clone(state);
    for (const a of cmd.assignments) {
      facts.names.push({ name: a.name, how: 'an assignment' });
      const c = classifyName(a.name);
      if (c.kind === 'special' || c.kind === 'invalid') envRisk ??= `it sets ${a.name}: ${c.reason}`;
      if (a.subscript !== undefined && !/^\[\d+\]$/.test(a.subscript))
        add(
          'ask',
          `the array subscript ${a.subscript} of ${a.name} is evaluated as arithmetic, which can run commands`,
          'failClosed:arithmetic',
        );
      let value: string | null = null;
      if (a.value) {
        const v = evaluate(a.value, shell, { assignment: true });
        this.storedCode(a.name, v, shown, state, walk, parts);
        this.wordRisks(v, shown, state, walk);
        value = v.fields && v.fields.length <= 1 ? (v.fields[0] ?? '') : null;
        if (!v.fields && !v.opaque && v.glob) value = v.pattern.replace(/\\(.)/g, '$1');
      } else if (!a.array) value = '';
      for (const el of a.array ?? []) this.wordRisks(evaluate(el, shell), shown, state, walk);
      if (cmd.words.length === 0) after.vars.set(a.name, a.append || a.array || a.subscript ? null : value);
    }

    const evaluated = cmd.words.map((w) => evaluate(w, shell));
    for (const a of evaluated) this.wordRisks(a, shown, state, walk);
    const args = splitFields(evaluated);
    for (const r of cmd.redirects) this.redirect(r, state, walk, facts, shown);
    // `{name}>file`: bash opens the file on a new descriptor and assigns its number to name, in the
    // shell itself for a builtin (`true {PS1}>/dev/null` sets PS1). tree-sitter reads `{name}` as a
    // word, so a `{name}` word right before a redirect is judged as an assignment.
    for (const name of fdVariables(cmd)) {
      facts.names.push({ name, how: `a {${name}} redirection` });
      this.assignedName(name, `a {${name}} redirection`, shown, walk);
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
      this.commandRules(facts, false, parts);
      if (envRisk) add('ask', envRisk, 'failClosed:environment');
      else if (facts.writes.length > 0)
        add('ask', `it writes ${facts.writes[0]!.target.raw} through a redirection`, 'unknown');
      else add('allow', 'it only sets shell variables', 'readOnly:assignment');
      walk.parts.push(...parts);
      return { ok: after, fail: after };
    }
    if (args.length === 0) {
      walk.parts.push({
        command: shown,
        verdict: 'ask',
        reason: 'the command expands to nothing known',
        rule: 'failClosed:dynamicName',
      });
      return { ok: state, fail: state };
    }
    const ends = this.command({
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
  private command(c: {
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
  }): Ends {
    const { facts, state, walk, parts, shown } = c;
    let envRisk = c.envRisk;
    const add = (verdict: Verdict, reason: string, rule: string, suggestedRule?: string) =>
      parts.push({ command: shown, verdict, reason, rule, ...(suggestedRule ? { suggestedRule } : {}) });
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
        if (this.o.safety.privilegeEscalation && nameArg.glob && !nameArg.opaque) {
          const pattern = nameArg.pattern.slice(nameArg.pattern.lastIndexOf('/') + 1);
          const re = shellGlob(pattern, true);
          const hit = [...PRIVILEGE].find((p) => re.test(p));
          if (hit && pattern !== '*')
            add(
              'deny',
              `the command name ${nameArg.raw} is a pattern that can match ${hit}`,
              'safety:privilegeEscalation',
            );
        }
        add('ask', `the command name ${nameArg.raw} is only known at run time`, 'failClosed:dynamicName');
        break;
      }
      case 'privilege':
        facts.name = end.base;
        facts.args = end.args;
        if (!this.o.safety.privilegeEscalation)
          add(
            'ask',
            `${end.base} runs commands with elevated privileges`,
            'unknown',
            suggestRule(levels[0]!),
          );
        break;
      case 'string':
        facts.name = end.via;
        facts.args = end.args;
        if (envRisk) add('ask', envRisk, 'failClosed:environment');
        this.nested(end.script, end.via, shown, r.cwds, state, walk, parts);
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
          if (!this.hostRules(levels, add, false))
            add('allow', `${end.via} alone only reads`, `readOnly:${end.via}`);
        } else if (!this.hostRules(levels, add, true, envRisk !== undefined)) {
          add('ask', end.reason ?? envRisk ?? `${end.via} writes a file`, 'unknown', suggestRule(levels[0]!));
        }
        break;
      case 'command': {
        facts.name = end.base;
        facts.args = end.args;
        const wf = writeFacts(end.base, end.args);
        if (wf) addWriteFacts(facts, wf);
        else if (!Object.hasOwn(READ_ONLY, end.base) && !isInterpreter(end.base) && !SHELLS.has(end.base)) {
          this.handedOver(end.base, end.args, facts, shown, state, walk, parts);
        }
        ends = this.judge({
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
    this.commandRules(
      facts,
      parts.some((p) => p.rule.startsWith('readOnly:')),
      parts,
    );
    return ends;
  }

  /** The safety rules on one resolved command. */
  private commandRules(facts: CommandFacts, readOnly: boolean, parts: Part[]): void {
    const s = this.o.safety;
    if (s.privilegeEscalation) {
      const p = privilegeEscalation(facts, readOnly);
      if (p) parts.push(p);
    }
    const protocol = terminalProtocol(facts);
    if (protocol) parts.push(protocol);
    if (s.protectedPaths) parts.push(...protectedPaths(facts, this.ruleCtx));
    if (s.recursiveDeleteRoot) parts.push(...recursiveDeleteRoot(facts, this.ruleCtx));
    if (s.selfKill && this.o.ownProcesses && /^(kill|pkill|killall)$/.test(facts.name ?? '')) {
      const p = selfKill(facts, this.o.ownProcesses());
      if (p) parts.push(p);
    }
  }

  /**
   * A program the gate does not know may run what it is handed (strace, chroot, xvfb-run, tmux
   * new, script -c, gdb -ex …): the deny rules also judge each argument list that starts with a
   * program they know (`strace -f rm -rf ~` is `rm -rf ~`) and each literal argument read as a
   * command line (`script -c 'echo x > ~/.bashrc'`). Only their denies count: the program itself
   * already asks.
   */
  private handedOver(
    program: string,
    args: readonly Arg[],
    facts: CommandFacts,
    shown: string,
    state: State,
    walk: Walk,
    parts: Part[],
  ): void {
    const s = this.o.safety;
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
      const found = [
        ...(s.protectedPaths ? protectedPaths(inner, this.ruleCtx) : []),
        ...(s.recursiveDeleteRoot ? recursiveDeleteRoot(inner, this.ruleCtx) : []),
      ].find((p) => p.verdict === 'deny');
      if (found) {
        parts.push({
          ...found,
          command: shown,
          reason: `${program} may run ${inner.shown}: ${found.reason}`,
        });
        return;
      }
    }
    if (walk.depth >= this.o.maxNesting) return;
    for (const a of args) {
      const text = a.value;
      if (text === undefined || text.length > 4096 || !/[\s;&|<>]/.test(text.trim())) continue;
      const inner: Walk = {
        ...walk,
        parts: [],
        line: { downloads: [], interpreters: [] },
        depth: walk.depth + 1,
      };
      this.line(text, { cwds: facts.cwds ? [...facts.cwds] : undefined, vars: new Map(state.vars) }, inner);
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
  private nested(
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
      if (this.o.safety.privilegeEscalation && PRIVILEGE_WORD.test(script.raw))
        parts.push({
          command: shown,
          verdict: 'deny',
          reason: `${via} runs a command string that mentions a privilege-escalation program`,
          rule: 'safety:privilegeEscalation',
        });
      return;
    }
    if (walk.depth >= this.o.maxNesting) {
      parts.push({
        command: shown,
        verdict: 'ask',
        reason: `${via} strings are nested deeper than ${this.o.maxNesting} levels`,
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
    this.line(script.value, { cwds, vars: new Map(state.vars) }, inner);
    for (const p of inner.parts)
      parts.push({
        ...p,
        command: p.command === clip(script.value, 200) ? `${via} -c ${p.command}` : p.command,
      });
  }

  private judge(j: {
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
    add: (verdict: Verdict, reason: string, rule: string, suggestedRule?: string) => void;
    shown: string;
    stdinText?: string;
  }): Ends {
    const { name, base, args, levels, facts, add, shown, walk, state } = j;
    const suggestion = suggestRule(levels[0]!);
    const same: Ends = { ok: state, fail: state };
    const byPath = name.includes('/');
    if (byPath && !SYSTEM_DIRS.has(posix.dirname(name))) {
      if (!this.hostRules(levels, add, true, true))
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
      if (how.kind === 'string') this.nested(how.script, base, shown, j.cwds, state, walk, j.parts);
      else if (how.kind === 'file')
        add(
          'ask',
          `${base} runs the script ${how.file.raw}, which the gate cannot read`,
          'unknown',
          suggestion,
        );
      else if (how.kind === 'stdin' && j.stdinText !== undefined)
        this.nested(literalArg(j.stdinText), base, shown, j.cwds, state, walk, j.parts);
      else if (how.kind === 'stdin')
        add('ask', `${base} runs commands read from its input`, 'unknown', suggestion);
      else add('ask', `cannot see what ${base} runs: ${how.reason}`, 'failClosed:wrapper');
      this.hostRules(levels, add, false);
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
        this.nested(
          literalArg(args.map((a) => a.value).join(' ')),
          'eval',
          shown,
          j.cwds,
          state,
          walk,
          j.parts,
        );
      add('ask', 'eval builds a command at run time', 'failClosed:eval');
      this.hostRules(levels, add, false);
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
      this.hostRules(levels, add, false);
      return same;
    }
    if ((base === 'at' || base === 'batch') && j.stdinText !== undefined) {
      this.nested(literalArg(j.stdinText), base, shown, j.cwds, state, walk, j.parts);
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
      this.nested(builtin.code, base, shown, j.cwds, state, walk, j.parts);
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
      else if (!this.hostRules(levels, add, true, facts.writes.length > 0 || j.envRisk !== undefined))
        add(builtin.verdict, builtin.reason, builtin.rule ?? 'unknown', suggestion);
      return same;
    }

    // Known read-only commands, judged by the grammar of the options they accept.
    const ro = Object.hasOwn(READ_ONLY, base) ? READ_ONLY[base] : undefined;
    if (ro) {
      const verdict = this.readOnly(ro, base, args, j);
      if (verdict.ok) {
        const hostDecided = this.hostRules(levels, add, false);
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
        !this.hostRules(
          levels,
          add,
          true,
          (facts.writes.length > 0 && this.writesOutside(facts)) || j.envRisk !== undefined,
        )
      )
        add('ask', verdict.reason, 'unknown', suggestion);
      return same;
    }
    const version = VERSION_ONLY[base];
    if (
      version &&
      args.length === 1 &&
      args[0]!.value !== undefined &&
      version.includes(args[0]!.value) &&
      !j.envRisk &&
      facts.writes.length === 0
    ) {
      if (!this.hostRules(levels, add, false))
        add('allow', `${base} ${args[0]!.value} only prints its version`, `readOnly:${base}`);
      return same;
    }
    if (!this.hostRules(levels, add, true, this.writesOutside(facts) || j.envRisk !== undefined)) {
      if (j.envRisk) add('ask', j.envRisk, 'failClosed:environment', suggestion);
      else add('ask', `${base} is not a known read-only command`, 'unknown', suggestion);
    }
    return same;
  }

  /** A read-only command's arguments against its grammar, its effects applied. */
  private readOnly(
    spec: (typeof READ_ONLY)[string],
    base: string,
    args: Arg[],
    j: Parameters<Analyzer['judge']>[0],
  ): { ok: true; ends?: Ends } | { ok: false; reason: string } {
    let all = args;
    // xargs / find -exec supply arguments at run time: the command must be safe with any of them.
    if (j.dynamicArgs) all = [...args, runtimeArg('(arguments supplied at run time)')];
    let effects: ReadOnlyEffects | undefined;
    if (spec.custom) {
      const r = spec.custom(all);
      effects = r.effects;
      if (effects?.commands)
        for (const cmd of effects.commands) this.innerCommand(cmd.argv, cmd.via, cmd.roots ?? [], j);
      if (r.reason) return { ok: false, reason: r.reason };
    } else {
      const parsed = parseArgs(spec.grammar, all, base);
      if (!parsed.ok) return { ok: false, reason: parsed.reason };
      if (spec.maxOperands !== undefined && parsed.args.operands.length > spec.maxOperands)
        return {
          ok: false,
          reason: `${base} with ${parsed.args.operands.length} operands writes or changes something (at most ${spec.maxOperands} only read)`,
        };
      const why = spec.check?.(parsed.args, all);
      if (why) return { ok: false, reason: why };
      effects = spec.effects?.(parsed.args, all);
    }
    if (effects?.assigns) {
      for (const a of effects.assigns) {
        const n = a.name.value;
        if (n === undefined)
          return { ok: false, reason: `${a.how} assigns a variable whose name is only known at run time` };
        j.facts.names.push({ name: n, how: a.how });
        const c = classifyName(n);
        if (c.kind !== 'inert')
          return {
            ok: false,
            reason:
              c.kind === 'protocol'
                ? `${a.how} ${n} changes conch's terminal protocol`
                : `${a.how} ${n}: ${c.reason}`,
          };
      }
    }
    if (effects?.git || effects?.gitDir) {
      const dirs = effects.gitDir
        ? effects.gitDir.value === undefined
          ? undefined
          : resolveCwds(j.cwds, effects.gitDir.value)
        : j.cwds;
      if (!dirs)
        return {
          ok: false,
          reason:
            'git runs in a directory only known at run time, whose repository config the gate cannot check',
        };
      for (const dir of dirs) {
        const risk = gitConfigRisk(dir);
        if (risk) return { ok: false, reason: risk };
      }
    }
    if (effects?.cd !== undefined) {
      const cd = effects.cd;
      const next =
        cd === 'home'
          ? [this.o.paths.home]
          : cd === 'unknown' || cd.value === undefined
            ? undefined
            : resolveCwds(j.cwds, cd.value);
      return { ok: true, ends: { ok: { cwds: next, vars: j.state.vars }, fail: j.state } };
    }
    return { ok: true };
  }

  /**
   * A command run by find -exec / -execdir: judged like any command (its `{}` is a path supplied
   * at run time). A recursive delete of `{}` removes what find starts from.
   */
  private innerCommand(argv: Arg[], via: string, roots: Arg[], j: Parameters<Analyzer['judge']>[0]): void {
    if (argv.length === 0) return;
    const shown = `${j.shown} → ${clip(argv.map((a) => a.raw).join(' '), 120)}`;
    const facts = emptyFacts(shown, undefined);
    const parts: Part[] = [];
    const cwds = /dir$/.test(via) ? undefined : j.cwds;
    this.command({
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

  /** Host deny/ask rules on every wrapper level; allow rules on the full and innermost command. */
  private hostRules(
    levels: Arg[][],
    add: (verdict: Verdict, reason: string, rule: string, suggestedRule?: string) => void,
    allowToo: boolean,
    allowBlocked = false,
  ): boolean {
    const hit = matchHostRules(
      this.o.rules,
      levels.map(levelText),
      allowToo && !allowBlocked
        ? [...(this.o.useAllowRules ? this.o.rules.allow : []), ...this.o.sessionAllow()]
        : [],
    );
    if (!hit) return false;
    add(hit.verdict, hit.reason, hit.rule);
    return true;
  }

  /** Whether a command writes (by redirect or option) outside the workspace and /tmp. */
  private writesOutside(facts: CommandFacts): boolean {
    for (const w of facts.writes) {
      const check = targetCheck(w.target, facts.cwds, this.ruleCtx, w.followFinal);
      if (check.kind === 'harmless') continue;
      if (check.kind !== 'ok') return true;
      const ws = this.o.paths.workspaceRoot;
      if (check.paths.some((p) => !(inside(p, ws) || inside(p, '/tmp')))) return true;
    }
    return false;
  }

  private levelsOf(args: Arg[]): Arg[][] {
    const levels: Arg[][] = [args];
    let argv = args;
    for (let i = 0; i < 8 && argv.length > 0; i++) {
      const name = argv[0]!.value;
      if (name === undefined) break;
      const u = unwrap(baseName(name), argv.slice(1));
      if (!u || u.kind !== 'inner') break;
      argv = u.argv;
      levels.push(argv);
    }
    return levels;
  }
}

function levelText(level: Arg[]): string {
  return level.map((a) => a.value ?? a.raw).join(' ');
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

/** What a writer's arguments write, added to the facts of the command the rules judge. */
function addWriteFacts(facts: CommandFacts, wf: WriteFacts): void {
  facts.writes.push(...wf.writes);
  facts.intoDirs.push(...wf.intoDirs);
  facts.trees.push(...wf.trees);
  if (wf.copies) facts.copies.push(...wf.copies);
  if (wf.gitExecKey) facts.gitExecKey = wf.gitExecKey;
}

function emptyFacts(shown: string, cwds: readonly string[] | undefined): CommandFacts {
  return {
    shown,
    programs: [],
    args: [],
    cwds,
    writes: [] as WriteTarget[],
    intoDirs: [],
    copies: [],
    trees: [],
    names: [],
  };
}

function toShell(state: State, home: string): ShellState {
  return { home, cwds: state.cwds, vars: state.vars };
}

function clone(state: State): State {
  return { cwds: state.cwds, vars: new Map(state.vars) };
}

function union(a: State, b: State): State {
  if (a === b) return a;
  const cwds = a.cwds && b.cwds ? [...new Set([...a.cwds, ...b.cwds])] : undefined;
  const vars = new Map<string, string | null>();
  for (const key of new Set([...a.vars.keys(), ...b.vars.keys()])) {
    const x = a.vars.get(key);
    const y = b.vars.get(key);
    vars.set(key, x !== undefined && x === y ? x : null);
  }
  return { cwds, vars };
}

function inside(abs: string, dir: string): boolean {
  return abs === dir || abs.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

function plainName(e: Syntax.TestExpression): boolean {
  if (e.kind !== 'word') return false;
  const p = e.word.parts;
  return p.length === 1 && p[0]!.kind === 'text' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(p[0]!.value);
}

function integer(e: Syntax.TestExpression): boolean {
  if (e.kind !== 'word') return false;
  const p = e.word.parts;
  return p.length === 1 && p[0]!.kind === 'text' && /^-?\d+$/.test(p[0]!.value);
}

function visitSimple(st: Syntax.Statement, fn: (cmd: Syntax.SimpleCommand) => void): void {
  switch (st.kind) {
    case 'simple':
      fn(st);
      return;
    case 'pipeline':
      st.stages.forEach((s) => visitSimple(s, fn));
      return;
    case 'and-or':
      visitSimple(st.left, fn);
      visitSimple(st.right, fn);
      return;
    case 'subshell':
    case 'group':
      st.body.items.forEach((i) => visitSimple(i.statement, fn));
      return;
    case 'negated':
      visitSimple(st.body, fn);
      return;
    default:
      return;
  }
}

function summarize(parts: Part[]): Analysis {
  if (parts.length === 0) {
    const empty: Part = {
      command: '',
      verdict: 'allow',
      reason: 'the command is empty',
      rule: 'readOnly:empty',
    };
    return { verdict: 'allow', decisive: empty, parts: [empty], readOnly: true };
  }
  let decisive = parts[0]!;
  for (const p of parts) if (RANK[p.verdict] > RANK[decisive.verdict]) decisive = p;
  const readOnly = decisive.verdict === 'allow' && parts.every((p) => p.rule.startsWith('readOnly:'));
  return { verdict: decisive.verdict, decisive, parts, readOnly };
}

function continuationInsideWord(source: string): boolean {
  for (let at = source.indexOf('\\\n'); at >= 0; at = source.indexOf('\\\n', at + 2)) {
    const before = source[at - 1];
    const after = source[at + 2];
    if (before !== undefined && !/\s/.test(before) && after !== undefined && !/\s/.test(after)) return true;
  }
  return false;
}
